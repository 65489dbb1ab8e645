"""What the operator grants environments beyond the workers' confinement
(``WANDER_ENV_NETWORK``, ``WANDER_ENV_PROCESSES``), and the refusal to serve a hosted
environment that starts processes without them (tests/test_worker_isolation.py shows
what a granted worker can and cannot do)."""

from __future__ import annotations

from typing import Any

import pytest

from wander.sdk import EnvConfig, Reset, Score, Transition
from wander.service.envs.hosted import Hosted
from wander.service.sandbox import Sandbox, UngrantedProcesses, granted
from wander.service.sandbox.confine import NO_GRANTS, Grants
from wander.service.settings import Settings


class Tooled(Hosted[EnvConfig]):
    """A hosted environment whose episodes start processes (as a tool taskset's do)."""

    version = "0"
    description = "starts processes"
    kind = "tool"
    Config = EnvConfig
    reward_weights = {"done": 1.0}
    starts_processes = True

    def __init__(self, name: str) -> None:
        self.name = name  # type: ignore[misc]

    def examples(self, config: EnvConfig, split: str) -> list[int]:
        return [0]

    def reset(self, config: EnvConfig, example: Any, seed: int) -> Reset:
        return Reset({}, [{"role": "user", "content": "go"}])

    def step(self, config: EnvConfig, state: Any, action: Any, rng: Any) -> Transition:
        return Transition(state, [], True)

    def score(self, config: EnvConfig, state: Any) -> Score:
        return Score({"done": 1.0}, {})


def test_each_environment_gets_what_the_settings_name_it_in() -> None:
    settings = Settings(env_network=" vf/openenv, vf/ledger ", env_processes="vf/ledger,")
    assert granted(settings) == {
        "vf/openenv": Grants(network=True),
        "vf/ledger": Grants(network=True, processes=True),
    }
    assert not NO_GRANTS and Grants(processes=True)
    assert granted(Settings()) == {}


def test_a_hosted_environment_that_starts_processes_is_served_only_if_granted_them() -> None:
    environments = [Tooled("vf/ledger"), Tooled("vf/abacus")]
    with pytest.raises(UngrantedProcesses) as refused:
        Sandbox(Settings(env_processes="vf/ledger", env_network="vf/abacus"), environments)
    assert str(refused.value).startswith("vf/abacus starts processes")
    assert "WANDER_ENV_PROCESSES" in str(refused.value)
    Sandbox(Settings(env_processes="vf/ledger,vf/abacus"), environments)
