"""``AsyncWanderClient``: the asyncio client, the same surface as ``WanderClient``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import httpx

from wander.client import _api
from wander.client._api import Call
from wander.client.config import client_options
from wander.client.episode import AsyncEpisode
from wander.client.models import (
    Action,
    ArchivedEpisodesPage,
    BatchStepItem,
    CreateEpisodesRequest,
    DeadLettersChanged,
    DeadLettersPage,
    EnvInfo,
    EpisodeRecord,
    RunsPage,
    RunSummary,
    Score,
    StepError,
    StepResult,
    UnavailableEnvironments,
)
from wander.client.retry import Retry
from wander.client.transport import asend

T = TypeVar("T")


class AsyncWanderClient:
    """Talks to a Wander service from asyncio; ``async with``, or ``await aclose()``.
    Retries as ``WanderClient`` does."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float | httpx.Timeout | None = None,
        retry: Retry | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.retry = retry or Retry()
        self._http = httpx.AsyncClient(
            transport=transport, **client_options(base_url, api_key, timeout)
        )

    @property
    def base_url(self) -> str:
        return str(self._http.base_url)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncWanderClient:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _send(self, call: Call[T]) -> T:
        return await asend(self._http, call, self.retry)

    async def environments(self) -> list[EnvInfo]:
        return await self._send(_api.environments())

    async def unavailable_environments(self) -> list[UnavailableEnvironments]:
        """Environments installed on the service but not offered, with why (a missing extra)."""
        return await self._send(_api.unavailable_environments())

    async def environment(self, name: str) -> EnvInfo:
        return await self._send(_api.environment(name))

    async def create(
        self,
        env: str,
        *,
        config: Mapping[str, Any] | None = None,
        split: str = "train",
        example: int | None = None,
        seed: int | None = None,
        n: int = 1,
        run: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> list[AsyncEpisode]:
        """Start ``n`` episodes of one example (a GRPO group sharing its seed)."""
        request = CreateEpisodesRequest(
            env=env, config=config, split=split, example=example, seed=seed, n=n, run=run,
            metadata=metadata,
        )  # fmt: skip
        return [AsyncEpisode.bind(f, self) for f in await self._send(_api.create(request))]

    async def step(self, episode_id: str, action: Action, *, turn: int | None = None) -> StepResult:
        return await self._send(_api.step(episode_id, action, turn))

    async def step_many(
        self, steps: Sequence[BatchStepItem | Mapping[str, Any]]
    ) -> list[StepResult | StepError]:
        return await self._send(_api.step_many(steps))

    async def score(self, episode_id: str, *, partial: bool = False) -> Score:
        return await self._send(_api.score(episode_id, partial))

    async def episode(self, episode_id: str) -> EpisodeRecord:
        return await self._send(_api.episode(episode_id))

    async def delete(self, episode_id: str) -> None:
        await self._send(_api.delete(episode_id))

    async def runs(self, *, limit: int = 100, offset: int = 0) -> RunsPage:
        """A page of the archive's run labels, oldest first; ``total`` counts them all."""
        return await self._send(_api.runs(limit, offset))

    async def dead_letters(self, *, limit: int = 100, after: str | None = None) -> DeadLettersPage:
        """Archive records the database refused, oldest first (admin)."""
        return await self._send(_api.dead_letters(limit, after))

    async def retry_dead_letters(
        self, ids: Sequence[str] | None = None, *, all: bool = False
    ) -> DeadLettersChanged:
        """Move dead letters (these ``ids``, or ``all``) back to the archive backlog (admin)."""
        return await self._send(_api.change_dead_letters("retry", ids, all))

    async def drop_dead_letters(
        self, ids: Sequence[str] | None = None, *, all: bool = False
    ) -> DeadLettersChanged:
        """Delete dead letters for good (admin): those episodes are never archived."""
        return await self._send(_api.change_dead_letters("drop", ids, all))

    async def run(self, name: str) -> RunSummary:
        return await self._send(_api.run(name))

    async def episodes(
        self, run: str, *, limit: int = 100, offset: int = 0, **filters: Any
    ) -> ArchivedEpisodesPage:
        """A page of a run's archived episodes (filters as for ``export``)."""
        return await self._send(
            _api.run_episodes(run, _api.episode_filters(**filters), limit, offset)
        )

    async def export(self, run: str, **filters: Any) -> list[dict[str, Any]]:
        """A run's archived episodes as chat examples ``{"messages": [...]}`` for SFT;
        filters: ``env``, ``status``, ``outcome``, ``exclude_outcome``, ``min_reward``,
        ``max_reward``."""
        return await self._send(_api.export(run, _api.episode_filters(**filters)))
