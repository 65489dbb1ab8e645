"""Policies: what plays the environment: a model, a baseline or a person."""

from wander.client.policies.base import LatestTurn, Policy
from wander.client.policies.human import HumanPolicy
from wander.client.policies.openai import OpenAIChatPolicy
from wander.client.policies.tictactoe import MinimaxPolicy, RandomPolicy

__all__ = [
    "HumanPolicy",
    "LatestTurn",
    "MinimaxPolicy",
    "OpenAIChatPolicy",
    "Policy",
    "RandomPolicy",
]
