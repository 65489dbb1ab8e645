"""Countdown as an OpenEnv 0.10 environment (OpenEnv's API only), for
``python -m bench.hosted openenv``: add numbers for ``TURNS`` turns; reward 1 at the end
if the total is even."""

from __future__ import annotations

from typing import Any

from openenv.core.env_server import (  # pyright: ignore[reportMissingImports] (openenv extra)
    Action,
    Environment,
    Observation,
    State,
)

TURNS = 10


class CountAction(Action):
    by: int


class CountObservation(Observation):
    total: int
    left: int


class Countdown(Environment[CountAction, CountObservation, State]):
    """Add numbers for ``TURNS`` turns; reward 1 at the end if the total is even."""

    def __init__(self) -> None:
        super().__init__()
        self._state, self._total = State(), 0

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> CountObservation:
        self._state, self._total = State(episode_id=episode_id, step_count=0), (seed or 0) % 7
        return CountObservation(total=self._total, left=TURNS)

    def step(
        self, action: CountAction, timeout_s: float | None = None, **kwargs: Any
    ) -> CountObservation:
        self._state.step_count += 1
        self._total += action.by
        left = TURNS - self._state.step_count
        reward = float(self._total % 2 == 0) if left == 0 else 0.0
        return CountObservation(total=self._total, left=left, done=left == 0, reward=reward)

    @property
    def state(self) -> State:
        return self._state
