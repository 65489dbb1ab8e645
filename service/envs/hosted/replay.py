"""Rebuilding another framework's live environment from the actions of its episode.

A hosted environment's state holds its seed, the actions taken and a digest of every
observation the environment gave. To step it anywhere (another replica, after a
restart), the adapter makes a fresh environment and replays the actions under the same
seeds, checking each observation against its digest: an environment that answers the
same actions differently (a clock, an unseeded generator) is caught at the turn where it
diverged, and its episode fails with ``env_nondeterministic`` rather than continuing
from a game that never happened.

Environments of other frameworks draw from Python's global ``random`` and NumPy's
global generator (TextArena seeds ``random`` from its task), so every call into one runs
inside ``seeded_globals``: both generators seeded from Wander's per-turn seed, and put
back as they were afterwards.

Live environments are kept per process (``LiveRuns``): a step that lands where its
episode's previous step ran continues the live object instead of replaying.
"""

from __future__ import annotations

import hashlib
import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from cachetools import LRUCache

from wander.service.envs.seeding import canonical_json, stable_hash

LIVE_RUNS = 64
"""Live environments a process keeps (least recently used first out); an evicted one is
rebuilt by replay when its episode steps again."""

T = TypeVar("T")


class Nondeterministic(Exception):
    """A replayed environment answered a recorded action differently than it did when
    the action was taken: the episode cannot go on (``env_nondeterministic``)."""

    def __init__(self, turn: int) -> None:
        super().__init__(
            f"replaying the episode, turn {turn} gave another observation than it did "
            "when it was played: the environment is not deterministic under its seeds"
        )
        self.turn = turn


def digest(value: Any) -> str:
    """A short, stable digest of a JSON value (an observation as the state records it)."""
    return hashlib.blake2b(canonical_json(value), digest_size=12).hexdigest()


def turn_seed(seed: int, turn: int, actions: list[Any]) -> int:
    """The seed of the call that takes ``actions[turn]`` (``turn`` -1: the reset): a
    function of the episode's seed and the actions so far, so two episodes of a group
    that took the same actions see the same answers."""
    return stable_hash(seed, turn, actions[: turn + 1])


@contextmanager
def seeded_globals(seed: int) -> Iterator[None]:
    """Python's ``random`` and, where imported, NumPy's global generator seeded by
    ``seed`` (NumPy takes 32 bits); both restored on exit."""
    kept = random.getstate()
    numpy = sys.modules.get("numpy")
    kept_numpy = numpy.random.get_state() if numpy is not None else None
    random.seed(seed)
    if numpy is not None:
        numpy.random.seed(seed & 0xFFFF_FFFF)
    try:
        yield
    finally:
        random.setstate(kept)
        if numpy is not None:
            numpy.random.set_state(kept_numpy)


class _Closing(LRUCache[str, Any]):
    """An LRU cache that closes what it evicts (a paused episode holds an event loop)."""

    def popitem(self) -> tuple[str, Any]:
        key, run = super().popitem()
        close = getattr(run, "close", None)
        if callable(close):
            close()
        return key, run


class LiveRuns(Generic[T]):
    """Live environments by the episode they are at: the key names the environment, its
    config, the episode's seed and every action taken, so an entry is found exactly by the
    next step of that episode. ``take`` removes it: a step that fails, or two steps that
    race for one episode, leave nothing half-applied behind (the loser replays)."""

    def __init__(self, size: int = LIVE_RUNS) -> None:
        self._runs: LRUCache[str, T] = _Closing(size)

    @staticmethod
    def key(*parts: Any) -> str:
        return digest(list(parts))

    def take(self, key: str) -> T | None:
        return self._runs.pop(key, None)

    def keep(self, key: str, run: T) -> None:
        self._runs[key] = run
