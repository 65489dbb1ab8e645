"""schemathesis over the service's own OpenAPI document, on both stores: whatever a
request holds, the answer is never a 5xx, and its status, content type, headers and
body are the ones the document declares for that route (schemathesis's default checks,
one exclusion below, with its reason)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis import Case, HookContext
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import positive_data_acceptance

from tests.conftest import redis_keys
from wander.service.app import create_app
from wander.service.archive.migrations import upgrade
from wander.service.settings import Settings
from wander.testing import ServiceProcess

KEY = "wdr_schema-admin-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
"""An admin's key: every route is open to it, so generated requests reach past the
authentication. schemathesis sends it as the document's `bearer` scheme says, and checks
the authentication on its own (requests without it, or with a wrong one, must be 401)."""
ENVS = ["tictactoe", "tictactoe_move", "reverse_text", "double_check", "sql"]
"""The service's own in-process environments: those the requests mostly name."""

# Requests mostly about what the service has: random names are all 404 env_not_found or
# run_not_found, random examples past their split, random sizes past WANDER_MAX_GROUP_SIZE.
CONFIG = SchemathesisConfig.from_dict({
    "auth": {"openapi": {"bearer": {"bearer": KEY}}},
    "dictionaries": {
        "envs": {"values": ENVS},
        "splits": {"values": ["train", "eval"]},
        "small": {"values": [0, 1, 2]},
        "runs": {"values": ["schema"]},
    },
    "parameters": {
        "body.env": {"dictionary": "envs", "probability": 0.8},
        "body.split": {"dictionary": "splits", "probability": 0.8},
        "body.example": {"dictionary": "small", "probability": 0.8},
        "body.n": {"dictionary": "small", "probability": 0.8},
        "path.run": {"dictionary": "runs", "probability": 0.5},
        "path.name": {"dictionary": "envs", "probability": 0.5},
        "path.env": {"dictionary": "envs", "probability": 0.8},
    },
})  # fmt: skip
# The document does not depend on the settings: the one an app builds is the one served.
SCHEMA = schemathesis.openapi.from_dict(
    create_app(Settings(redis_url=None)).openapi(), config=CONFIG
)

LIVE_EPISODES: list[str] = []
"""Episodes the service under test holds (``base_url`` creates them, a few of each
environment): the ids in paths are mostly these, so that steps, scores, records and
deletes of real episodes are checked too, not only 404s."""


@SCHEMA.hook
def flatmap_path_parameters(
    context: HookContext, parameters: dict[str, Any] | None
) -> st.SearchStrategy[dict[str, Any] | None]:
    if not parameters or "episode_id" not in parameters or not LIVE_EPISODES:
        return st.just(parameters)
    live = st.sampled_from(LIVE_EPISODES).map(lambda id: {**parameters, "episode_id": id})
    return live | st.just(parameters)


@SCHEMA.hook
def filter_query(context: HookContext, query: dict[str, Any] | None) -> bool:
    """Drop a query that holds anything but a list of strings where the document wants a
    list of free text (the runs' ``outcome`` filters). A query string carries only text,
    and one value is a one-item list, so a number, ``true``, a lone string or an object
    arrives as valid items: schemathesis's "negative" case is a positive one that the
    service rightly accepts (seen in CI: ``outcome=6.147974872485932e+162`` and
    ``outcome=false``, 200s the check called violations). A list of strings holding a NUL
    stays: that one the service must refuse."""
    if not query or context.operation is None:
        return True
    for parameter in context.operation.query:
        if parameter.name in query and _free_text_list(parameter.definition["schema"]):
            value = query[parameter.name]
            if value is not None and not (
                isinstance(value, list) and all(isinstance(item, str) for item in value)
            ):
                return False
    return True


def _free_text_list(schema: dict[str, Any]) -> bool:
    """Whether a parameter's schema is (or may be) a list of unconstrained strings."""
    return any(
        branch.get("type") == "array"
        and branch.get("items", {}).get("type") == "string"
        and "enum" not in branch["items"]
        for branch in schema.get("anyOf", [schema])
    )


@pytest.fixture(scope="module", params=["memory", "redis"])
def base_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A real `wander serve` on each store, with an archive and Redis keys of its own,
    holding two episodes of each of ``ENVS``, that wants ``KEY``."""
    database = f"sqlite:///{tmp_path_factory.mktemp('schema')}/archive.db"
    upgrade(database)
    env = {
        "WANDER_DATABASE_URL": database,
        "WANDER_REDIS_URL": "",
        "WANDER_API_KEYS": f"schema:admin:{KEY}",
    }
    with ExitStack() as stack:
        if request.param == "redis":
            redis_url = request.getfixturevalue("redis_url")
            prefix = stack.enter_context(redis_keys(redis_url, request.config))
            env |= {"WANDER_REDIS_URL": redis_url, "WANDER_REDIS_PREFIX": prefix}
        process = ServiceProcess(env).start()
        stack.callback(process.stop)
        LIVE_EPISODES[:] = [
            episode["id"]
            for name in ENVS
            for episode in httpx.post(
                f"{process.url}/v1/episodes",
                json={"env": name, "n": 2, "run": "schema"},
                headers=AUTH,
                timeout=60,  # reverse_text builds its dataset on first use: seconds
            ).json()["episodes"]
        ]
        stack.callback(LIVE_EPISODES.clear)
        yield process.url


# A creation the document allows may still be refused with 422, by rules it cannot
# state: they depend on the environment named (its config schema, its splits and their
# sizes) or on the settings (`n` up to WANDER_MAX_GROUP_SIZE); and free-form `config` and
# `metadata` hold no NUL and no integer past 64 bits, and JSON Schema cannot tell the
# integer 10**20 (refused) from the float 1e20 (kept).
# The OpenEnv surface's reset is such a creation; its step takes an OpenEnv action, a free-form
# object as OpenEnv's StepRequest has it, whose rules (a `content`, or a tool action of a tool
# environment, and no other field) depend on the environment too.
BEYOND_THE_DOCUMENT = {
    "POST /v1/episodes": [positive_data_acceptance],
    "POST /openenv/{env}/reset": [positive_data_acceptance],
    "POST /openenv/{env}/step": [positive_data_acceptance],
}


@SCHEMA.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_answer_keeps_to_the_schema(case: Case, base_url: str) -> None:
    excluded = BEYOND_THE_DOCUMENT.get(case.operation.label, [])
    case.call_and_validate(base_url=base_url, excluded_checks=excluded)
