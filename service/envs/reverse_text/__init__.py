"""Reverse a paragraph: the talk's single-turn example."""

from wander.service.envs.reverse_text.env import ReverseText

__all__ = ["ReverseText"]
