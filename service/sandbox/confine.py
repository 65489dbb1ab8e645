"""What makes an environment worker unprivileged, layer by layer.

A worker runs model text through scorers that may ``eval`` it (reasoning-gym's
``spiral_matrix``, sympy's ``parse_expr``...), so the process is built on the
assumption that the text runs as code. ``confine`` is called in the worker after it
imported the environments and before it reads its first request; each layer stops
something the others do not:

- **no network** (``unshare(CLONE_NEWNET)``, root only): a network namespace of its
  own, with a loopback device that is down, so code cannot reach Redis, PostgreSQL,
  the cloud's metadata endpoint or the internet; only the pipes to the service remain.
- **another user** (``setgroups([])``, ``setgid``/``setuid`` to ``nobody``, root
  only): it cannot signal or trace the service, read root's files (``/root``, the
  service's ``0600`` files) or write where root may, and it can never regain root.
- **no secrets**: the service starts it with a fixed environment (``worker_environment``
  in ``pool.py``: no ``WANDER_*`` variable, so no database or Redis URL and password)
  from a fresh interpreter, so they are not in its memory either.
- **a private empty working directory**, removed when the worker goes.
- **rlimits**: ``RLIMIT_AS`` (the memory budget: an allocation past it raises
  MemoryError instead of swapping the machine), ``RLIMIT_CPU`` (a backstop should the
  service not kill it), ``RLIMIT_FSIZE`` 0 (it cannot write a byte into any file, even
  one that ``nobody`` may create), ``RLIMIT_NOFILE`` (few descriptors), ``RLIMIT_NPROC``
  0 once it is ``nobody`` (``fork`` and new threads fail, so no ``subprocess``: the
  limit counts the user's processes, which is why it needs the user of its own) and
  ``RLIMIT_CORE`` 0.
- **parent death** (``PR_SET_PDEATHSIG``): it is killed when the service dies, even
  by ``kill -9``, so it never outlives it.

The deadline of each call is not here: the service enforces it from outside, by
killing the worker (``pool.py``), which no code inside can prevent. Not run as root
(a developer's machine), only the rlimits, the environment, the directory and the
parent-death signal apply; ``RLIMIT_NPROC`` is then left alone, as it would count the
user's own processes.
"""

from __future__ import annotations

import ctypes
import os
import pwd
import resource
import signal
from dataclasses import asdict, dataclass

CLONE_NEWNET = 0x4000_0000
PR_SET_PDEATHSIG = 1
OPEN_FILES = 64
"""Descriptors a worker may hold: its pipes, and files a scorer opens."""
UNPRIVILEGED_USER = "nobody"


@dataclass(frozen=True)
class Limits:
    """What the service tells a worker it may use (sent as its command-line argument)."""

    memory_bytes: int
    cpu_seconds: int
    """CPU time of the worker's whole life; it retires before reaching it."""
    parent: int
    """The service's pid: the worker stops if it is already gone at start."""

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def confine(limits: Limits) -> list[str]:
    """Apply every layer this machine allows; returns their names (for the log)."""
    applied = []
    root = os.geteuid() == 0
    if root:
        _unshare_network()
        applied.append("network namespace")
        _become(UNPRIVILEGED_USER)
        applied.append(f"user {UNPRIVILEGED_USER}")
    _limit(resource.RLIMIT_AS, limits.memory_bytes)
    _limit(resource.RLIMIT_CPU, limits.cpu_seconds)
    _limit(resource.RLIMIT_FSIZE, 0)
    _limit(resource.RLIMIT_NOFILE, OPEN_FILES)
    _limit(resource.RLIMIT_CORE, 0)
    applied.append("rlimits")
    if root:  # now a user of its own: no process of it may start another
        _limit(resource.RLIMIT_NPROC, 0)
        applied.append("no processes")
    _die_with_parent(limits.parent)
    return applied


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _unshare_network() -> None:
    if _libc().unshare(CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"unshare(CLONE_NEWNET): {os.strerror(errno)}")


def _become(user: str) -> None:
    """Drop root for good: supplementary groups, group, then user (in that order: a
    process that is no longer root cannot change its groups)."""
    entry = pwd.getpwnam(user)
    os.chown(".", entry.pw_uid, entry.pw_gid)  # the private working directory
    os.setgroups([])
    os.setgid(entry.pw_gid)
    os.setuid(entry.pw_uid)
    try:
        os.setuid(0)
    except PermissionError:
        return
    raise RuntimeError("the worker could become root again")


def _limit(kind: int, value: int) -> None:
    resource.setrlimit(kind, (value, value))


def _die_with_parent(parent: int) -> None:
    """SIGKILL when the service ends. Set after the change of user, which clears it."""
    if _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != parent:  # the service died before the signal was armed
        os._exit(1)
