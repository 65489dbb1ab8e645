"""The v1 API as data: each endpoint is a ``Call`` that the sync and the async
client send in the same way, so the two cannot drift apart."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import TypeAdapter

from wander.client.errors import error_from_response
from wander.client.models import (
    Action,
    AllDeadLetters,
    ArchivedEpisodesPage,
    BatchStepItem,
    BatchStepResponse,
    CreateEpisodesRequest,
    CreateEpisodesResponse,
    DeadLetterIds,
    DeadLettersChanged,
    DeadLetterSelection,
    DeadLettersPage,
    EnvInfo,
    EnvironmentsResponse,
    EpisodeRecord,
    NewEpisode,
    RunsPage,
    RunSummary,
    Score,
    StepError,
    StepRequest,
    StepResult,
    UnavailableEnvironments,
)

T = TypeVar("T")


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and how to read its answer.

    ``idempotent`` calls may be retried after any transport error, because
    sending them twice has the effect of sending them once (for steps, that is
    what ``turn`` buys); the others are retried only when the request cannot
    have reached the service.
    """

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    json: Any = None
    params: Mapping[str, Any] = field(default_factory=dict)
    idempotent: bool = True

    def result(self, response: httpx.Response) -> T:
        if response.is_error:
            try:
                body = response.json()
            except ValueError:
                body = None
            raise error_from_response(response.status_code, body, response.text)
        return self.parse(response)


def _model(adapter: TypeAdapter[T]) -> Callable[[httpx.Response], T]:
    return lambda response: adapter.validate_json(response.content)


def _segment(value: str) -> str:
    return quote(value, safe="")


_STEP_RESULTS: TypeAdapter[BatchStepResponse] = TypeAdapter(BatchStepResponse)


_ENVIRONMENTS: TypeAdapter[EnvironmentsResponse] = TypeAdapter(EnvironmentsResponse)


def environments() -> Call[list[EnvInfo]]:
    return Call("GET", "/v1/environments", lambda r: _listing(r).environments)


def unavailable_environments() -> Call[list[UnavailableEnvironments]]:
    return Call("GET", "/v1/environments", lambda r: _listing(r).unavailable)


def _listing(response: httpx.Response) -> EnvironmentsResponse:
    return _ENVIRONMENTS.validate_json(response.content)


def environment(name: str) -> Call[EnvInfo]:
    return Call("GET", f"/v1/environments/{_segment(name)}", _model(TypeAdapter(EnvInfo)))


def create(request: CreateEpisodesRequest) -> Call[list[NewEpisode]]:
    adapter = TypeAdapter(CreateEpisodesResponse)
    return Call(
        "POST",
        "/v1/episodes",
        lambda r: adapter.validate_json(r.content).episodes,
        json=request.model_dump(mode="json", exclude_none=True),
        idempotent=False,
    )


def step(episode_id: str, action: Action, turn: int | None) -> Call[StepResult]:
    body = StepRequest(action=action, turn=turn).model_dump(mode="json", exclude_none=True)
    return Call(
        "POST",
        f"/v1/episodes/{_segment(episode_id)}/step",
        _model(TypeAdapter(StepResult)),
        json=body,
        idempotent=turn is not None,
    )


def step_many(
    steps: Sequence[BatchStepItem | Mapping[str, Any]],
) -> Call[list[StepResult | StepError]]:
    items = [BatchStepItem.model_validate(item) for item in steps]
    return Call(
        "POST",
        "/v1/step",
        lambda r: _STEP_RESULTS.validate_json(r.content).results,
        json={"steps": [item.model_dump(mode="json", exclude_none=True) for item in items]},
        idempotent=all(item.turn is not None for item in items),
    )


def score(episode_id: str, partial: bool) -> Call[Score]:
    return Call(
        "GET",
        f"/v1/episodes/{_segment(episode_id)}/score",
        _model(TypeAdapter(Score)),
        params={"partial": "true"} if partial else {},
    )


def episode(episode_id: str) -> Call[EpisodeRecord]:
    return Call("GET", f"/v1/episodes/{_segment(episode_id)}", _model(TypeAdapter(EpisodeRecord)))


def delete(episode_id: str) -> Call[None]:
    return Call("DELETE", f"/v1/episodes/{_segment(episode_id)}", lambda r: None)


def runs(limit: int, offset: int) -> Call[RunsPage]:
    params = {"limit": limit, "offset": offset}
    return Call("GET", "/v1/runs", _model(TypeAdapter(RunsPage)), params=params)


def dead_letters(limit: int, after: str | None) -> Call[DeadLettersPage]:
    params: dict[str, Any] = {"limit": limit} | ({} if after is None else {"after": after})
    path = "/v1/admin/dead-letters"
    return Call("GET", path, _model(TypeAdapter(DeadLettersPage)), params=params)


def change_dead_letters(
    action: str, ids: Sequence[str] | None, all: bool
) -> Call[DeadLettersChanged]:
    """``retry`` or ``drop`` these ``ids``, or ``all``; not retried blindly: a repeat would
    find the letters gone."""
    if bool(ids) == all:
        raise ValueError("give either ids or all=True, not both or neither")
    selection: DeadLetterSelection = (
        AllDeadLetters(all=True) if all else DeadLetterIds(ids=list(ids or ()))
    )
    return Call(
        "POST",
        f"/v1/admin/dead-letters/{action}",
        _model(TypeAdapter(DeadLettersChanged)),
        json=selection.model_dump(mode="json"),
        idempotent=False,
    )


def run(name: str) -> Call[RunSummary]:
    return Call("GET", f"/v1/runs/{_segment(name)}", _model(TypeAdapter(RunSummary)))


def episode_filters(
    *,
    env: str | None = None,
    status: str | None = None,
    outcome: Sequence[str] = (),
    exclude_outcome: Sequence[str] = (),
    min_reward: float | None = None,
    max_reward: float | None = None,
) -> dict[str, Any]:
    """Query parameters selecting a run's archived episodes."""
    params = {
        "env": env,
        "status": status,
        "outcome": list(outcome),
        "exclude_outcome": list(exclude_outcome),
        "min_reward": min_reward,
        "max_reward": max_reward,
    }
    return {key: value for key, value in params.items() if value not in (None, [])}


def episodes_path(run: str) -> str:
    return f"/v1/runs/{_segment(run)}/episodes"


def run_episodes(
    run: str, filters: Mapping[str, Any], limit: int, offset: int
) -> Call[ArchivedEpisodesPage]:
    return Call(
        "GET",
        episodes_path(run),
        _model(TypeAdapter(ArchivedEpisodesPage)),
        params={**filters, "limit": limit, "offset": offset},
    )


def export(run: str, filters: Mapping[str, Any]) -> Call[list[dict[str, Any]]]:
    return Call(
        "GET",
        episodes_path(run),
        lambda r: [json.loads(line) for line in r.text.splitlines() if line],
        params={**filters, "format": "jsonl"},
    )
