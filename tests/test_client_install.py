"""``pip install wander-rl`` without extras gives a working client and nothing else."""

from __future__ import annotations

import os
import subprocess
import textwrap
import venv
from pathlib import Path

from wander.testing import ServiceProcess

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent(
    """
    import importlib.util, sys
    heavy = [m for m in ("fastapi", "uvicorn", "redis", "sqlalchemy", "torch")
             if importlib.util.find_spec(m)]
    assert not heavy, f"installed without being asked for: {heavy}"
    import wander
    try:
        wander.WanderTaskset
    except ModuleNotFoundError as missing:  # the Verifiers taskset, without its extra
        assert f"pip install '{sys.argv[2]}[verifiers]'" in str(missing), missing
    else:
        raise AssertionError("wander.WanderTaskset without verifiers installed")
    from wander.client import WanderClient
    with WanderClient(sys.argv[1]) as wander:
        [episode] = wander.create("tictactoe", example=0, config={"max_turns": 2})
        while not episode.done:
            episode.step("<move>4</move>")
        print("outcome", episode.score().metrics["outcome"])
    """
)


def test_the_base_install_is_a_working_client(live: ServiceProcess, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    install = subprocess.run(  # not byte-compiled: the interpreter compiles what it imports
        [python, "-m", "pip", "install", "--quiet", str(ROOT)], capture_output=True, text=True,
        env={**os.environ, "PIP_NO_COMPILE": "1"},
    )  # fmt: skip
    assert install.returncode == 0, install.stderr
    run = subprocess.run(
        [python, "-c", SCRIPT, live.url, str(ROOT)], capture_output=True, text=True, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr
    assert "outcome" in run.stdout
    help_text = subprocess.run(
        [env_dir / "bin" / "wander", "serve"], capture_output=True, text=True, cwd=tmp_path
    )
    assert help_text.returncode == 2
    # installed from this checkout: the hint installs the extra from it (no index has it)
    said = " ".join(help_text.stderr.replace("│", " ").split())  # the box, however it wraps
    assert f"the service is not installed: pip install '{ROOT}[service]'" in said
