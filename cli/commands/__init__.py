"""The subcommands of ``wander``, one module per area."""
