"""Frames between the service and the processes it starts (an environment worker, the
archive's writer): 8 bytes of length (big-endian), then the body (JSON to a worker)."""

from __future__ import annotations

import os

HEADER = 8
MAX_FRAME_BYTES = 256 << 20
"""The largest request a worker reads (the service's own). A worker's reply is capped
far lower, at ``WANDER_MAX_EPISODE_BYTES``, by the pool that reads it (``launcher.py``)."""


def read_frame(fd: int) -> bytes | None:
    """The next frame, or None when the stream ends (the other side is gone)."""
    header = _read_exactly(fd, HEADER)
    if header is None:
        return None
    size = int.from_bytes(header, "big")
    if size > MAX_FRAME_BYTES:
        raise ValueError(f"a frame of {size} bytes")
    return _read_exactly(fd, size)


def frame(body: bytes) -> bytes:
    return len(body).to_bytes(HEADER, "big") + body


def write_frame(fd: int, body: bytes) -> None:
    data = memoryview(frame(body))
    while data:
        data = data[os.write(fd, data) :]


def _read_exactly(fd: int, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
