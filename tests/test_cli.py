from typer.testing import CliRunner

from wander.cli import app


def test_serve_refuses_several_workers_on_the_in_process_store(monkeypatch) -> None:
    monkeypatch.delenv("WANDER_REDIS_URL", raising=False)
    result = CliRunner().invoke(app, ["serve", "--workers", "2"])
    assert result.exit_code == 2
    assert "WANDER_REDIS_URL" in result.output


def test_help_lists_serve() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0 and "serve" in result.output
