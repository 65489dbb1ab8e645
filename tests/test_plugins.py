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
    try:
        names = [
            e["name"] for e in httpx.get(f"{server.url}/v1/environments").json()["environments"]
        ]
        assert "echo" in names and "tictactoe" in names
        body = {"env": "echo", "example": 2}
        episode = httpx.post(f"{server.url}/v1/episodes", json=body).json()["episodes"][0]
        assert episode["observation"] == [{"role": "user", "content": "Say: stone"}]
        result = httpx.post(
            f"{server.url}/v1/episodes/{episode['id']}/step", json={"action": "stone", "turn": 0}
        ).json()
        assert result["done"] is True and result["reward"] == 1.0
    finally:
        server.stop()
