"""``WanderClient``: the blocking client."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import httpx

from wander.client import _api
from wander.client._api import Call
from wander.client.config import client_options
from wander.client.episode import Episode
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
from wander.client.transport import send

T = TypeVar("T")


class WanderClient:
    """Talks to a Wander service. Use as a context manager, or call ``close()``.

    Requests that fail on the way (connection errors, 503, 429 with
    ``Retry-After``) are retried with backoff where that cannot apply anything
    twice: steps with a ``turn`` (episode handles always pass one), reads and
    deletes. ``api_key`` (else ``WANDER_API_KEY``) is sent as a bearer token.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float | httpx.Timeout | None = None,
        retry: Retry | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.retry = retry or Retry()
        self._http = httpx.Client(transport=transport, **client_options(base_url, api_key, timeout))

    @property
    def base_url(self) -> str:
        return str(self._http.base_url)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> WanderClient:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _send(self, call: Call[T]) -> T:
        return send(self._http, call, self.retry)

    def environments(self) -> list[EnvInfo]:
        return self._send(_api.environments())

    def unavailable_environments(self) -> list[UnavailableEnvironments]:
        """Environments installed on the service but not offered, with why (a missing extra)."""
        return self._send(_api.unavailable_environments())

    def environment(self, name: str) -> EnvInfo:
        return self._send(_api.environment(name))

    def create(
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
    ) -> list[Episode]:
        """Start ``n`` episodes of one example (a GRPO group sharing its seed)."""
        request = CreateEpisodesRequest(
            env=env, config=config, split=split, example=example, seed=seed, n=n, run=run,
            metadata=metadata,
        )  # fmt: skip
        return [Episode.bind(fields, self) for fields in self._send(_api.create(request))]

    def step(self, episode_id: str, action: Action, *, turn: int | None = None) -> StepResult:
        return self._send(_api.step(episode_id, action, turn))

    def step_many(
        self, steps: Sequence[BatchStepItem | Mapping[str, Any]]
    ) -> list[StepResult | StepError]:
        return self._send(_api.step_many(steps))

    def score(self, episode_id: str, *, partial: bool = False) -> Score:
        return self._send(_api.score(episode_id, partial))

    def episode(self, episode_id: str) -> EpisodeRecord:
        return self._send(_api.episode(episode_id))

    def delete(self, episode_id: str) -> None:
        self._send(_api.delete(episode_id))

    def runs(self, *, limit: int = 100, offset: int = 0) -> RunsPage:
        """A page of the archive's run labels, oldest first; ``total`` counts them all."""
        return self._send(_api.runs(limit, offset))

    def dead_letters(self, *, limit: int = 100, after: str | None = None) -> DeadLettersPage:
        """Archive records the database refused, oldest first (admin)."""
        return self._send(_api.dead_letters(limit, after))

    def retry_dead_letters(
        self, ids: Sequence[str] | None = None, *, all: bool = False
    ) -> DeadLettersChanged:
        """Move dead letters (these ``ids``, or ``all``) back to the archive backlog (admin)."""
        return self._send(_api.change_dead_letters("retry", ids, all))

    def drop_dead_letters(
        self, ids: Sequence[str] | None = None, *, all: bool = False
    ) -> DeadLettersChanged:
        """Delete dead letters for good (admin): those episodes are never archived."""
        return self._send(_api.change_dead_letters("drop", ids, all))

    def run(self, name: str) -> RunSummary:
        return self._send(_api.run(name))

    def episodes(
        self, run: str, *, limit: int = 100, offset: int = 0, **filters: Any
    ) -> ArchivedEpisodesPage:
        """A page of a run's archived episodes (filters as for ``export``)."""
        return self._send(_api.run_episodes(run, _api.episode_filters(**filters), limit, offset))

    def export(self, run: str, **filters: Any) -> list[dict[str, Any]]:
        """A run's archived episodes as chat examples ``{"messages": [...]}`` for SFT;
        filters: ``env``, ``status``, ``outcome``, ``exclude_outcome``, ``min_reward``,
        ``max_reward``."""
        return self._send(_api.export(run, _api.episode_filters(**filters)))
