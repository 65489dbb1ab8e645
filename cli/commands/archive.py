"""``wander archive dead-letters list|retry|drop``: the records the archive database refused.

The commands call the service's admin routes (``/v1/admin/dead-letters``) rather than
the store: the in-process store's dead letters exist only inside the service's process,
and when keys come, the service checks the admin role in one place.
"""

from __future__ import annotations

from typing import Annotated

import typer

from wander.options import ApiKeyOption, UrlOption, fail, printable, talks_to_service

archive = typer.Typer(help="The archive of finished episodes.", no_args_is_help=True)
dead_letters = typer.Typer(
    help="Finished episodes the archive database refused, set aside with the reason.",
    no_args_is_help=True,
)
archive.add_typer(dead_letters, name="dead-letters")

IdsArgument = Annotated[
    list[str] | None,
    typer.Argument(help="Dead-letter ids, as `list` shows them.", show_default=False),
]
AllOption = Annotated[bool, typer.Option("--all", help="Every dead letter held now.")]


@dead_letters.command("list")
@talks_to_service
def list_dead_letters(
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Show at most this many.")] = 100,
    after: Annotated[str | None, typer.Option(help="Show those after this id.")] = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Show the dead letters, oldest first: id, episode, run, when and why."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from wander.client import WanderClient

    with WanderClient(url, api_key) as wander:
        page = wander.dead_letters(limit=limit, after=after)
    letters = page.dead_letters
    console = Console()
    if not letters:
        console.print("No dead letters." if after is None else f"No dead letters after {after}.")
        return
    table = Table("id", "episode", "run", "failed at (UTC)", "error")
    for column in table.columns[:4]:
        column.no_wrap = True
    for letter in letters:
        failed_at = letter.failed_at.strftime("%Y-%m-%d %H:%M:%S")
        cells = [letter.id, letter.episode_id, letter.run, failed_at, letter.error]
        table.add_row(*(escape(printable(cell)) for cell in cells))
    console.print(table)
    more = f"; the next with --after {letters[-1].id}" if len(letters) < page.total else ""
    console.print(f"{len(letters)} of {page.total} dead letters{more}")


@dead_letters.command("retry")
@talks_to_service
def retry_dead_letters(
    ids: IdsArgument = None,
    all_: AllOption = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Move dead letters back to the archive's backlog, to be written again.

    Do it once what the database refused them for is fixed: one that fails again comes
    back as a dead letter, with a new id."""
    from wander.client import WanderClient

    _check_selection(ids, all_)
    with WanderClient(url, api_key) as wander:
        result = wander.retry_dead_letters(ids, all=all_)
    typer.echo(f"Moved {_count(result.ids)} back to the archive backlog.")
    _report_missing(result.missing)


@dead_letters.command("drop")
@talks_to_service
def drop_dead_letters(
    ids: IdsArgument = None,
    all_: AllOption = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Drop without asking.")] = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Delete dead letters for good: those episodes will never be archived."""
    from wander.client import WanderClient

    _check_selection(ids, all_)
    if not yes:
        what = "every dead letter" if all_ else _count(ids or [])
        typer.confirm(f"Drop {what} for good? Those episodes will never be archived.", abort=True)
    with WanderClient(url, api_key) as wander:
        result = wander.drop_dead_letters(ids, all=all_)
    typer.echo(f"Dropped {_count(result.ids)}.")
    _report_missing(result.missing)


def _check_selection(ids: list[str] | None, all_: bool) -> None:
    if bool(ids) == all_:
        raise typer.BadParameter("give dead-letter ids or --all (one of them)")


def _count(ids: list[str]) -> str:
    return f"{len(ids)} dead letter{'' if len(ids) == 1 else 's'}"


def _report_missing(missing: list[str]) -> None:
    if missing:
        fail(f"no dead letter has the id {', '.join(map(printable, missing))}")
