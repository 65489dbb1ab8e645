"""The ``wander`` command line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from tests.agents import perfect_agent, random_agent
from wander.cli import app
from wander.testing import ServiceProcess

runner = CliRunner()


def test_serve_refuses_several_workers_on_the_in_process_store(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("WANDER_REDIS_URL", raising=False)
    result = runner.invoke(app, ["serve", "--workers", "2"])
    assert result.exit_code == 2
    assert "WANDER_REDIS_URL" in result.output


def test_db_upgrade_current_and_downgrade(empty_database_url: str) -> None:
    first = runner.invoke(app, ["db", "upgrade", "--database-url", empty_database_url])
    assert first.exit_code == 0, first.output
    assert "migrated from revision None to 0001" in first.output
    again = runner.invoke(app, ["db", "upgrade", "--database-url", empty_database_url])
    assert "up to date (revision 0001)" in again.output
    current = runner.invoke(app, ["db", "current", "--database-url", empty_database_url])
    assert "revision 0001 (latest 0001)" in current.output
    down = runner.invoke(app, ["db", "downgrade", "base", "--database-url", empty_database_url])
    assert down.exit_code == 0 and "is at revision None" in down.output


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServiceProcess]:
    """A real `wander serve` on a fresh SQLite archive, which it migrates itself."""
    env = {"WANDER_DATABASE_URL": f"sqlite:///{tmp_path}/served.db", "WANDER_REDIS_URL": ""}
    process = ServiceProcess(env).start()
    yield process
    process.stop()


def play(url: str, run: str) -> dict[str, str]:
    """Six games against a random opponent; returns episode id -> outcome."""
    outcomes = {}
    random = {"min_random_move_prob": 1.0, "max_random_move_prob": 1.0}
    for example in range(6):
        body = {"env": "tictactoe", "example": example, "run": run, "config": random}
        episode = httpx.post(f"{url}/v1/episodes", json=body).json()["episodes"][0]
        agent = perfect_agent if example % 2 else random_agent(example)
        board, turn, done = episode["info"]["board"], 0, False
        while not done:
            step = {"action": agent(board), "turn": turn}
            result = httpx.post(f"{url}/v1/episodes/{episode['id']}/step", json=step).json()
            board, turn, done = result["info"]["board"], result["turn"], result["done"]
        score = httpx.get(f"{url}/v1/episodes/{episode['id']}/score").json()
        outcomes[episode["id"]] = score["metrics"]["outcome"]
    return outcomes


def test_export_writes_the_kept_games_as_chat_jsonl(server: ServiceProcess, tmp_path: Path) -> None:
    outcomes = play(server.url, "cli")
    kept = sum(outcome != "loss" for outcome in outcomes.values())
    output = tmp_path / "sft.jsonl"
    args = ["export", "cli", "--exclude-outcome", "loss", "-o", str(output), "--url", server.url]
    for _ in range(50):  # the archive writes behind the games
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        if len(output.read_text().splitlines()) == kept:
            break
    lines = output.read_text().splitlines()
    assert len(lines) == kept
    assert all(json.loads(line)["messages"][-1]["role"] == "assistant" for line in lines)
    assert f"Wrote {kept} episodes of run 'cli'" in result.output


def test_export_reports_service_errors(server: ServiceProcess) -> None:
    result = runner.invoke(app, ["export", "x", "--min-reward", "nan", "--url", server.url])
    assert result.exit_code == 2
    assert "422 validation_error" in result.output
    closed = runner.invoke(app, ["export", "x", "--url", "http://127.0.0.1:9"])
    assert closed.exit_code == 2 and "cannot reach" in closed.output


def test_serve_never_prints_passwords() -> None:
    from wander.commands.service import _safe

    assert _safe("redis://:s3cret@cache:6379/0") == "redis://:***@cache:6379/0"
    assert _safe("postgresql+psycopg://me:pw@db/wander") == "postgresql+psycopg://me:***@db/wander"
    assert _safe("sqlite:///wander.db") == "sqlite:///wander.db"
