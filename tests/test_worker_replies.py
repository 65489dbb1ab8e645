"""A worker's reply is not believed (service/sandbox/replies.py).

An attacker with code inside a worker (the ``hostile`` plugin environment stands for an
environment with a hole) writes the worker's reply frame itself. Each reply that is not
what its call returns (a reward past the environment's range, a score that is not a
number, a message of an unknown role, ``done`` that is not a bool, a frame larger than
the largest episode) is 422 ``env_failed`` or 413, stores nothing and never a 500; an
exception class made inside the worker is named ``Exception``, not by its name.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import create, error_of, plugin_service, step
from wander.testing import ServiceProcess


@pytest.fixture(scope="module")
def service(
    plugin_site: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    """A real service with the test plugin, whose ``hostile`` environment forges replies."""
    with plugin_service(plugin_site, tmp_path_factory.mktemp("replies")) as process:
        yield process


def reply(**changes: Any) -> dict[str, Any]:
    """A well-formed advance reply of ``hostile``, with ``changes`` to its result."""
    score = {"total": 1.0, "components": {"said": 1.0}, "metrics": {}, "outcome": "win"}
    result = {"state": {"said": "x"}, "messages": [], "done": True, "invalid": False,
              "score": score, "info": {"said": "x"}}  # fmt: skip
    return {"ok": {**result, **changes}}


def scored(**changes: Any) -> dict[str, Any]:
    score = {"total": 1.0, "components": {"said": 1.0}, "metrics": {}, "outcome": "win"}
    return reply(score={**score, **changes})


FORGED = {
    "a reward of a billion": scored(total=1e9, components={"said": 1e9}),
    "a component the environment does not have": scored(components={"bonus": 1.0}),
    "a total that is not a number": scored(total="not a number"),
    "a component that is text": scored(components={"said": "1"}),
    "a component that is a bool": scored(components={"said": True}),
    "an outcome past 64 characters": scored(outcome="w" * 65),
    "an empty result": {"ok": {}},
    "a result that is a list": {"ok": []},
    "a message of role bogus": reply(messages=[{"role": "bogus", "content": "hi"}]),
    "a message that is text": reply(messages=["hi"]),
    "done that is text": reply(done="yes"),
    "a state that is a list": reply(state=[1, 2]),
    "a state holding NUL": reply(state={"said": "\u0000"}),
    "a message whose content is a number": reply(messages=[{"role": "user", "content": 7}]),
    "neither a result nor an error": {"hello": 1},
}


@pytest.mark.parametrize("forged", FORGED.values(), ids=FORGED.keys())
async def test_a_forged_reply_fails_the_call_and_stores_nothing(
    client: httpx.AsyncClient, forged: dict[str, Any]
) -> None:
    [episode] = await create(client, env="hostile")
    before = (await client.get(f"/v1/episodes/{episode['id']}")).json()
    response = await step(client, episode["id"], f"forge {json.dumps(forged)}", 0)
    assert response.status_code == 422, response.text
    assert error_of(response)["code"] == "env_failed"
    after = await client.get(f"/v1/episodes/{episode['id']}")
    assert after.status_code == 200 and after.json() == before
    fine = await step(client, episode["id"], "fine", 0)  # the worker was replaced
    assert fine.status_code == 200, fine.text
    assert fine.json()["reward"] == 1.0


async def test_an_exception_class_made_in_the_worker_is_not_named(
    client: httpx.AsyncClient,
) -> None:
    """A class named after the hidden answer leaked it through ``details.exception``."""
    [episode] = await create(client, env="hostile")
    response = await step(client, episode["id"], "raise ANSWER=8 3 3 1 5", 0)
    assert response.status_code == 422, response.text
    error = error_of(response)
    assert error["code"] == "env_error"
    assert error["details"] == {"exception": "Exception"}
    assert "ANSWER" not in response.text and "quotes" not in response.text


async def test_a_forged_error_names_no_class_of_its_own(client: httpx.AsyncClient) -> None:
    [episode] = await create(client, env="hostile")
    forged = {"error": "ANSWER=8 3 3", "raised": "ANSWER=8 3 3"}
    response = await step(client, episode["id"], f"forge {json.dumps(forged)}", 0)
    assert response.status_code == 422, response.text
    assert error_of(response)["details"] == {"exception": "Exception"}
    assert "ANSWER" not in response.text


def resident_bytes(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) * 1024


async def test_a_reply_larger_than_an_episode_is_refused_unread(
    client: httpx.AsyncClient, service: ServiceProcess
) -> None:
    """240 MB took the service from 371 MB to 1.4 GB when frames of 256 MB were read."""
    assert service.process is not None
    [episode] = await create(client, env="hostile")
    before = resident_bytes(service.process.pid)
    response = await step(client, episode["id"], f"frame {240 << 20}", 0)
    grown = resident_bytes(service.process.pid) - before
    assert response.status_code == 413, response.text
    error = error_of(response)
    assert error["code"] == "payload_too_large"
    assert error["details"]["max_episode_bytes"] == 8 << 20
    assert grown < 32 << 20, f"the service grew by {grown >> 20} MB"
    after = (await client.get(f"/v1/episodes/{episode['id']}")).json()
    assert after["turn"] == 0 and after["status"] == "active"
