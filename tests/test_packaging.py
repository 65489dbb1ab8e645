"""What users install: a wheel holding the one package ``wander``, and `make serve`'s light venv.

The wheel is built as the Docker image builds it: from the files its Dockerfile
copies out of a clean checkout of the working tree, with stale files planted in
``build/``. `make serve`'s install step makes a fresh venv (pip, as a user runs it);
the wheel then replaces its editable install there, and is used as a user would:
imports, `wander serve`, a plugin, the image's healthcheck.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from wander.testing import ServiceProcess

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "trl", "peft", "datasets")


QUICK_PIP = {**os.environ, "PIP_NO_COMPILE": "1"}
"""pip without byte-compiling what it installs (a third of an install's time here): the
interpreter compiles what it imports."""


def run(*command: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=QUICK_PIP)
    assert result.returncode == 0, f"{command}: {result.stderr}"
    return result


def checkout_copy(target: Path) -> Path:
    """The files a clean checkout of the working tree holds (tracked, or new and not ignored)."""
    listed = run("git", "ls-files", "-z", "-co", "--exclude-standard", cwd=ROOT).stdout
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def docker_context(checkout: Path, target: Path) -> Path:
    """What the Dockerfile's build stage copies (``COPY SRC... DEST`` lines) out of ``checkout``."""
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if not line.startswith("COPY ") or "--from" in line:
            continue
        *sources, destination = line.split()[1:]
        for source in sources:
            into = target / destination
            if destination.endswith("/"):
                into = into / source
            if (checkout / source).is_dir():
                shutil.copytree(checkout / source, into)
            else:
                into.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(checkout / source, into)
    return target


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean copy of the working tree: what the tests build, they build there, never in
    the tree itself, where this checkout's venv reads its link tree (build/) and other
    test processes build the example plugin."""
    return checkout_copy(tmp_path_factory.mktemp("checkout"))


@pytest.fixture(scope="module")
def wheel(checkout: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = docker_context(checkout, tmp_path_factory.mktemp("context"))
    for stale in ("build/lib/service/stale.py", "build/lib/wander/stale.py"):
        (source / stale).parent.mkdir(parents=True, exist_ok=True)
        (source / stale).write_text("LEFT_BEHIND = True\n")
    dist = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", dist, source, cwd=dist)
    [built] = dist.glob("wander_rl-*.whl")
    return built


@pytest.fixture(scope="module")
def made(checkout: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`make serve`'s install step (pip, as a user runs it), into a venv of the module's."""
    env_dir = tmp_path_factory.mktemp("venv")
    run("make", f"VENV={env_dir}", f"{env_dir}/.serve", cwd=checkout)
    return env_dir


@pytest.fixture(scope="module")
def service_venv(made: Path, wheel: Path, checkout: Path) -> Path:
    """`make serve`'s venv with its editable install replaced by the wheel and its service
    extra (what the editable install has already: one pyproject), and the example plugin."""
    python = made / "bin" / "python"
    run(python, "-m", "pip", "uninstall", "--quiet", "--yes", "wander-rl", cwd=made)
    run(python, "-m", "pip", "install", "--quiet", f"{wheel}[service]", cwd=made)
    run(python, "-m", "pip", "install", "--quiet", "--no-deps", checkout / "tests" / "plugin",
        cwd=made)  # fmt: skip
    return made


def assert_no_heavy(python: Path, cwd: Path, names: tuple[str, ...] = HEAVY) -> None:
    for name in names:
        found = run(python, "-c", f"import importlib.util as u; print(u.find_spec({name!r}))",
                    cwd=cwd)  # fmt: skip
        assert found.stdout.strip() == "None", f"{name} is importable: {found.stdout}"


def test_make_serve_installs_no_torch(made: Path, tmp_path: Path) -> None:
    """The first test of the module: later ones put the wheel in this venv."""
    python = made / "bin" / "python"
    run(python, "-c", "import wander.service.app", cwd=tmp_path)
    assert_no_heavy(python, tmp_path)


def test_the_wheel_holds_wander_and_nothing_else(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/", 1)[0] for name in names}
    assert tops == {"wander", wheel.name.split("-py3")[0] + ".dist-info"}
    assert not [name for name in names if "stale" in name]  # build/ leftovers do not leak
    for data in (
        "wander/py.typed",  # PEP 561: type checkers read the package's annotations
        "wander/migrations/script.py.mako",
        "wander/service/envs/reverse_text/paragraphs.jsonl",
        "wander/trainer/tiny_tokenizer.json",
        "wander/trainer/configs/stage1.toml",
        "wander/service/console/index.html",  # the web console's pages and modules
        "wander/service/console/app.js",
        "wander/service/console/console.css",
    ):
        assert data in names


def test_every_module_of_the_repository_is_in_the_wheel(wheel: Path) -> None:
    """A package folder missing from pyproject's ``packages`` would silently not ship."""
    names = set(zipfile.ZipFile(wheel).namelist())
    folders = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    expected = {
        "/".join([*package.split("."), *path.relative_to(ROOT / folder).parts])
        for package, folder in folders["package-dir"].items()
        for path in (ROOT / folder).rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert expected - names == set()


def test_an_installed_wheel_imports_as_wander_only(service_venv: Path, tmp_path: Path) -> None:
    python = service_venv / "bin" / "python"
    run(python, "-c", "import wander.client, wander.service.app, wander.sdk, wander.migrations",
        cwd=tmp_path)  # fmt: skip
    assert_no_heavy(python, tmp_path, ("service", "client", "trainer", "migrations", *HEAVY))


@pytest.fixture
def served(service_venv: Path, tmp_path: Path) -> Iterator[tuple[ServiceProcess, Path]]:
    """`wander serve` from the venv, in an empty folder (its SQLite archive lands there)."""
    home = tmp_path / "home"
    home.mkdir()
    python = str(service_venv / "bin" / "python")
    server = ServiceProcess({"WANDER_REDIS_URL": ""}, python=python, cwd=str(home)).start()
    yield server, home
    server.stop()


def test_wander_serve_from_the_wheel_serves_a_plugin(served: tuple[ServiceProcess, Path]) -> None:
    server, home = served
    names = [e["name"] for e in httpx.get(f"{server.url}/v1/environments").json()["environments"]]
    assert {"echo", "tictactoe"} <= set(names)
    [episode] = httpx.post(f"{server.url}/v1/episodes", json={"env": "echo", "example": 1}).json()[
        "episodes"
    ]
    step = {"action": "river", "turn": 0}
    result = httpx.post(f"{server.url}/v1/episodes/{episode['id']}/step", json=step).json()
    assert result["done"] is True and result["reward"] == 1.0
    assert (home / "wander.db").exists()  # the SQLite archive, migrated on start


def test_the_images_healthcheck_passes(
    served: tuple[ServiceProcess, Path], service_venv: Path
) -> None:
    """The Dockerfile's HEALTHCHECK command, against a service installed as the image does."""
    server, _ = served
    dockerfile = (ROOT / "Dockerfile").read_text()
    probe = dockerfile.split('"python", "-c", "', 1)[1].split('"]', 1)[0]
    probe = probe.replace("127.0.0.1:8000", f"127.0.0.1:{server.port}")
    run(service_venv / "bin" / "python", "-c", probe, cwd=service_venv)
