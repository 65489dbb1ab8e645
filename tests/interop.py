"""Virtual environments holding the other side of an interop test: its real package from
PyPI, never a copy or a mock.

Each lives in a venv of its own because their pins clash, with ours and with each other
(openenv 0.10 pulls mcp 1.x, verifiers 0.4 pins mcp 2.0). Building one takes minutes,
so a venv is kept in the user's cache (``~/.cache/wander/interop``; `WANDER_INTEROP_CACHE`
moves it), shared by every checkout and reused as long as its requirements and the
project's ``pyproject.toml`` are unchanged: the key of its folder is a hash of both.
Wander itself is installed in it editable, so the test runs the code of the checkout;
a venv last pointed at another checkout is pointed at this one (seconds, no download).

Where PyPI cannot be reached the test is skipped, saying so: the suite must still pass
on a machine without the registry.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import venv
from collections.abc import Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("WANDER_INTEROP_CACHE", Path.home() / ".cache" / "wander" / "interop"))


def interop_venv(
    name: str, requirements: Sequence[str], wander_extras: Sequence[str] | None = None
) -> Path:
    """The ``python`` of a venv holding ``requirements`` (pip specifiers) and, when
    ``wander_extras`` is given, this checkout installed editable with those extras."""
    key = hashlib.sha256(
        repr((sys.version, list(requirements), wander_extras)).encode()
        + (ROOT / "pyproject.toml").read_bytes()
    ).hexdigest()[:12]
    home = CACHE / f"{name}-{key}"
    python = home / "bin" / "python"
    checkout = home / ".checkout"  # the checkout its editable Wander points at
    if (home / ".complete").exists():
        if wander_extras is not None and checkout.read_text() != str(ROOT):
            _pip(name, python, ["--no-deps", "-e", str(ROOT)])
            checkout.write_text(str(ROOT))
        return python
    shutil.rmtree(home, ignore_errors=True)
    for stale in CACHE.glob(f"{name}-*"):  # an earlier key's venv: no longer wanted
        shutil.rmtree(stale, ignore_errors=True)
    venv.create(home, with_pip=True)
    packages = list(requirements)
    if wander_extras is not None:
        extras = f"[{','.join(wander_extras)}]" if wander_extras else ""
        packages += ["-e", f"{ROOT}{extras}"]
    try:
        _pip(name, python, packages)
    except BaseException:
        shutil.rmtree(home, ignore_errors=True)
        raise
    checkout.write_text(str(ROOT))
    (home / ".complete").touch()
    return python


def _pip(name: str, python: Path, arguments: list[str]) -> None:
    """``pip install arguments`` in the venv; skips the test when no registry answers."""
    install = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "-c", ROOT / "constraints.txt", *arguments],
        capture_output=True,
        text=True,
    )
    if install.returncode != 0:
        if "No matching distribution" in install.stderr or "Could not fetch" in install.stderr:
            pytest.skip(f"{name}: cannot install {arguments} (no package registry?)")
        raise RuntimeError(f"installing {arguments} for {name} failed:\n{install.stderr}")
