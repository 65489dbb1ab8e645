"""``wander keys create|list|revoke``: the service's API keys, kept in its archive database.

Straight to the database, like ``wander db``, not through the service: the first admin
key has to come from somewhere, and no key exists yet to call ``/v1/admin/keys`` with.
The service looks presented keys up in the same table.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from wander.commands.service import DatabaseOption, existing_archive
from wander.options import fail, printable, service_settings

if TYPE_CHECKING:
    from wander.service.archive import KeyBook, StoredKey
    from wander.service.tenancy import Role

keys = typer.Typer(
    help="API keys: who may call the service, for which tenant, with which role.",
    no_args_is_help=True,
)

UNLIMITED = "unlimited"
QUOTA_HELP = "Overrides the role's default; `unlimited` lifts the limit."


def _quota_option(flag: str, what: str) -> Any:
    return typer.Option(flag, help=f"{what} {QUOTA_HELP}", metavar="N|unlimited")


@keys.command("create")
def create_key(
    tenant: Annotated[str, typer.Option(help="The tenant the key acts for: a-z, 0-9 and `_.-`.")],
    role: Annotated[str, typer.Option(help="agent, trainer or admin.")],
    name: Annotated[str | None, typer.Option(help="A label for people: who holds the key.")] = None,
    requests_per_second: Annotated[
        str | None, _quota_option("--requests-per-second", "Sustained request rate.")
    ] = None,
    burst: Annotated[
        str | None, _quota_option("--burst", "Requests at once above the rate.")
    ] = None,
    live_episodes: Annotated[
        str | None, _quota_option("--live-episodes", "Unfinished episodes of the tenant.")
    ] = None,
    metadata_bytes: Annotated[
        str | None,
        _quota_option("--metadata-bytes", "Metadata bytes of the tenant's unfinished episodes."),
    ] = None,
    group_size: Annotated[
        str | None, _quota_option("--group-size", "Largest `n` of one create request.")
    ] = None,
    batch_steps: Annotated[
        str | None, _quota_option("--batch-steps", "Most steps in one batch request.")
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Print the key alone (for scripts).")
    ] = False,
    database_url: DatabaseOption = None,
) -> None:
    """Create a key and print it: the only time it is shown (only its hash is stored)."""
    given = {
        "requests_per_second": requests_per_second, "burst": burst,
        "live_episodes": live_episodes, "metadata_bytes": metadata_bytes,
        "group_size": group_size, "batch_steps": batch_steps,
    }  # fmt: skip
    quotas = {name: _quota(name, text) for name, text in given.items() if text is not None}
    checked_role = _role(role)
    with _key_book(database_url) as book:
        key, secret = book.create(tenant, checked_role, name=name, quotas=quotas)
    if quiet:
        typer.echo(secret)
        return
    typer.echo(f"Created key {key.id}: tenant {key.tenant}, role {key.role}.")
    typer.echo(
        "The key follows. It is shown this once and stored nowhere (only its hash): "
        "keep it now. If it is lost, revoke it and create another."
    )
    typer.echo(secret)
    if not service_settings().requires_keys:
        typer.echo(
            "Note: a service started with these settings takes no key (and refuses to "
            "start while the archive holds keys): start it with WANDER_AUTH=keys.",
            err=True,
        )


@keys.command("list")
def list_keys(
    tenant: Annotated[str | None, typer.Option(help="Only this tenant's keys.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Revoked keys too.")] = False,
    database_url: DatabaseOption = None,
) -> None:
    """Show the keys, oldest first (never the keys themselves: they are not stored)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    with _key_book(database_url) as book:
        found = book.list(tenant=tenant, include_revoked=all_)
    console = Console()
    if not found:
        whose = "" if tenant is None else f" of tenant {printable(tenant)}"
        console.print(escape(f"No {'' if all_ else 'working '}keys{whose}."))
        return
    table = Table("id", "tenant", "role", "name", "created (UTC)", "revoked (UTC)", "quotas")
    for column in table.columns[:3]:
        column.no_wrap = True
    for key in found:
        cells = [key.id, key.tenant, key.role.value, key.name, _when(key.created_at),
                 _when(key.revoked_at), _overrides(key)]  # fmt: skip
        table.add_row(*(escape(printable(cell)) for cell in cells))
    console.print(table)


@keys.command("revoke")
def revoke_key(
    key_id: Annotated[str, typer.Argument(help="The key's id (`key_…`), as `list` shows it.")],
    database_url: DatabaseOption = None,
) -> None:
    """Revoke a key: the service refuses it from now on. The key stays listed (`--all`)."""
    with _key_book(database_url) as book:
        key = book.revoke(key_id)
    if key is None:
        fail(f"no API key has the id {printable(key_id)} (`wander keys list --all` shows them)")
    # Idempotent: a key revoked before keeps the time it was revoked at, and reads the same.
    when = _when(key.revoked_at)
    typer.echo(f"Key {key.id} (tenant {key.tenant}, role {key.role}) is revoked since {when} UTC.")


@contextmanager
def _key_book(database_url: str | None) -> Iterator[KeyBook]:
    """The keys of the archive at ``database_url``, once it answers at the latest
    migration; what goes wrong is one line (or a usage error naming the option), never
    a traceback."""
    from wander.service.archive import Archive, KeyBook
    from wander.service.errors import DatabaseUnavailable, InvalidInput

    url = existing_archive(database_url or service_settings().database_url)
    archive = Archive(url)
    try:
        archive.ping()
        yield KeyBook(archive)
    except DatabaseUnavailable as exc:
        fail(" ".join(exc.message.split()))  # the driver's reason may span lines
    except InvalidInput as exc:
        field = exc.details[0]["loc"][-1]
        raise typer.BadParameter(exc.message, param_hint=_flag(field)) from None
    finally:
        archive.dispose()


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def _role(text: str) -> Role:
    from wander.service.tenancy import Role

    try:
        return Role(text)
    except ValueError:
        roles = ", ".join(Role)
        message = f"{text!r} is not a role: one of {roles}"
        raise typer.BadParameter(message, param_hint="--role") from None


def _quota(name: str, text: str) -> float | int | None:
    """A quota option's value: a number, or ``unlimited`` (None); the archive checks the
    rest (not negative, whole for counts) and says which option is wrong."""
    if text.strip().lower() == UNLIMITED:
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    message = f"{text!r} is neither a number nor {UNLIMITED!r}"
    raise typer.BadParameter(message, param_hint=_flag(name))


def _when(moment: datetime | None) -> str | None:
    return None if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S")


def _overrides(key: StoredKey) -> str:
    return ", ".join(
        f"{name}={UNLIMITED if value is None else value}" for name, value in key.quotas.items()
    )
