"""A fresh worker's warm-up (``worker.WarmUp``): the fork server starts only the
environments Wander ships, and a warmed-up worker answers exactly what a cold one does."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from wander.sdk import EnvConfig, Environment, Reset, Score, Transition
from wander.service.envs import Registry
from wander.service.sandbox.confine import NO_GRANTS, Grants
from wander.service.sandbox.forkserver import _asked
from wander.service.sandbox.worker import FALLBACK, WarmUp, Worker, answer

SHIPPED = ("sql", "rg/spiral_matrix", "rg/countdown")


class Counted(Environment[EnvConfig]):
    """A third party's environment that counts the episodes started."""

    name = "counted"
    version = "0.1.0"
    description = "Say anything."
    kind = "single_turn"
    Config = EnvConfig
    reward_weights = {"said": 1.0}
    started = 0

    def examples(self, config: EnvConfig, split: str) -> list[str]:
        return ["x"]

    def reset(self, config: EnvConfig, example: Any, seed: int) -> Reset:
        Counted.started += 1
        return Reset({"said": None}, [{"role": "user", "content": "Say anything."}])

    def step(self, config: EnvConfig, state: Any, action: Any, rng: Any) -> Transition:
        return Transition({"said": action.get("content")}, [], True)

    def score(self, config: EnvConfig, state: Any) -> Score:
        return Score({"said": float(bool(state["said"]))}, {})


@pytest.fixture(scope="module")
def registry() -> Registry:
    installed = Registry.from_entry_points()
    return Registry([*(installed[name] for name in (*SHIPPED, FALLBACK)), Counted()])


def _call(worker: Worker, request: dict[str, Any]) -> dict[str, Any]:
    return answer(worker, orjson.dumps(request))


def _calls(registry: Registry, name: str) -> dict[str, dict[str, Any]]:
    """A start, a step and a rescore of ``name``'s example 3 (the warm-up plays 0)."""
    env = registry[name]
    base = {"env": name, "config": env.Config().model_dump(mode="json")}
    start = {**base, "op": "start", "split": "train", "index": 3, "seed": 7}
    state = _call(Worker(registry), start)["ok"]["state"]
    action = {"role": "assistant", "content": "<answer>1 2 3</answer>"}
    return {
        "start": start,
        "advance": {**base, "op": "advance", "state": state, "action": action, "seed": 8},
        "rescore": {**base, "op": "rescore", "state": state},
    }


def test_the_fork_server_starts_a_shipped_environment_once(registry: Registry) -> None:
    warm_up = WarmUp(Worker(registry))
    episode = warm_up.prepare("sql")
    assert episode is not None and set(episode) == {"env", "config", "state"}
    assert warm_up.prepare("sql") is episode


def test_the_fork_server_never_runs_a_plugins_environment(registry: Registry) -> None:
    warm_up = WarmUp(Worker(registry))
    before = Counted.started
    assert warm_up.prepare("counted") is None
    assert warm_up.prepare("no-such-env") is None
    assert Counted.started == before
    assert "no-such-env" not in warm_up.episodes  # names the registry lacks are not kept


@pytest.mark.parametrize("name", SHIPPED)
@pytest.mark.parametrize("op", ["start", "advance", "rescore"])
def test_a_warmed_up_worker_answers_what_a_cold_one_does(
    registry: Registry, name: str, op: str
) -> None:
    request = _calls(registry, name)[op]
    cold = _call(Worker(registry), request)
    warm = Worker(registry)
    warm_up = WarmUp(warm)
    warm_up.run(op, warm_up.prepare(name))
    assert "ok" in cold
    assert _call(warm, request) == cold


@pytest.mark.parametrize(("op", "name"), [(None, "sql"), ("bogus", "sql"), ("advance", "counted")])
def test_without_a_warm_up_episode_the_worker_plays_the_fallback(
    registry: Registry, op: str | None, name: str
) -> None:
    warm_up = WarmUp(Worker(registry))
    before = Counted.started
    warm_up.run(op, warm_up.prepare(name))
    assert Counted.started == before  # neither in the server nor in the worker
    assert FALLBACK in warm_up.episodes


@pytest.mark.parametrize(
    ("request_bytes", "named"),
    [
        (b'{"env": "sql", "op": "advance"}', ("sql", "advance", NO_GRANTS)),
        (b'{"env": "vf/x", "op": "start", "network": true}', ("vf/x", "start", Grants(True))),
        (b'{"env": "vf/x", "op": "start", "processes": true}',
         ("vf/x", "start", Grants(processes=True))),
        (b'{"env": "sql", "op": "advance", "network": 1, "processes": "yes"}',
         ("sql", "advance", NO_GRANTS)),
        (b'{"env": null, "op": null}', (None, None, NO_GRANTS)),
        (b'{"env": 3, "op": ["advance"]}', (None, None, NO_GRANTS)),
        (b'["sql"]', (None, None, NO_GRANTS)),
        (b"not json", (None, None, NO_GRANTS)),
    ],
)  # fmt: skip
def test_a_fork_request_names_at_most_an_environment_a_call_and_its_grants(
    request_bytes: bytes, named: tuple[str | None, str | None, Grants]
) -> None:
    assert _asked(request_bytes) == named
