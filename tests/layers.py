"""The layering contracts of pyproject.toml, checked by import-linter.

``python -m tests.layers`` prints import-linter's report and exits non-zero when a
contract is broken (``make lint`` runs it; ``tests/test_layers.py`` runs it in
``make test``).

The repository keeps ``service/``, ``client/``, ``trainer/`` and ``migrations/`` at
its top and maps them onto the import root (``service/`` installs as
``wander.service``). An editable install resolves that mapping with an import
hook, but import-linter finds modules by walking the file system from the root
package's folder, where ``wander/service`` does not exist. So it runs over a
view: a temporary tree shaped as the installed package, every file a link to the
repository's own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def package_folders(root: Path = ROOT) -> dict[str, Path]:
    """Package name -> its folder in the repository: the installed ones (``package-dir``)
    and the other packages the contracts speak of (``bench``, ``tests``)."""
    tool = tomllib.loads((root / "pyproject.toml").read_text())["tool"]
    folders = {name: root / name for name in tool["importlinter"]["root_packages"]}
    folders.update(
        {name: root / folder for name, folder in tool["setuptools"]["package-dir"].items()}
    )
    return folders


def build_view(target: Path, root: Path = ROOT) -> Path:
    """Link every Python file of the packages into ``target`` at its import path."""
    for package, folder in package_folders(root).items():
        destination = target.joinpath(*package.split("."))
        for source in folder.rglob("*.py"):
            if "__pycache__" in source.parts:
                continue
            link = destination / source.relative_to(folder)
            link.parent.mkdir(parents=True, exist_ok=True)
            if not link.exists():
                link.symlink_to(source)
    return target


def lint_imports(view: Path, root: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """import-linter over ``view`` with the contracts of ``pyproject.toml``."""
    executable = Path(sys.executable).with_name("lint-imports")
    return subprocess.run(
        [executable, "--config", root / "pyproject.toml", "--no-cache", "--no-logo"],
        cwd=view,
        env={**os.environ, "PYTHONPATH": str(view)},
        capture_output=True,
        text=True,
    )


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="wander-layers-") as folder:
        result = lint_imports(build_view(Path(folder)))
    print(result.stdout, result.stderr, sep="", end="")
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
