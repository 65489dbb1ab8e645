"""What makes an environment worker unprivileged, layer by layer.

A worker runs environment code on model text, and a plugin's environment may have a hole
that lets the text run as code, so the process is built on the assumption that it does.
Workers are forked by the fork server (``forkserver.py``), which confines itself once
(``prepare``) and confines each worker it forks (``fork_worker``, then ``confine``, in the
worker, before it reads a request). Each layer stops something the others do not:

- **no network** (a network namespace, root only): its loopback device is down, so code
  cannot reach Redis, PostgreSQL, the cloud's metadata endpoint or the internet; only
  its channel to the service remains. The fork server makes it once and its workers
  share it: a namespace per worker costs CPU at every fork and as much again in the
  kernel's deferred clean-up (bench/README.md, "Worker isolation"), while a shared one
  gives a worker nothing to reach: no device is up, no worker can bring one up (no
  capability), and the abstract unix sockets, the one thing a network namespace
  scopes that a worker could use to meet another, are closed by Landlock's scope
  (below). The workers of an environment the operator names in ``WANDER_ENV_NETWORK``
  (a hosted taskset that talks to a server of its own) join the service's network
  instead, every other layer kept; they are forked for their call, never taken from,
  or given back to, the ready workers.
- **a file system of its own** (mount namespaces, root only): the fork server moves
  into a ``tmpfs`` holding read-only binds of what Python and the environments need
  (the system's ``/usr``, the interpreter, every ``sys.path`` folder, the folders the
  loaded packages came from, ``/dev/null`` and the random devices) with
  ``pivot_root`` and makes that root read-only; each worker then gets a mount
  namespace of its own with a ``tmpfs`` of its own as its working directory,
  capped in size and in inodes (``WORKER_TMPFS``: a million empty directories cost
  500 MB of kernel memory that no rlimit counts). Nothing else of the machine exists
  for it: not the archive's SQLite file, not the service's configuration, not
  ``/etc``, ``/home`` or ``/proc``, and no other worker's files.
- **a pid namespace of its own** (root only): the worker is its pid 1 and sees, so
  signals, no other process: not its siblings, not the service.
- **an IPC namespace of its own** (root only): System V shared memory and message
  queues outlive their process (memory no rlimit of the worker counts, and a channel
  between workers); a namespace's die with it.
- **a user of its own** (a uid from ``WANDER_ENV_UIDS``, held by no other live worker:
  ``uids.py``; root only): it cannot signal or trace the service or another worker,
  read root's files or write where root may, and it can never regain root.
- **no secrets**: the service starts the fork server with a fixed environment
  (``worker_environment`` in ``launcher.py``: no ``WANDER_*`` variable, so no database
  or Redis URL and password) from a fresh interpreter, so they are not in its memory
  either, nor in the memory its workers are forked from.
- **Landlock's scopes** (Linux 6.12 and later; root or not): no signal to, and no
  connection to an abstract unix socket of, a process outside the worker's own
  domain; no ``ptrace`` of one either.
- **rlimits**: ``RLIMIT_AS`` (the memory budget: an allocation past it raises
  MemoryError instead of swapping the machine), ``RLIMIT_CPU`` (a backstop should the
  service not kill it), ``RLIMIT_FSIZE`` 0 (it cannot write a byte into any file),
  ``RLIMIT_NOFILE`` (few descriptors), ``RLIMIT_NPROC`` 0 once it has its own uid
  (``fork`` and new threads fail, so no ``subprocess``: the limit counts the uid's
  processes, which is why it needs the uid of its own) and ``RLIMIT_CORE`` 0. A worker
  granted processes (``Grants.processes``) may run ``PROCESSES`` of them (threads
  count), each under the same memory budget, and write files of up to ``FILE_BYTES``
  into a larger ``tmpfs`` of its own (``PROCESS_TMPFS``), also mounted on ``/tmp``; they
  all die with it (its pid namespace ends with its pid 1).
- **parent death** (``PR_SET_PDEATHSIG``): the fork server is killed when the service
  dies, and a worker when the fork server dies, even by ``kill -9``, so none outlives
  the service.

The deadline of each call is not here: the service enforces it from outside, by
killing the worker (``pool.py``), which no code inside can prevent; and a worker serves
one call only (``pool.py`` says when it may serve more). Not run as root (a developer's
machine), only the rlimits (without ``RLIMIT_NPROC``, which would count the user's own
processes), Landlock's scopes, the environment, a private directory and the
parent-death signal apply.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import os
import resource
import select
import signal
import socket
import struct
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

CLONE_NEWNS, CLONE_NEWIPC = 0x2_0000, 0x800_0000
CLONE_NEWPID, CLONE_NEWNET = 0x2000_0000, 0x4000_0000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = (
    1, 2, 4, 32, 4096, 8192, 16384, 1 << 18
)  # fmt: skip
MNT_DETACH = 2
SYS_PIVOT_ROOT, SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_RESTRICT_SELF = 155, 444, 446
"""x86-64 and arm64 share the Landlock numbers; pivot_root is x86-64's (see _pivot_root)."""
SYSTEM = ("/usr", "/bin", "/lib", "/lib64", "/sbin")
"""The system's programs and shared libraries (a C extension imported late needs them)."""
DEVICES = ("/dev/null", "/dev/zero", "/dev/random", "/dev/urandom")
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
OPEN_FILES = 64
"""Descriptors a worker may hold: its channel, and files a scorer opens."""
JAIL_TMPFS = "size=1m,nr_inodes=4096,mode=0755"
"""The shared root: the folders the binds are mounted on, read-only once made."""
WORKER_TMPFS = "size=1m,nr_inodes=1024,mode=0700"
"""A worker's own working directory: it cannot write a byte into a file
(``RLIMIT_FSIZE`` 0), so the size bounds only what it may allocate without writing
(``fallocate``, long symbolic links); the inodes bound its directories, empty files and
extended attributes, about 1 KB of kernel memory each."""
PROCESS_TMPFS = "size=64m,nr_inodes=16384,mode=0700"
"""The working directory (and ``/tmp``) of a worker granted processes: what it and the
servers it starts write (port files, logs, Verifiers' runtime folders)."""
PROCESSES = 64
"""Processes and threads a worker granted processes may run (an MCP server is a process
with a few threads; Verifiers probes each with another)."""
FILE_BYTES = 16 << 20
"""The largest file a worker granted processes may write."""
OPEN_FILES_WITH_PROCESSES = 256
"""Descriptors of each process of a worker granted processes (sockets, pipes, logs)."""
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
HELD = "/.held"
"""Where a worker granted processes moves the jail's binds that its ``tmpfs`` covers,
while it mounts it (``_own_tmp``)."""
LANDLOCK_SCOPES = 0x1 | 0x2
"""``LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL`` (Landlock ABI 6)."""


@dataclass(frozen=True)
class Grants:
    """What the operator lets the workers of one environment do beyond the confinement
    every worker has (``WANDER_ENV_NETWORK``, ``WANDER_ENV_PROCESSES``)."""

    network: bool = False
    """It joins the service's network."""
    processes: bool = False
    """It may start processes (``PROCESSES``) and write files (``FILE_BYTES``), in a
    network namespace of its own with its loopback up (unless ``network``)."""

    def __bool__(self) -> bool:
        return self.network or self.processes


NO_GRANTS = Grants()
"""What every worker has: the confinement, and nothing beyond."""


@dataclass(frozen=True)
class Limits:
    """What the service tells the fork server its workers may use (its command-line
    argument)."""

    memory_bytes: int
    cpu_seconds: int
    """CPU time of a worker's whole life; it retires before reaching it."""
    parent: int
    """The service's pid: the fork server stops if it is already gone at start."""
    uids: str = "100000-165535"
    """The workers' user ids (``WANDER_ENV_UIDS``), each live worker its own."""

    def to_dict(self) -> dict[str, int | str]:
        return asdict(self)


@dataclass(frozen=True)
class Jail:
    """What the fork server prepared for its workers."""

    root: bool
    """Whether the layers that need root apply."""
    home: Path
    """The workers' working directory (root: each worker mounts its own there)."""
    layers: tuple[str, ...]
    """The layers the fork server set up for all its workers (for the log)."""
    pid_namespace: int | None
    """A descriptor of the fork server's own pid namespace (root only)."""
    host_network: int | None
    """A descriptor of the service's network namespace (root only): the workers of an
    environment the operator lets reach the network (``WANDER_ENV_NETWORK``) join it."""
    lifeline: int
    """A pidfd of the fork server: readable once it is gone."""
    covered: tuple[str, ...] = ()
    """The binds of the jail that lie under ``/tmp`` or ``home`` (root only), which a
    worker granted processes moves aside, covers with its own ``tmpfs``, and moves back
    (``_own_tmp``): what a process it starts runs from (a venv, ``PYTHONPATH``) may
    lie there."""


def prepare() -> Jail:
    """Confine the fork server itself, once, after it imported the environments: (root
    only) move it into the shared network namespace and the read-only jail its workers
    start from. It stays root: it must still make namespaces and change user for each
    worker."""
    _limit(resource.RLIMIT_CORE, 0)
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:  # a fork copies one thread, and whatever locks the others held
        raise RuntimeError(f"the fork server must run one thread, not {threads}")
    home = Path.cwd()
    lifeline = os.pidfd_open(os.getpid())
    if os.geteuid() != 0:
        return Jail(False, home, (), None, None, lifeline)
    pid_namespace = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    host_network = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    _unshare(CLONE_NEWNET | CLONE_NEWNS)
    covered = _build_jail(home, _needed_paths())
    layers = ("network namespace", "read-only root")
    return Jail(True, home, layers, pid_namespace, host_network, lifeline, covered)


def fork_worker(jail: Jail) -> int:
    """``os.fork``, the child in a pid namespace of its own (root only): 0 in the child.

    ``unshare(CLONE_NEWPID)`` moves the caller's next child, not the caller, into a new
    namespace, and the kernel refuses it a second time while the caller's children
    still go to the first one; ``setns`` back to the fork server's own namespace after
    each fork lets it make the next. One fork per worker, by Python's own ``os.fork``
    (an intermediate process that unshares and forks the worker costs a second fork of
    ~120 MB of imported environments; a raw ``clone`` through ctypes skips what glibc's
    ``fork`` does for the child)."""
    if not jail.root or jail.pid_namespace is None:
        return os.fork()
    _unshare(CLONE_NEWPID)
    try:
        pid = os.fork()
    except BaseException:
        _setns(jail.pid_namespace, CLONE_NEWPID)
        raise
    if pid:  # the fork server: its next child may have a namespace of its own again
        _setns(jail.pid_namespace, CLONE_NEWPID)
    return pid


def confine(
    jail: Jail, limits: Limits, uid: int | None, directory: Path, grants: Grants = NO_GRANTS
) -> list[str]:
    """Confine a freshly forked worker (``uid`` its own, root only; ``directory`` its
    working directory when not root; ``grants``: what the operator allows its
    environment beyond the rest); returns the layers applied (for the log)."""
    applied = list(jail.layers)
    if jail.host_network is not None:
        if grants.network:  # before it drops root: joining a namespace takes the capability
            _setns(jail.host_network, CLONE_NEWNET)
            applied = [layer for layer in applied if layer != "network namespace"]
            applied.append("the service's network")
        os.close(jail.host_network)
    os.setsid()  # a session of its own: kill(0), its process group, reaches no one else
    if jail.root and uid is not None:
        own_network = grants.processes and not grants.network
        _unshare(CLONE_NEWNS | CLONE_NEWIPC | (CLONE_NEWNET if own_network else 0))
        if own_network:
            _loopback_up()
            applied = [layer for layer in applied if layer != "network namespace"]
            applied.append("a network of its own (loopback)")
        if grants.processes:
            _own_tmp(jail, uid)
        else:
            _mount("tmpfs", jail.home, "tmpfs", MS_NOSUID | MS_NODEV,
                   f"{WORKER_TMPFS},uid={uid},gid={uid}")  # fmt: skip
        os.chdir(jail.home)  # HOME and TMPDIR already (the fork server's: launcher.py)
        applied += ["pid namespace", "ipc namespace", "private file system"]
        _become(uid)
        applied.append(f"user {uid}")
    else:
        os.chdir(directory)
        os.environ.update(HOME=str(directory), TMPDIR=str(directory))
    # Its temporary directory, said rather than found: ``tempfile`` finds one by writing a
    # file, which RLIMIT_FSIZE 0 refuses, and a library that asks for it while it is
    # imported (gradio, which OpenEnv's clients import) would fail to import.
    tempfile.tempdir = os.getcwd()
    _limit(resource.RLIMIT_AS, limits.memory_bytes)
    _limit(resource.RLIMIT_CPU, limits.cpu_seconds)
    _limit(resource.RLIMIT_FSIZE, FILE_BYTES if grants.processes else 0)
    _limit(resource.RLIMIT_NOFILE, OPEN_FILES_WITH_PROCESSES if grants.processes else OPEN_FILES)
    _limit(resource.RLIMIT_CORE, 0)
    applied.append("rlimits")
    if jail.root:  # now a user of its own: no process of it may start another
        _limit(resource.RLIMIT_NPROC, PROCESSES if grants.processes else 0)
        applied.append(f"{PROCESSES} processes" if grants.processes else "no processes")
    if _landlock_scopes():
        applied.append("landlock scopes")
    _die_with(jail.lifeline)
    return applied


@functools.cache
def _libc() -> ctypes.CDLL:
    """The C library, loaded once in the fork server (each worker has its copy)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _check(result: int, what: str) -> None:
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _unshare(flags: int) -> None:
    _check(_libc().unshare(flags), f"unshare({flags:#x})")


def _setns(fd: int, kind: int) -> None:
    _check(_libc().setns(fd, kind), f"setns({kind:#x})")


def _mount(source: str | None, target: str | Path, kind: str | None, flags: int,
           data: str | None = None) -> None:  # fmt: skip
    encoded = [None if x is None else str(x).encode() for x in (source, target, kind, data)]
    result = _libc().mount(encoded[0], encoded[1], encoded[2], flags, encoded[3])
    _check(result, f"mount {source} on {target}")


def _own_tmp(jail: Jail, uid: int) -> None:
    """A ``tmpfs`` of ``uid``'s (``PROCESS_TMPFS``) on ``/tmp``, where Verifiers' servers
    write their port files, that is also the jail's home (bound there, or made inside
    it when the home lies under ``/tmp``), with the jail's binds that both cover
    (``Jail.covered``) moved aside first and back on top after."""
    for number, path in enumerate(jail.covered):
        _mount(path, f"{HELD}/{number}", None, MS_MOVE)
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"{PROCESS_TMPFS},uid={uid},gid={uid}")
    if jail.home.is_relative_to("/tmp"):
        jail.home.mkdir(parents=True, exist_ok=True)
        os.chown(jail.home, uid, uid)
    else:
        _bind("/tmp", jail.home, MS_NOSUID | MS_NODEV)
    for number, path in enumerate(jail.covered):
        os.makedirs(path, exist_ok=True)
        _mount(f"{HELD}/{number}", path, None, MS_MOVE)


def _loopback_up() -> None:
    """Bring up ``lo`` of a network namespace just made (down in a new one)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(probe, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(probe, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))


def _needed_paths() -> list[str]:
    """What the workers must still read: the system, the interpreter, ``sys.path``, and
    the folder of every loaded module, where it is found and where its file really is
    (an editable install maps packages to folders that are on no ``sys.path``, or to a
    tree of links whose targets, an environment's data files among them, lie in the
    repository), each folder once (none inside another), never the working directory
    (``python -m`` puts it on ``sys.path``)."""
    folders = {*SYSTEM, sys.prefix, sys.base_prefix, sys.exec_prefix, *sys.path}
    for module in list(sys.modules.values()):
        folders.update(getattr(module, "__path__", None) or ())
        if isinstance(file := getattr(module, "__file__", None), str):
            folders.update({os.path.dirname(file), os.path.dirname(os.path.realpath(file))})
    links = {f for f in folders if os.path.islink(f) and f in SYSTEM}
    real = {os.path.realpath(f) for f in folders - links if f and os.path.isdir(f)}
    real -= {"/", os.getcwd()}
    kept = sorted(real)
    return sorted(links) + [f for f in kept if not any(f.startswith(o + "/") for o in kept)]


def _build_jail(home: Path, paths: Sequence[str]) -> tuple[str, ...]:
    """Make a ``tmpfs`` laid over ``home`` the root: read-only binds of ``paths``
    (symbolic links made again), the devices, and ``home`` again inside, where each
    worker mounts its own ``tmpfs``; then ``pivot_root`` into it, drop the old root (no
    mount of the machine is left in the namespace, so a worker's copy of it is
    small), and make it read-only. Mounts are private to this namespace: the service
    sees none of them, and they vanish with the fork server."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", home, "tmpfs", MS_NOSUID | MS_NODEV, JAIL_TMPFS)
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
    (home / "tmp").mkdir(exist_ok=True)  # where a worker granted processes mounts its own
    covered = tuple(
        p for p in paths if Path(p).is_relative_to("/tmp") or Path(p).is_relative_to(home)
    )
    for number in range(len(covered)):
        (home / HELD.lstrip("/") / str(number)).mkdir(parents=True)
    (home / "old-root").mkdir()
    _pivot_root(home, home / "old-root")
    os.chdir("/")
    _check(_libc().umount2(b"/old-root", MNT_DETACH), "umount the old root")
    os.rmdir("/old-root")
    _mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.chdir(home)
    return covered


def _pivot_root(new_root: Path, put_old: Path) -> None:
    """``pivot_root``, which glibc does not wrap (x86-64's number; elsewhere the old
    ``chroot`` would do, at the price of a larger mount table per worker)."""
    libc = _libc()
    _check(libc.syscall(SYS_PIVOT_ROOT, bytes(new_root), bytes(put_old)), "pivot_root")


def _bind(source: str, target: Path, flags: int) -> None:
    """Bind ``source`` on ``target``, then apply ``flags`` (a bind takes none itself)."""
    _mount(source, target, None, MS_BIND)
    _mount(None, target, None, MS_BIND | MS_REMOUNT | flags)


def _become(uid: int) -> None:
    """Drop root for good, to ``uid`` and a group of the same number: supplementary
    groups, group, then user (a process that is no longer root cannot change its
    groups)."""
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    try:
        os.setuid(0)
    except PermissionError:
        return
    raise RuntimeError("the worker could become root again")


def _limit(kind: int, value: int) -> None:
    resource.setrlimit(kind, (value, value))


def _landlock_scopes() -> bool:
    """Scope signals and abstract unix sockets to the worker's own Landlock domain, where
    the kernel has Landlock ABI 6 or later; whether it did. ``no_new_privs`` first, as
    Landlock requires of a process without ``CAP_SYS_ADMIN`` (a set-user-ID program
    could not raise it again either; the binds are ``nosuid`` already)."""
    libc = _libc()
    if libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, 0, 1) < 6:  # its ABI version
        return False
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    attributes = (ctypes.c_uint64 * 3)(0, 0, LANDLOCK_SCOPES)  # fs, net, scoped
    ruleset = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attributes), 24, 0)
    _check(ruleset, "landlock_create_ruleset")
    try:
        _check(libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return True


def die_with_parent(parent: int) -> None:
    """SIGKILL when the parent (the service, whose pid is ``parent``) ends: the fork
    server calls it first thing."""
    _check(_libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != parent:  # the service died before the signal was armed
        os._exit(1)


def _die_with(lifeline: int) -> None:
    """SIGKILL when the fork server ends. Set after the change of user, which clears it;
    ``lifeline`` (a pidfd of the fork server: ``getppid`` reads 0 in a pid namespace of
    one's own) says whether it ended before the signal was armed."""
    _check(_libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    with contextlib.suppress(InterruptedError):
        if select.select([lifeline], [], [], 0)[0]:
            os._exit(1)
