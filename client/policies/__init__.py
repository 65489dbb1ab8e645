"""Policies: what plays the environment (DESIGN §7)."""

from client.policies.base import Policy
from client.policies.human import HumanPolicy
from client.policies.openai import OpenAIChatPolicy
from client.policies.tictactoe import MinimaxPolicy, RandomPolicy

__all__ = ["HumanPolicy", "MinimaxPolicy", "OpenAIChatPolicy", "Policy", "RandomPolicy"]
