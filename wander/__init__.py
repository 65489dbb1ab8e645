"""Wander: environments as a service for reinforcement learning of language-model agents.

The one import root of the ``wander-rl`` distribution:

- ``wander.client``: the Python client (sync and async), wire models, policies, evaluation;
  the base install.
- ``wander.service``: the FastAPI service (the ``service`` extra).
- ``wander.trainer``: GRPO and SFT with TRL, over the client (the ``trainer`` extra).
- ``wander.sdk``: what an environment author imports.
- ``wander.testing``: a real ``wander serve`` for tests and benchmarks.
- ``wander.cli``: the ``wander`` command, which imports each layer lazily.

``docs/architecture.md`` says which layer may import which; ``make lint`` checks it.
"""
