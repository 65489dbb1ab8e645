"""Answer, then double-check: the talk's multi-turn example."""

from wander.service.envs.double_check.env import DoubleCheck, DoubleCheckConfig

__all__ = ["DoubleCheck", "DoubleCheckConfig"]
