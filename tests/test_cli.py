"""The ``wander`` command line."""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import typer
from typer.testing import CliRunner

from tests.agents import perfect_agent, random_agent
from tests.records import many_runs, oldest_first
from wander.cli import app
from wander.extras import install_command
from wander.testing import ServiceProcess, free_port

runner = CliRunner(env={"COLUMNS": "200"})  # usage errors are boxed; no wrapping inside


def test_serve_refuses_several_workers_on_the_in_process_store(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("WANDER_REDIS_URL", raising=False)
    result = runner.invoke(app, ["serve", "--workers", "2"])
    assert result.exit_code == 2
    assert "WANDER_REDIS_URL" in result.output


def test_serve_names_the_service_packages_missing_and_how_to_install_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As in a venv made for the Verifiers taskset, which brings pydantic-settings but not
    the rest of the service."""
    monkeypatch.setitem(sys.modules, "sqlalchemy", None)
    monkeypatch.setitem(sys.modules, "alembic", None)
    result = runner.invoke(app, ["serve"])
    assert result.exit_code == 2
    said = " ".join(result.output.replace("│", " ").split())
    assert (
        f"the service is not installed (sqlalchemy, alembic missing): {install_command('service')}"
        in said
    )


def test_db_upgrade_current_and_downgrade(empty_database_url: str) -> None:
    first = runner.invoke(app, ["db", "upgrade", "--database-url", empty_database_url])
    assert first.exit_code == 0, first.output
    assert "migrated from revision None to 0002" in first.output
    again = runner.invoke(app, ["db", "upgrade", "--database-url", empty_database_url])
    assert "up to date (revision 0002)" in again.output
    current = runner.invoke(app, ["db", "current", "--database-url", empty_database_url])
    assert current.exit_code == 0 and "revision 0002 (latest 0002)" in current.output
    down = runner.invoke(app, ["db", "downgrade", "base", "--database-url", empty_database_url])
    assert down.exit_code == 0 and "is at revision None (was 0002)" in down.output
    empty = runner.invoke(app, ["db", "current", "--database-url", empty_database_url])
    assert empty.exit_code == 0 and "revision None (latest 0002)" in empty.output


@pytest.mark.parametrize("command", [["current"], ["downgrade", "base"]])
def test_db_commands_do_not_create_a_missing_archive(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("WANDER_DATABASE_URL", raising=False)  # the default: ./wander.db
    explicit = f"sqlite:///{tmp_path}/elsewhere.db"
    for args in [["db", *command], ["db", *command, "--database-url", explicit]]:
        result = runner.invoke(app, args)
        assert result.exit_code == 1, result.output
        assert result.output.startswith("Error: no archive at sqlite:///"), result.output
        assert "`wander db upgrade`" in result.output
    assert list(tmp_path.iterdir()) == []


def test_db_commands_name_an_unreachable_database() -> None:
    url = f"postgresql+psycopg://wander:s3cret@127.0.0.1:{free_port()}/archive"
    for args in [["current"], ["upgrade"], ["downgrade", "base"]]:
        result = runner.invoke(app, ["db", *args, "--database-url", url])
        assert result.exit_code == 1, result.output
        assert result.output.startswith(
            "Error: cannot reach the archive at postgresql+psycopg://wander:***@127.0.0.1:"
        ), result.output
        assert "s3cret" not in result.output and len(result.output.splitlines()) == 1


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


def wait_archived(url: str, run: str, episodes: int) -> None:
    for _ in range(100):  # the archive writes behind the games
        summary = httpx.get(f"{url}/v1/runs/{run}")
        if summary.status_code == 200 and summary.json()["episodes"] == episodes:
            return
        time.sleep(0.1)
    raise AssertionError(f"run {run!r} never reached {episodes} archived episodes")


def test_export_writes_the_kept_games_as_chat_jsonl(server: ServiceProcess, tmp_path: Path) -> None:
    outcomes = play(server.url, "cli")
    kept = sum(outcome != "loss" for outcome in outcomes.values())
    wait_archived(server.url, "cli", len(outcomes))
    output = tmp_path / "exports" / "sft.jsonl"
    output.parent.mkdir()
    args = ["export", "cli", "--exclude-outcome", "loss", "-o", str(output), "--url", server.url]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    lines = output.read_text().splitlines()
    assert len(lines) == kept
    assert all(json.loads(line)["messages"][-1]["role"] == "assistant" for line in lines)
    assert f"Wrote {kept} episodes of run 'cli'" in result.output
    assert list(output.parent.iterdir()) == [output]


def test_export_reports_service_errors_and_writes_nothing(
    server: ServiceProcess, tmp_path: Path
) -> None:
    output = tmp_path / "exports" / "out.jsonl"
    output.parent.mkdir()
    args = ["-o", str(output), "--url", server.url]
    invalid = runner.invoke(app, ["export", "x", "--min-reward", "nan", *args])
    assert invalid.exit_code == 2 and "422 validation_error" in invalid.output
    unknown = runner.invoke(app, ["export", "nope", *args])
    assert unknown.exit_code == 2
    assert "404 run_not_found: no archived episode has the run label 'nope'" in unknown.output
    assert list(output.parent.iterdir()) == []
    output.write_text("an earlier export\n")
    again = runner.invoke(app, ["export", "nope", *args])
    assert again.exit_code == 2 and output.read_text() == "an earlier export\n"
    assert list(output.parent.iterdir()) == [output]


def test_runs_lists_a_page_of_runs_and_says_where_the_next_starts(
    runs_service: ServiceProcess,
) -> None:
    url = ["--url", runs_service.url]
    order = oldest_first(many_runs(10))
    middle = runner.invoke(app, ["runs", "--limit", "4", "--offset", "4", *url])
    assert middle.exit_code == 0, middle.output
    listed = [line.split("│")[1].strip() for line in middle.output.splitlines() if "run-" in line]
    assert listed == order[4:8]
    assert middle.output.splitlines()[-1] == "Runs 5 to 8 of 10; the next with --offset 8"
    last = runner.invoke(app, ["runs", "--offset", "8", *url])
    assert last.output.splitlines()[-1] == "Runs 9 to 10 of 10"
    past = runner.invoke(app, ["runs", "--offset", "10", *url])
    assert past.exit_code == 0 and " ".join(past.output.split()) == (
        "1 archived episode(s) have no run label, so are in no run: create episodes with a "
        "run label (run=..., --run) to find them here. "
        "No runs past the first 10: the archive holds 10."
    )
    for bad in [
        ["--limit", "0"],
        ["--limit", "1001"],
        ["--offset", "-1"],
        ["--offset", str(2**63)],
    ]:
        refused = runner.invoke(app, ["runs", *bad, *url])
        assert refused.exit_code == 2 and "Invalid value for" in refused.output, bad


def test_runs_on_an_empty_archive(server: ServiceProcess) -> None:
    result = runner.invoke(app, ["runs", "--url", server.url])
    assert result.exit_code == 0 and result.output == "No runs in the archive.\n"


SERVICE_COMMANDS = [
    ["envs"],
    ["eval", "tictactoe", "--policy", "random", "-n", "1"],
    ["play"],
    ["runs"],
    ["export", "some-run", "-o", "export.jsonl"],
    ["train", "warmup-data", "-o", "warmup.jsonl", "-n", "1"],
]


@pytest.mark.parametrize("command", SERVICE_COMMANDS, ids=lambda command: command[0])
def test_an_unreachable_service_is_one_line_naming_its_url(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    url = f"http://127.0.0.1:{free_port()}"
    options = [] if command == ["envs"] else ["--url", url]  # envs: from WANDER_URL
    result = runner.invoke(app, [*command, *options], env={"WANDER_URL": url}, input="")
    assert result.exit_code == 1, result.output
    [line] = result.output.splitlines()
    assert line.startswith(f"Error: cannot reach the Wander service at {url}: "), line
    assert "Connection refused" in line and "(--url or WANDER_URL)" in line
    assert isinstance(result.exception, SystemExit)  # no traceback
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("url", ["127.0.0.1:8000", "ftp://host", "http://[::", "http://"])
def test_a_url_that_is_not_http_is_a_usage_error(url: str) -> None:
    """At once, before any request is tried (and retried)."""
    for args in [["envs", "--url", url], ["eval", "tictactoe", "--model", "m", "--base-url", url]]:
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        assert f"'{url}' is not a" in result.output and "URL" in result.output


def test_serve_never_prints_passwords() -> None:
    from wander.commands.service import _safe

    assert _safe("redis://:s3cret@cache:6379/0") == "redis://:***@cache:6379/0"
    assert _safe("postgresql+psycopg://me:pw@db/wander") == "postgresql+psycopg://me:***@db/wander"
    assert _safe("sqlite:///wander.db") == "sqlite:///wander.db"


def commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The path of every command under ``group`` (a group has ``commands``)."""
    for name, command in group.commands.items():
        yield (*path, name)
        if hasattr(command, "commands"):
            yield from commands(command, (*path, name))


def test_every_help_text_keeps_its_brackets() -> None:
    """The help renderer reads ``[...]`` as markup and swallowed ``[default: random]``,
    leaving "Example index ." on screen."""
    root: Any = typer.main.get_command(app)
    checked = 0
    for path in commands(root):
        command = root
        for name in path:
            command = command.commands[name]
        shown = " ".join(runner.invoke(app, [*path, "--help"]).output.split())
        for param in command.params:
            text = " ".join((getattr(param, "help", None) or "").split())
            for bracketed in re.findall(r"\\?\[[^\]]*\]", text):
                assert bracketed.lstrip("\\") in shown, (path, param.name, bracketed)
                checked += 1
        assert " . " not in shown and " .)" not in shown, path
    assert checked >= 2
