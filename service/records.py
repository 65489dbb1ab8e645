"""The document the engine keeps in the store for each episode."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel

from client.models import StepResult


class LastStep(BaseModel):
    """The last applied step, kept so that a retry of it returns the same result."""

    action: dict[str, Any]
    result: StepResult


class StoredEpisode(BaseModel):
    id: str
    env: str
    version: str
    config: dict[str, Any]
    split: str
    example: int
    seed: int
    group: str
    run: str | None
    metadata: dict[str, Any] | None
    status: Literal["active", "done", "aborted"] = "active"
    turn: int = 0
    messages: list[dict[str, Any]]
    state: dict[str, Any]
    step_rewards: list[float] = []
    total: float
    """The running total after the last step (the base of the next step's reward)."""
    last_step: LastStep | None = None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None = None

    @property
    def done(self) -> bool:
        return self.status != "active"
