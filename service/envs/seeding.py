"""Stable seeds (docs/architecture.md, "Seeds and determinism").

Python's built-in ``hash()`` is salted per process and the global ``random``
module is shared state, so neither may decide anything an episode depends on.
Every seed is instead a BLAKE2b digest of canonical JSON, which is the same on
every machine, every process and every Python version.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

SEED_BITS = 63
_SEED_MASK = (1 << SEED_BITS) - 1


_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)
"""Built once: ``json.dumps`` with options builds an encoder per call, which cost more
than the encoding in the per-turn seeds."""


def canonical_json(value: Any) -> bytes:
    """Serialise ``value`` so that equal values always give equal bytes."""
    return _CANONICAL.encode(value).encode()


def stable_hash(*parts: Any) -> int:
    """A 63-bit integer determined only by ``parts`` (any JSON-serialisable values)."""
    digest = hashlib.blake2b(canonical_json(list(parts)), digest_size=8).digest()
    return int.from_bytes(digest, "big") & _SEED_MASK


def example_seed(env: str, split: str, config_seed: int, example: int) -> int:
    """The seed of example ``example`` of ``split``: ``H(env, split, config.seed, example)``."""
    return stable_hash(env, split, config_seed, example)


class TurnRandom:
    """Hands out the per-turn random generators of one episode.

    ``turn_seed = H(example_seed, position)``: an environment asks for the
    generator of the canonical public position it is responding to, so two
    rollouts of a group that reach the same position (by whatever path) get the
    same environment response, and the differences inside a GRPO group come from
    the policy alone.
    """

    __slots__ = ("example_seed",)

    def __init__(self, example_seed: int) -> None:
        self.example_seed = example_seed

    def at(self, position: Any) -> random.Random:
        """A fresh generator seeded by ``H(example_seed, position)``."""
        return random.Random(stable_hash(self.example_seed, position))

    def __repr__(self) -> str:
        return f"TurnRandom(example_seed={self.example_seed})"
