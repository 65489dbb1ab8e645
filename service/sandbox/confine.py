"""What makes an environment worker unprivileged, layer by layer.

A worker runs model text through scorers that may ``eval`` it (reasoning-gym's
``spiral_matrix``, sympy's ``parse_expr``...), so the process is built on the
assumption that the text runs as code. ``confine`` is called in the worker after it
imported the environments and before it reads its first request; each layer stops
something the others do not:

- **no network** (``unshare(CLONE_NEWNET)``, root only): a network namespace of its
  own, with a loopback device that is down, so code cannot reach Redis, PostgreSQL,
  the cloud's metadata endpoint or the internet; only the pipes to the service remain.
- **a file system of its own** (``unshare(CLONE_NEWNS)``, a ``tmpfs`` root and
  ``chroot``, root only): it sees only what Python and the environments need, bound
  read-only (the system's ``/usr``, the interpreter, every ``sys.path`` folder, the
  folders the loaded packages came from, ``/dev/null`` and the random devices) and its
  working directory. Nothing else of the machine exists for it: not the archive's
  SQLite file, not the service's configuration, not ``/etc``, ``/home`` or ``/proc``,
  whatever their permissions say.
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
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

CLONE_NEWNS = 0x0002_0000
CLONE_NEWNET = 0x4000_0000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
    1, 2, 4, 32, 4096, 16384, 1 << 18
)  # fmt: skip
SYSTEM = ("/usr", "/bin", "/lib", "/lib64", "/sbin")
"""The system's programs and shared libraries (a C extension imported late needs them)."""
DEVICES = ("/dev/null", "/dev/zero", "/dev/random", "/dev/urandom")
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
        user = pwd.getpwnam(UNPRIVILEGED_USER)  # while /etc/passwd is there to read
        _unshare(CLONE_NEWNET | CLONE_NEWNS)
        applied.append("network namespace")
        _enter_jail(Path.cwd(), _needed_paths())
        applied.append("private file system")
        _become(user)
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


def _unshare(flags: int) -> None:
    if _libc().unshare(flags) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"unshare({flags:#x}): {os.strerror(errno)}")


def _mount(source: str | None, target: str | Path, kind: str | None, flags: int,
           data: str | None = None) -> None:  # fmt: skip
    encoded = [None if x is None else str(x).encode() for x in (source, target, kind, data)]
    if _libc().mount(encoded[0], encoded[1], encoded[2], flags, encoded[3]) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {source} on {target}: {os.strerror(errno)}")


def _needed_paths() -> list[str]:
    """What the worker must still read: the system, the interpreter, ``sys.path``, and
    the folder of every loaded module (an editable install maps packages to folders
    that are on no ``sys.path``), each folder once (none inside another), never the
    working directory (``python -m`` puts it on ``sys.path``)."""
    folders = {*SYSTEM, sys.prefix, sys.base_prefix, sys.exec_prefix, *sys.path}
    for module in list(sys.modules.values()):
        folders.update(getattr(module, "__path__", None) or ())
        if isinstance(file := getattr(module, "__file__", None), str):
            folders.add(os.path.dirname(file))
    links = {f for f in folders if os.path.islink(f) and f in SYSTEM}
    real = {os.path.realpath(f) for f in folders - links if f and os.path.isdir(f)}
    real -= {"/", os.getcwd()}
    kept = sorted(real)
    return sorted(links) + [f for f in kept if not any(f.startswith(o + "/") for o in kept)]


def _enter_jail(home: Path, paths: Iterable[str]) -> None:
    """``chroot`` into a ``tmpfs`` laid over ``home`` (the private working directory)
    holding read-only binds of ``paths`` (symbolic links made again), the devices, and
    ``home`` again inside, as the working directory. Mounts are private to this
    namespace: the service sees none of them, and they vanish with the worker."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", home, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=0755")
    for path in paths:
        inside = home / path.lstrip("/")
        inside.parent.mkdir(parents=True, exist_ok=True)
        if os.path.islink(path):  # /lib -> usr/lib
            inside.symlink_to(os.readlink(path))
        else:
            inside.mkdir()
            _bind(path, inside, MS_RDONLY | MS_NOSUID | MS_NODEV)
    for device in DEVICES:
        inside = home / device.lstrip("/")
        inside.parent.mkdir(parents=True, exist_ok=True)
        inside.touch()
        _bind(device, inside, MS_RDONLY | MS_NOSUID)
    (home / str(home).lstrip("/")).mkdir(parents=True)
    os.chroot(home)
    os.chdir(home)


def _bind(source: str, target: Path, flags: int) -> None:
    """Bind ``source`` on ``target``, then apply ``flags`` (a bind takes none itself)."""
    _mount(source, target, None, MS_BIND)
    _mount(None, target, None, MS_BIND | MS_REMOUNT | flags)


def _become(entry: pwd.struct_passwd) -> None:
    """Drop root for good: supplementary groups, group, then user (in that order: a
    process that is no longer root cannot change its groups)."""
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
