"""A third-party package registers an environment through ``wander.environments``."""

from __future__ import annotations

from pathlib import Path

import httpx

from wander.testing import ServiceProcess


def test_an_installed_plugin_is_listed_and_playable(plugin_site: Path, tmp_path: Path) -> None:
    env = {
        "PYTHONPATH": str(plugin_site),
        "WANDER_REDIS_URL": "",
        "WANDER_DATABASE_URL": f"sqlite:///{tmp_path}/archive.db",
    }
    server = ServiceProcess(env).start()
    # A fresh service's first episode of a plugin environment (run in a worker of its
    # own) can take seconds on a busy 2-core machine: past httpx's default 5 s in CI once.
    try:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            names = [e["name"] for e in http.get("/v1/environments").json()["environments"]]
            assert "echo" in names and "tictactoe" in names
            body = {"env": "echo", "example": 2}
            episode = http.post("/v1/episodes", json=body).json()["episodes"][0]
            assert episode["observation"] == [{"role": "user", "content": "Say: stone"}]
            step = {"action": "stone", "turn": 0}
            result = http.post(f"/v1/episodes/{episode['id']}/step", json=step).json()
            assert result["done"] is True and result["reward"] == 1.0
    finally:
        server.stop()
