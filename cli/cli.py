"""The ``wander`` command. Each subcommand imports what it needs when it runs, so
the client-only install never imports the service."""

from __future__ import annotations

import typer

from wander.commands import archive, client, keys, policies, service, train

app = typer.Typer(
    help="Wander: environments as a service for RL of language-model agents.",
    no_args_is_help=True,
    add_completion=False,
)
app.command()(service.serve)
app.add_typer(service.db, name="db")
app.add_typer(archive.archive, name="archive")
app.add_typer(keys.keys, name="keys")
app.command()(client.envs)
app.command("eval")(client.evaluate)
app.command()(client.play)
app.command()(client.runs)
app.command()(client.export)
app.add_typer(policies.policy, name="policy")
app.add_typer(train.train, name="train")
