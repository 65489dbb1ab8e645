"""Virtual environments holding the other side of an interop test: its real package from
PyPI, never a copy or a mock.

Each lives in a venv of its own because their pins clash, with ours and with each other
(openenv 0.10 pulls mcp 1.x, verifiers 0.4 pins mcp 2.0). Building one takes a minute
or two, so a venv is kept under ``.cache/interop/`` (ignored by git; `WANDER_INTEROP_CACHE`
moves it) and reused as long as its requirements and the project's ``pyproject.toml`` are
unchanged: the key of its folder is a hash of both (and of the checkout's path). Wander
itself is installed in it editable (``wander_extras``), so the test always runs the code
of the checkout. A fresh checkout builds its venvs again, from pip's cache of wheels.

Where PyPI cannot be reached the test is skipped, saying so: the suite must still pass
on a machine without the registry.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from wander.testing import VenvInstallError, cached_venv

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("WANDER_INTEROP_CACHE", ROOT / ".cache" / "interop"))


def interop_venv(
    name: str, requirements: Sequence[str], wander_extras: Sequence[str] | None = None
) -> Path:
    """The ``python`` of a venv holding ``requirements`` (pip specifiers) and, when
    ``wander_extras`` is given, this checkout installed editable with those extras."""
    key = hashlib.sha256(
        repr((sys.version, str(ROOT), list(requirements), wander_extras)).encode()
        + (ROOT / "pyproject.toml").read_bytes()
    ).hexdigest()[:12]
    home = CACHE / f"{name}-{key}"
    if not (home / ".complete").exists():
        for stale in CACHE.glob(f"{name}-*"):  # an earlier key's venv: no longer wanted
            shutil.rmtree(stale, ignore_errors=True)
    packages = list(requirements)
    if wander_extras is not None:
        extras = f"[{','.join(wander_extras)}]" if wander_extras else ""
        packages += ["-e", f"{ROOT}{extras}"]
    try:
        return cached_venv(home, packages, ROOT / "constraints.txt")
    except VenvInstallError as failure:
        if "No matching distribution" in str(failure) or "Could not fetch" in str(failure):
            pytest.skip(f"{name}: cannot install {packages} (no package registry?)")
        raise RuntimeError(f"installing {packages} for {name} failed:\n{failure}") from None
