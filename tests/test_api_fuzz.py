"""Arbitrary JSON bodies never make the service fail with a 500."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import create, error_of

CLIENT_ERRORS = {400, 404, 409, 413, 422}

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
field_values = st.one_of(
    json_values, st.sampled_from(["tictactoe", "train", "eval", "<move>4</move>", 0, 1, -1])
)


def bodies(fields: list[str]) -> st.SearchStrategy[Any]:
    return json_values | st.dictionaries(
        st.sampled_from(fields), field_values, max_size=len(fields)
    )


@pytest.mark.parametrize("store_kind", ["redis"])  # the HTTP layer is the same on both
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    create_body=bodies(["env", "config", "split", "example", "seed", "n", "run", "metadata"]),
    step_body=bodies(["action", "turn"]),
    batch_body=bodies(["steps"]),
)
async def test_no_body_causes_a_server_error(
    api: httpx.AsyncClient, create_body: Any, step_body: Any, batch_body: Any
) -> None:
    [episode] = await create(api, example=0)
    for path, body in [
        ("/v1/episodes", create_body),
        (f"/v1/episodes/{episode['id']}/step", step_body),
        ("/v1/step", batch_body),
    ]:
        response = await api.post(path, json=body)
        assert response.status_code < 500, (path, body, response.text)
        if response.status_code >= 400:
            assert response.status_code in CLIENT_ERRORS
            error_of(response)
