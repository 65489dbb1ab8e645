"""The model's sampled text, made fit to send to Wander."""

from __future__ import annotations


def storable(text: str) -> str:
    """The model's text as Wander takes it: the NUL character, which the service refuses
    (PostgreSQL cannot store it) and an untrained model samples like any other byte,
    becomes U+FFFD."""
    return text.replace("\0", "\ufffd")
