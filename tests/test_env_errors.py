"""A malformed answer is a wrong answer; an environment that raises is a 422.

reasoning-gym scorers raise on answers they cannot read (``int('nan')``, parentheses
nested past the recursion limit): those score 0, with the exception's name in the
metrics, so a trainer gets its reward. An environment that raises anywhere else (a
plugin's bug, input it does not handle) fails that call with 422 ``env_error``, naming
the environment and the exception's class: never a 500.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers import IN_THE_SHARED_LOOP, create, error_of, plugin_service, step
from wander.client import EnvironmentFailed, WanderClient
from wander.service.envs import Registry
from wander.testing import ServiceProcess

SHARED_SERVICE = True

MALFORMED = [
    ("prime_factorization", "nan", "ValueError"),
    ("propositional_logic", "(" * 3000 + "P" + ")" * 3000, "RecursionError"),
    ("codeio", '{"a": ' * 3000 + "1" + "}" * 3000, "RecursionError"),
]


@IN_THE_SHARED_LOOP
@pytest.mark.parametrize(("dataset", "answer", "raised"), MALFORMED, ids=[m[0] for m in MALFORMED])
async def test_an_answer_its_scorer_cannot_read_scores_zero(
    api: httpx.AsyncClient, dataset: str, answer: str, raised: str
) -> None:
    [episode] = await create(api, env=f"rg/{dataset}", example=0)
    response = await step(api, episode["id"], f"<answer>{answer}</answer>", 0)
    assert response.status_code == 200, response.text
    assert response.json()["done"] is True
    assert response.json()["reward"] == pytest.approx(0.1)  # the format, not the answer
    score = (await api.get(f"/v1/episodes/{episode['id']}/score")).json()
    assert score["components"] == {"correct": 0.0, "format": 1.0}
    assert score["metrics"]["scorer_error"] == raised


@IN_THE_SHARED_LOOP
async def test_the_right_answer_still_scores_1(api: httpx.AsyncClient) -> None:
    env = Registry.from_entry_points()["rg/prime_factorization"]
    answer = env.entry(env.Config(), "train", 0)["answer"]
    [episode] = await create(api, env="rg/prime_factorization", example=0, split="train")
    await step(api, episode["id"], f"<answer>{answer}</answer>", 0)
    score = (await api.get(f"/v1/episodes/{episode['id']}/score")).json()
    assert score["components"] == {"correct": 1.0, "format": 1.0}
    assert "scorer_error" not in score["metrics"]


@pytest.fixture(scope="module")
def service(
    plugin_site: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    """A real service with the test plugin, whose ``faulty`` environment raises on request."""
    with plugin_service(plugin_site, tmp_path_factory.mktemp("env-errors")) as process:
        yield process


def assert_env_error(response: httpx.Response, raised: str) -> None:
    assert response.status_code == 422, response.text
    error = error_of(response)
    assert error["code"] == "env_error"
    assert "'faulty'" in error["message"] and raised in error["message"]
    assert error["details"] == {"exception": raised}
    assert "fails" not in response.text  # the exception's text stays in the service's log


async def test_a_reset_that_raises_is_an_env_error(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/episodes", json={"env": "faulty", "example": 1})
    assert_env_error(response, "ValueError")


@pytest.mark.parametrize(
    ("answer", "raised"), [("step", "KeyError"), ("score", "ZeroDivisionError")]
)
async def test_a_step_or_score_that_raises_is_an_env_error_and_applies_nothing(
    client: httpx.AsyncClient, answer: str, raised: str
) -> None:
    [episode] = await create(client, env="faulty", example=0)
    assert_env_error(await step(client, episode["id"], answer, 0), raised)
    record = (await client.get(f"/v1/episodes/{episode['id']}")).json()
    assert record["turn"] == 0 and record["status"] == "active"
    fine = await step(client, episode["id"], "fine", 0)  # its worker goes on
    assert fine.status_code == 200, fine.text
    assert fine.json()["reward"] == 1.0


async def test_a_batch_item_whose_environment_raises_fails_alone(
    client: httpx.AsyncClient,
) -> None:
    games = [(await create(client, example=i))[0] for i in range(3)]
    [faulty] = await create(client, env="faulty", example=0)
    steps = [{"episode_id": game["id"], "action": "<move>4</move>", "turn": 0} for game in games]
    steps.insert(1, {"episode_id": faulty["id"], "action": "step", "turn": 0})

    response = await client.post("/v1/step", json={"steps": steps})

    assert response.status_code == 200, response.text
    results = response.json()["results"]
    failed = results.pop(1)
    assert failed["episode_id"] == faulty["id"]
    assert failed["error"]["code"] == "env_error"
    assert failed["error"]["details"] == {"exception": "KeyError"}
    assert [r["turn"] for r in results] == [1, 1, 1]


def test_the_client_raises_environment_failed(service: ServiceProcess) -> None:
    with WanderClient(service.url) as wander:
        [episode] = wander.create("faulty", example=0)
        with pytest.raises(EnvironmentFailed) as raised:
            wander.step(episode.id, "step")
    assert raised.value.status == 422 and raised.value.code == "env_error"
