"""Episode handles: an episode's fields plus the turn and transcript kept for the caller."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from pydantic import PrivateAttr, model_validator

from wander.client.models import (
    Action,
    AssistantMessage,
    EpisodeRecord,
    Message,
    NewEpisode,
    Score,
    StepResult,
)

if TYPE_CHECKING:
    from wander.client.aio import AsyncWanderClient
    from wander.client.sync import WanderClient


class _Tracked(NewEpisode):
    """What a handle knows: the fields of the episode as created, kept up to date
    (``turn``, ``done``, ``observation``, ``info``), the whole transcript
    (``messages``) and the step rewards."""

    messages: list[Message] = []
    rewards: list[float] = []

    @model_validator(mode="after")
    def _start_transcript(self) -> _Tracked:
        if not self.messages:
            self.messages = list(self.observation)
        return self

    @property
    def total_reward(self) -> float:
        """The running total: the sum of the step rewards so far."""
        return math.fsum(self.rewards)

    def _advance(self, action: Action, result: StepResult) -> StepResult:
        message = (
            action if isinstance(action, AssistantMessage) else AssistantMessage(content=action)
        )
        self.messages += [Message.model_validate(message.model_dump()), *result.observation]
        self.rewards.append(result.reward)
        self.turn, self.done = result.turn, result.done
        self.observation, self.info = result.observation, result.info
        return result


class Episode(_Tracked):
    """A live episode for ``WanderClient``: ``step`` passes the turn for you, so a
    retried request never applies twice."""

    _client: WanderClient = PrivateAttr()

    @classmethod
    def bind(cls, fields: NewEpisode, client: WanderClient) -> Episode:
        episode = cls.model_validate(fields.model_dump())
        episode._client = client
        return episode

    def step(self, action: Action) -> StepResult:
        return self._advance(action, self._client.step(self.id, action, turn=self.turn))

    def score(self, *, partial: bool = False) -> Score:
        return self._client.score(self.id, partial=partial)

    def record(self) -> EpisodeRecord:
        return self._client.episode(self.id)

    def delete(self) -> None:
        self._client.delete(self.id)


class AsyncEpisode(_Tracked):
    """A live episode for ``AsyncWanderClient``; the same as ``Episode``, awaited."""

    _client: AsyncWanderClient = PrivateAttr()

    @classmethod
    def bind(cls, fields: NewEpisode, client: AsyncWanderClient) -> AsyncEpisode:
        episode = cls.model_validate(fields.model_dump())
        episode._client = client
        return episode

    async def step(self, action: Action) -> StepResult:
        return self._advance(action, await self._client.step(self.id, action, turn=self.turn))

    async def score(self, *, partial: bool = False) -> Score:
        return await self._client.score(self.id, partial=partial)

    async def record(self) -> EpisodeRecord:
        return await self._client.episode(self.id)

    async def delete(self) -> None:
        await self._client.delete(self.id)
