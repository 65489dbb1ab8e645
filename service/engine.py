"""The episode engine: turns, seeds, limits and atomic steps (DESIGN §2-4).

Environments are pure functions of (config, state, action, rng); the engine
loads an episode from the store, calls the environment and writes the result
back with a compare-and-set, retrying on a lost race. That makes every step
atomic across coroutines, processes and replicas without locks, and makes a
retried step (same ``turn``, same action) return its recorded result instead of
applying twice.
"""

from __future__ import annotations

import asyncio
import secrets
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from client.models import (
    Action,
    BatchStepItem,
    CreateEpisodesRequest,
    EnvInfo,
    Episode,
    EpisodeRecord,
    ErrorInfo,
    RewardComponent,
    Score,
    StepError,
    StepResult,
)
from service.envs import Registry
from service.envs.sdk import EnvConfig, Environment, Message
from service.envs.seeding import TurnRandom, canonical_json, example_seed
from service.errors import (
    EnvNotFound,
    EpisodeDone,
    EpisodeNotDone,
    EpisodeNotFound,
    InvalidInput,
    PayloadTooLarge,
    TurnMismatch,
    WanderError,
)
from service.records import LastStep, StoredEpisode
from service.settings import Settings
from service.store import EpisodeStore


class Engine:
    def __init__(self, store: EpisodeStore, registry: Registry, settings: Settings) -> None:
        self.store = store
        self.registry = registry
        self.settings = settings
        self._infos = {name: _env_info(env) for name, env in registry.items()}

    # Environments

    def environments(self) -> list[EnvInfo]:
        return list(self._infos.values())

    def environment(self, name: str) -> EnvInfo:
        try:
            return self._infos[name]
        except KeyError:
            raise EnvNotFound(f"no environment named {name!r}") from None

    # Episodes

    async def create(self, request: CreateEpisodesRequest) -> list[Episode]:
        """Reset one example and store ``n`` episodes of it: a group sharing example and seed."""
        env = self._env(request.env)
        if request.n > self.settings.max_group_size:
            raise _field_error("n", f"n must be at most {self.settings.max_group_size}")
        if len(canonical_json(request.metadata)) > self.settings.max_metadata_bytes:
            raise PayloadTooLarge(
                f"metadata exceeds {self.settings.max_metadata_bytes} bytes of JSON"
            )
        config = _parse_config(env, request.config, ("body", "config"))
        if request.split not in env.split_names:
            raise _field_error("split", f"split must be one of {list(env.split_names)}")
        examples = env.examples(config, request.split)
        example = request.example
        if example is None:
            example = secrets.randbelow(len(examples))
        elif example >= len(examples):
            raise _field_error(
                "example", f"example must be below {len(examples)}, the size of {request.split!r}"
            )
        seed = request.seed
        if seed is None:
            seed = example_seed(env.name, request.split, config.seed, example)

        state, messages = env.reset(config, examples[example], seed)
        total = env.total(env.score(config, state).components)
        now = datetime.now(UTC)
        group = _new_id("grp")
        stored = [
            StoredEpisode(
                id=_new_id("ep"),
                env=env.name,
                version=env.version,
                config=config.model_dump(mode="json"),
                split=request.split,
                example=example,
                seed=seed,
                group=group,
                run=request.run,
                metadata=request.metadata,
                messages=messages,
                state=state,
                total=total,
                created_at=now,
                updated_at=now,
            )
            for _ in range(request.n)
        ]
        await self.store.add({ep.id: ep.model_dump_json().encode() for ep in stored})
        info = env.public_state(state)
        return [
            Episode(
                id=ep.id,
                env=ep.env,
                split=ep.split,
                example=example,
                seed=seed,
                group=group,
                run=ep.run,
                turn=0,
                done=False,
                observation=messages,  # type: ignore[arg-type]
                info=info,
            )
            for ep in stored
        ]

    async def step(self, episode_id: str, action: Action, turn: int | None = None) -> StepResult:
        """Apply ``action`` at ``turn`` (default: the current turn) exactly once."""
        message = _action_message(action)
        if len(canonical_json(message)) > self.settings.max_action_bytes:
            raise PayloadTooLarge(f"the action exceeds {self.settings.max_action_bytes} bytes")
        while True:
            episode, version = await self._load(episode_id)
            last = episode.last_step
            if last is not None and turn == episode.turn - 1 and last.action == message:
                return last.result  # a retry of the step already applied
            if episode.done:
                raise EpisodeDone(
                    f"episode {episode_id} is {episode.status}", {"turn": episode.turn}
                )
            if turn is not None and turn != episode.turn:
                raise TurnMismatch(
                    f"the step is for turn {turn}, but the episode is at turn {episode.turn}",
                    {"turn": episode.turn},
                )
            updated, result = self._apply(episode, message)
            if await self._save(updated, version):
                return result
            # Another request applied a step first: look again.

    async def step_many(self, items: Sequence[BatchStepItem]) -> list[StepResult | StepError]:
        """Apply many steps; each item succeeds or fails alone, results in request order.

        Steps of different episodes run concurrently; steps of one episode run in
        the order given, so a batch may advance an episode several turns.
        """
        if len(items) > self.settings.max_batch_steps:
            raise PayloadTooLarge(f"a batch holds at most {self.settings.max_batch_steps} steps")
        results: list[StepResult | StepError | None] = [None] * len(items)
        by_episode: dict[str, list[int]] = defaultdict(list)
        for index, item in enumerate(items):
            by_episode[item.episode_id].append(index)

        async def run_in_order(indices: list[int]) -> None:
            for index in indices:
                item = items[index]
                try:
                    results[index] = await self.step(item.episode_id, item.action, item.turn)
                except WanderError as exc:
                    error = ErrorInfo(code=exc.code, message=exc.message, details=exc.details)
                    results[index] = StepError(episode_id=item.episode_id, error=error)

        await asyncio.gather(*(run_in_order(indices) for indices in by_episode.values()))
        return results  # type: ignore[return-value]

    async def score(self, episode_id: str, *, partial: bool = False) -> Score:
        episode, _ = await self._load(episode_id)
        if not (episode.done or partial):
            raise EpisodeNotDone(
                f"episode {episode_id} is still being played; "
                "pass partial=true for the running score"
            )
        return self._score(episode)

    async def episode(self, episode_id: str) -> EpisodeRecord:
        episode, _ = await self._load(episode_id)
        return self._record(episode)

    async def abort(self, episode_id: str) -> None:
        """Mark an active episode aborted; a finished one is left as it is."""
        while True:
            episode, version = await self._load(episode_id)
            if episode.done:
                return
            now = datetime.now(UTC)
            aborted = episode.model_copy(
                update={"status": "aborted", "updated_at": now, "finished_at": now}
            )
            if await self._save(aborted, version):
                return

    # Internals

    def _env(self, name: str) -> Environment[Any]:
        try:
            return self.registry[name]
        except KeyError:
            raise EnvNotFound(f"no environment named {name!r}") from None

    async def _load(self, episode_id: str) -> tuple[StoredEpisode, int]:
        item = await self.store.load(episode_id)
        if item is None:
            raise EpisodeNotFound(f"no episode {episode_id!r} (unknown, or expired after idling)")
        return StoredEpisode.model_validate_json(item.data), item.version

    async def _save(self, episode: StoredEpisode, version: int) -> bool:
        """Compare-and-set ``episode`` over ``version``; a finished episode's record is
        queued for the archive in the same write."""
        archive = self._record(episode).model_dump_json().encode() if episode.done else None
        return await self.store.replace(
            episode.id, version, episode.model_dump_json().encode(), archive
        )

    def _record(self, episode: StoredEpisode) -> EpisodeRecord:
        env = self._env(episode.env)
        return EpisodeRecord(
            **episode.model_dump(exclude={"state", "total", "last_step"}),
            done=episode.done,
            score=self._score(episode),
            state=env.public_state(episode.state),
        )

    def _apply(self, episode: StoredEpisode, action: Message) -> tuple[StoredEpisode, StepResult]:
        """The episode after ``action``, and the step's result; nothing is written."""
        env = self._env(episode.env)
        config = _parse_config(env, episode.config, ("config",))
        state, observation, done = env.step(config, episode.state, action, TurnRandom(episode.seed))
        total = env.total(env.score(config, state).components)
        reward = total - episode.total
        turn = episode.turn + 1
        result = StepResult(
            episode_id=episode.id,
            turn=turn,
            observation=observation,  # type: ignore[arg-type]
            reward=reward,
            done=done,
            info=env.public_state(state),
        )
        now = datetime.now(UTC)
        updated = episode.model_copy(
            update={
                "turn": turn,
                "status": "done" if done else "active",
                "messages": [*episode.messages, action, *observation],
                "state": state,
                "step_rewards": [*episode.step_rewards, reward],
                "total": total,
                "last_step": LastStep(action=action, result=result),
                "updated_at": now,
                "finished_at": now if done else None,
            }
        )
        return updated, result

    def _score(self, episode: StoredEpisode) -> Score:
        env = self._env(episode.env)
        config = _parse_config(env, episode.config, ("config",))
        components, metrics = env.score(config, episode.state)
        return Score(
            episode_id=episode.id,
            done=episode.done,
            total=env.total(components),
            components=components,
            weights=dict(env.reward_weights),
            metrics=metrics,
        )


def _env_info(env: Environment[Any]) -> EnvInfo:
    default = env.Config()
    return EnvInfo(
        name=env.name,
        version=env.version,
        description=env.description,
        kind=env.kind,
        config_schema=env.Config.model_json_schema(),
        default_config=default.model_dump(mode="json"),
        splits=env.split_sizes(default),
        reward_components=[
            RewardComponent(name=name, weight=weight) for name, weight in env.reward_weights.items()
        ],
        tools=env.tools,
    )


def _parse_config(
    env: Environment[Any], config: Mapping[str, Any] | None, loc: tuple[str, ...]
) -> EnvConfig:
    try:
        return env.Config.model_validate(config or {})
    except ValidationError as exc:
        details = [
            {"loc": [*loc, *error["loc"]], "msg": error["msg"], "type": error["type"]}
            for error in exc.errors()
        ]
        raise InvalidInput(f"invalid config for {env.name!r}", details) from None


def _field_error(field: str, message: str) -> InvalidInput:
    return InvalidInput(message, [{"loc": ["body", field], "msg": message, "type": "value_error"}])


def _action_message(action: Action) -> Message:
    if isinstance(action, str):
        return {"role": "assistant", "content": action}
    return action.model_dump(mode="json")


def _new_id(kind: str) -> str:
    """An unguessable id: 128 random bits."""
    return f"{kind}_{secrets.token_urlsafe(16)}"
