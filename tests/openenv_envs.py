"""OpenEnv environments written only against OpenEnv's own API (``openenv.core``), as
their authors would write them: what ``WANDER_OPENENV`` hosts in the tests. Imported
only in the venv that has OpenEnv 0.10 (``tests/interop.py``).

``GuessNumber`` draws its secret from the ``seed`` OpenEnv's ``reset`` takes, and its
hints' wording from Python's global ``random`` (as TextArena does): both replay exactly
under Wander's seeds. ``Drifting`` reads the clock, so no replay can match it.
"""

from __future__ import annotations

import random
import time
from typing import Any

from openenv.core.env_server import (  # pyright: ignore[reportMissingImports] (interop venv)
    Action,
    Environment,
    Observation,
    State,
    create_app,
)


class GuessAction(Action):
    guess: int


class GuessObservation(Observation):
    hint: str
    guesses: int


class GuessNumber(Environment[GuessAction, GuessObservation, State]):
    """Guess a number from 1 to 100 in at most 7 guesses: reward 1 when found, else 0."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    LIMIT = 7

    def __init__(self) -> None:
        super().__init__()
        self._state = State()
        self._secret = 0

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> GuessObservation:
        self._secret = random.Random(seed).randint(1, 100)
        self._state = State(episode_id=episode_id, step_count=0)
        return GuessObservation(hint="Guess a number from 1 to 100.", guesses=0)

    def step(
        self, action: GuessAction, timeout_s: float | None = None, **kwargs: Any
    ) -> GuessObservation:
        self._state.step_count += 1
        count = self._state.step_count
        if action.guess == self._secret:
            return GuessObservation(hint="Found it!", guesses=count, done=True, reward=1.0)
        way = "higher" if action.guess < self._secret else "lower"
        hint = f"{random.choice(['Try', 'Go', 'Think'])} {way}."
        return GuessObservation(hint=hint, guesses=count, done=count >= self.LIMIT, reward=0.0)

    @property
    def state(self) -> State:
        return self._state


class EchoAction(Action):
    message: str


class EchoObservation(Observation):
    echoed: str


class Drifting(Environment[EchoAction, EchoObservation, State]):
    """Echoes each message with the time: another observation whenever it is replayed."""

    def __init__(self) -> None:
        super().__init__()
        self._state = State()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> EchoObservation:
        return EchoObservation(echoed="")

    def step(
        self, action: EchoAction, timeout_s: float | None = None, **kwargs: Any
    ) -> EchoObservation:
        return EchoObservation(echoed=f"{action.message} at {time.time_ns()}", reward=0.0)

    @property
    def state(self) -> State:
        return self._state


app = create_app(GuessNumber, GuessAction, GuessObservation, env_name="guess")
"""OpenEnv's own server of ``GuessNumber``, to compare Wander's rewards with."""
