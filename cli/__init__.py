"""Wander: environments as a service for reinforcement learning of language-model agents.

The one import root of the ``wander-rl`` distribution:

- ``wander.client``: the Python client (sync and async), wire models, policies, evaluation;
  the base install.
- ``wander.service``: the FastAPI service (the ``service`` extra).
- ``wander.trainer``: GRPO and SFT with TRL, over the client (the ``trainer`` extra).
- ``wander.sdk``: what an environment author imports.
- ``wander.testing``: a real ``wander serve`` for tests and benchmarks.
- ``wander.cli``: the ``wander`` command, which imports each layer lazily.
- ``wander.WanderTaskset``, ``wander.WanderEnv``: Wander as a Verifiers 0.4 taskset
  (``vf-eval wander``; the ``verifiers`` extra), from ``wander.client.verifiers``.

``docs/architecture.md`` says which layer may import which; ``make lint`` checks it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["WanderEnv", "WanderSeat", "WanderTaskset"]
"""What Verifiers 0.4 takes from ``wander`` when a run names the taskset ``wander``
(``vf-eval wander``): it imports the top-level module named after the id and reads
``__all__`` for one ``Taskset`` and one ``Env`` subclass. Both live in
``wander.client.verifiers``, imported only when asked for (``__getattr__``), so that
``import wander`` never imports verifiers. ``WanderSeat`` is the harness (``harness.id =
"wander"``) that Wander's hosted Verifiers episodes seat at every agent of the env
(``wander.service.envs.hosted.vf_seat``); it runs only there."""


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'wander' has no attribute {name!r}")
    try:
        if name == "WanderSeat":
            from wander.service.envs.hosted import vf_seat

            return vf_seat.WanderSeat
        from wander.client import verifiers
    except ModuleNotFoundError as exc:
        if exc.name != "verifiers":
            raise
        from wander.extras import install_command

        raise ModuleNotFoundError(
            f"wander.{name} needs Verifiers: {install_command('verifiers')}", name=exc.name
        ) from exc
    return getattr(verifiers, name)
