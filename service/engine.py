"""The episode engine: turns, seeds, limits and atomic steps.

The contract is docs/architecture.md, "The episode engine", and docs/api.md,
"Step semantics".

Environments are pure functions of (config, state, action, rng); the engine
loads an episode from the store, calls the environment and writes the result
back with a compare-and-set, retrying on a lost race. That makes every step
atomic across coroutines, processes and replicas without locks, and makes a
retried step (same ``turn``, same action) return its recorded result instead of
applying twice.

Steps are the hot path: the engine handles them as plain dicts
(``service.records``) and leaves the pydantic models to the colder routes.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from wander.client.error_codes import ErrorCode
from wander.client.models import Action, BatchStepItem, CreateEpisodesRequest, EpisodeRecord
from wander.service import metrics
from wander.service.archive import Archive
from wander.service.backpressure import BacklogGate
from wander.service.catalog import Catalog, parse_config
from wander.service.envs.sdk import Message
from wander.service.envs.seeding import canonical_json, example_seed
from wander.service.errors import (
    EnvCallFailed,
    EpisodeDone,
    EpisodeNotDone,
    EpisodeNotFound,
    InvalidInput,
    PayloadTooLarge,
    QuotaExceeded,
    TurnMismatch,
    WanderError,
)
from wander.service.records import (
    EMPTY_LOG_BYTES,
    NewEpisodeDict,
    StepError,
    StepResult,
    StoredEpisode,
    StoredScore,
    decode,
    decode_log,
    encode,
    encode_log,
    grown,
    is_done,
    now,
)
from wander.service.sandbox import Sandbox
from wander.service.settings import Settings
from wander.service.store import EpisodeStore
from wander.service.store.base import ArchiveRecord, RecordWithLog, Versioned, Write
from wander.service.tenancy import OPEN, Principal

log = logging.getLogger(__name__)

RECORD_FIELDS = (
    "id", "env", "version", "split", "example", "seed", "group", "run", "metadata", "config",
    "turn", "status", "step_rewards", "created_at", "updated_at", "finished_at",
)  # fmt: skip
"""The stored fields an archived ``EpisodeRecord`` keeps as they are (and the messages)."""


@dataclass(frozen=True, slots=True)
class Decision:
    """What a step does to an episode: its result, and the episode to write after it
    (None for a retry of the step already applied: nothing to write)."""

    result: StepResult
    updated: StoredEpisode | None = None
    append: Sequence[bytes] = ()
    """The messages the step adds to the episode's log."""
    invalid: bool = False
    """The environment found the action invalid (counted once the step is written)."""


@dataclass(frozen=True, slots=True)
class PlannedWrite:
    """One item of a batch round, decided and waiting for the round's bulk write."""

    index: int
    """The item's position in the batch request."""
    write: Write
    decision: Decision


class Engine:
    """Episodes: create, step (single and batched), score, read and abort.

    Every method takes the ``principal`` that asks: new episodes belong to its tenant,
    and an episode of another tenant is not found, exactly as an unknown id (unless it
    is an admin, who sees every tenant). Its quotas bound what it may create at once.
    """

    def __init__(
        self,
        store: EpisodeStore,
        catalog: Catalog,
        settings: Settings,
        archive: Archive | None = None,
    ) -> None:
        self.store = store
        self.archive = archive
        """Where a finished episode is read once the store has let it go (``release``)."""
        self.catalog = catalog
        self.settings = settings
        self.sandbox = Sandbox(settings, catalog.registry.values())
        """Where environment code runs: every reset, step and score goes through it."""
        self.backlog = BacklogGate(store, settings.archive_backlog_max)
        """New episodes wait while the archive's backlog is past its bound."""

    async def aclose(self) -> None:
        """Stop the environment workers."""
        await self.sandbox.aclose()

    async def create(
        self, request: CreateEpisodesRequest, principal: Principal = OPEN
    ) -> list[NewEpisodeDict]:
        """Reset one example and store ``n`` episodes of it: a group sharing example and seed."""
        await self.backlog.admit()
        env = self.catalog.env(request.env)
        if request.n > self.settings.max_group_size:
            raise _field_error("n", f"n must be at most {self.settings.max_group_size}")
        quotas = principal.quotas
        _within_quota("group_size", quotas.group_size, request.n)
        metadata_bytes = len(canonical_json(request.metadata)) if request.metadata else 0
        if metadata_bytes > self.settings.max_metadata_bytes:
            raise PayloadTooLarge(
                f"metadata exceeds {self.settings.max_metadata_bytes} bytes of JSON"
            )
        config = parse_config(env, request.config, ("body", "config"))
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

        ids = self.store.new_ids(request.n)
        started = await self.sandbox.start(
            env, config, request.split, example, seed, tenant=principal.tenant,
            episode=ids[0] if request.n == 1 else None,  # a group's members share the start
        )  # fmt: skip
        opening = encode_log(started["messages"])
        stamp = now()
        template: StoredEpisode = {
            "id": "",
            "env": env.name,
            "version": env.version,
            "config": config.model_dump(mode="json"),
            "split": request.split,
            "example": example,
            "seed": seed,
            "group": _new_id("grp"),
            "run": request.run,
            "metadata": request.metadata,
            "tenant": principal.tenant,
            "status": "active",
            "turn": 0,
            "messages_bytes": grown(EMPTY_LOG_BYTES, opening),
            "state": started["state"],
            "step_rewards": [],
            "total": started["score"]["total"],
            "score": started["score"],
            "info": started["info"],
            "last_step": None,
            "created_at": stamp,
            "updated_at": stamp,
            "finished_at": None,
        }
        await self.store.add(
            {id_: encode({**template, "id": id_}) for id_ in ids},
            env.name,
            log=opening,
            tenant=principal.counted_tenant,
            metadata_bytes=metadata_bytes,
            max_live=quotas.live_episodes,
            max_metadata_bytes=quotas.metadata_bytes,
        )
        metrics.for_env(env.name).created.inc(request.n)
        return [
            {
                "id": id_,
                "env": env.name,
                "split": request.split,
                "example": example,
                "seed": seed,
                "group": template["group"],
                "run": request.run,
                "turn": 0,
                "done": False,
                "observation": started["messages"],
                "info": started["info"],
            }
            for id_ in ids
        ]

    async def step(
        self,
        episode_id: str,
        action: Action,
        turn: int | None = None,
        principal: Principal = OPEN,
    ) -> StepResult:
        """Apply ``action`` at ``turn`` (default: the current turn) exactly once."""
        message = self._action_message(action)
        fresh = False
        while True:
            item = await self.store.load(episode_id, cached=not fresh)
            try:
                episode = _decode(episode_id, item, principal)
                decision = await self._decide(episode, message, turn)
            except EnvCallFailed:
                raise  # the environment's verdict on this action: a fresh read would not change it
            except WanderError:
                if fresh:
                    raise
                fresh = True  # the remembered version may be stale: decide on a fresh one
                continue
            if decision.updated is None:
                return decision.result
            assert item is not None
            if await self.store.replace(*self._step_write(decision, item.version)):
                _count_step(decision)
                return decision.result
            fresh = True  # another request applied a step first: look again

    async def step_many(
        self, items: Sequence[BatchStepItem], principal: Principal = OPEN
    ) -> list[StepResult | StepError]:
        """Apply many steps; each item succeeds or fails alone, results in request order.

        The k-th steps of all the episodes in the batch are applied together: one
        bulk read, one bulk compare-and-set, so a batch costs a couple of store
        round trips however large it is. Steps of one episode apply in the order
        given (a batch may advance an episode several turns); an item whose write
        loses a race is replayed on its own.
        """
        if len(items) > self.settings.max_batch_steps:
            raise PayloadTooLarge(f"a batch holds at most {self.settings.max_batch_steps} steps")
        _within_quota("batch_steps", principal.quotas.batch_steps, len(items))
        results: list[StepResult | StepError | None] = [None] * len(items)
        rounds: list[list[int]] = []
        seen: dict[str, int] = defaultdict(int)
        for index, item in enumerate(items):
            position = seen[item.episode_id]
            seen[item.episode_id] += 1
            if position == len(rounds):
                rounds.append([])
            rounds[position].append(index)
        for indices in rounds:
            await self._step_round(items, indices, results, principal)
        return results  # type: ignore[return-value]

    async def _step_round(
        self,
        items: Sequence[BatchStepItem],
        indices: list[int],
        results: list[StepResult | StepError | None],
        principal: Principal,
    ) -> None:
        """Steps of distinct episodes: read all, decide each, write all; replay the rest."""
        loaded = await self.store.load_many([items[i].episode_id for i in indices], cached=True)
        planned: list[PlannedWrite] = []
        replay: list[int] = []
        for index, item in zip(indices, loaded, strict=True):
            request = items[index]
            try:
                episode = _decode(request.episode_id, item, principal)
                message = self._action_message(request.action)
                decision = await self._decide(episode, message, request.turn)
                if decision.updated is None:
                    results[index] = decision.result
                    continue
                assert item is not None
                write = self._step_write(decision, item.version)
            except (EnvCallFailed, PayloadTooLarge) as exc:  # a verdict on the action itself
                results[index] = _item_error(request.episode_id, exc)
                continue
            except WanderError:
                replay.append(index)  # decided on a remembered version: decide on a fresh one
                continue
            except Exception as exc:
                results[index] = _item_error(request.episode_id, exc)
                continue
            planned.append(PlannedWrite(index, write, decision))
        written = await self.store.replace_many([plan.write for plan in planned])
        for plan, ok in zip(planned, written, strict=True):
            if ok:
                results[plan.index] = plan.decision.result
                _count_step(plan.decision)
            else:
                replay.append(plan.index)
        for index in sorted(replay):
            request = items[index]
            try:
                results[index] = await self.step(
                    request.episode_id, request.action, request.turn, principal
                )
            except Exception as exc:
                results[index] = _item_error(request.episode_id, exc)

    async def score(
        self, episode_id: str, *, partial: bool = False, principal: Principal = OPEN
    ) -> dict[str, Any]:
        """The episode's ``Score``: from the archive once the store has let it go."""
        item = await self.store.load(episode_id)
        if item is None and (archived := await self._archived(episode_id, principal)):
            return archived.score.model_dump(mode="json")
        episode = await self._scored(_decode(episode_id, item, principal))
        if not (is_done(episode) or partial):
            raise EpisodeNotDone(
                f"episode {episode_id} is still being played; "
                "pass partial=true for the running score"
            )
        return self._score(episode)

    async def episode(self, episode_id: str, principal: Principal = OPEN) -> dict[str, Any]:
        """The episode's ``EpisodeRecord``, its messages read from the log; from the
        archive once the store has let it go."""
        item = await self.store.load(episode_id, log=True)
        if item is None and (archived := await self._archived(episode_id, principal)):
            return archived.model_dump(mode="json")
        episode = _decode(episode_id, item, principal)
        assert item is not None and item.log is not None
        record = self._record(await self._scored(episode))
        record["messages"] = episode.get("messages") or decode_log(item.log)
        return record

    async def abort(self, episode_id: str, principal: Principal = OPEN) -> None:
        """Mark an active episode aborted; a finished one is left as it is."""
        while True:
            item = await self.store.load(episode_id)
            episode = await self._scored(_decode(episode_id, item, principal))
            if is_done(episode):
                return
            assert item is not None
            stamp = now()
            aborted: StoredEpisode = {
                **episode, "status": "aborted", "updated_at": stamp, "finished_at": stamp
            }  # fmt: skip
            if await self.store.replace(*self._write(aborted, item.version)):
                metrics.for_env(episode["env"]).finished("aborted")
                return

    # Internals

    async def _archived(self, episode_id: str, principal: Principal) -> EpisodeRecord | None:
        """The archived record of ``episode_id``, if ``principal`` may see it."""
        if self.archive is None:
            return None
        return await asyncio.to_thread(self.archive.episode, episode_id, tenant=principal.scope)

    def _write(self, episode: StoredEpisode, version: int, append: Sequence[bytes] = ()) -> Write:
        """The compare-and-set that stores ``episode`` over ``version`` and appends
        ``append`` to its log; a finished episode's record is queued for the archive in
        the same write, the store splicing the log into it."""
        archive: ArchiveRecord | None = None
        if is_done(episode):
            record = self._record(episode)
            if "messages" in episode:  # stored before the log, and finished unstepped
                archive = encode({**record, "messages": episode["messages"]})
            else:
                around = encode(record)
                archive = RecordWithLog(around[:-1] + b',"messages":', b"}")
        return Write(episode["id"], version, encode(episode), archive, append)

    def _step_write(self, decision: Decision, version: int) -> Write:
        """``_write`` for a step, refused (413) when the stored episode or its archive
        record would pass ``max_episode_bytes``, measured on the bytes about to be written
        (the log's counted by the head: ``messages_bytes``).

        Redis refuses a document past 512 MB with an error the client sees as a 503 and
        retries for ever; the archive row would be as large. The verdict is final, also
        when decided on a remembered version: a fresher one holds more, not less.
        """
        episode = decision.updated
        assert episode is not None
        write = self._write(episode, version, decision.append)
        log_bytes = episode["messages_bytes"]
        size = len(write.data) + log_bytes
        if isinstance(archive := write.archive, RecordWithLog):
            size = max(size, len(archive.before) + log_bytes + len(archive.after))
        limit = self.settings.max_episode_bytes
        if size > limit:
            raise PayloadTooLarge(
                f"the step would make the episode {size} bytes, over the limit of {limit} "
                "(WANDER_MAX_EPISODE_BYTES); it was not applied and the episode is unchanged",
                {"episode_bytes": size, "max_episode_bytes": limit},
            )
        return write

    async def _decide(self, episode: StoredEpisode, action: Message, turn: int | None) -> Decision:
        """What a step does to ``episode``, or the error that refuses it."""
        last = episode["last_step"]
        if last is not None and turn == episode["turn"] - 1 and last["action"] == action:
            return Decision(last["result"])
        if is_done(episode):
            raise EpisodeDone(
                f"episode {episode['id']} is {episode['status']}", {"turn": episode["turn"]}
            )
        if turn is not None and turn != episode["turn"]:
            raise TurnMismatch(
                f"the step is for turn {turn}, but the episode is at turn {episode['turn']}",
                {"turn": episode["turn"]},
            )
        env_limit = self.catalog.env(episode["env"]).max_action_bytes
        if env_limit is not None and env_limit < self.settings.max_action_bytes:
            _limit_action(action, env_limit, f" that {episode['env']!r} takes")
        return await self._apply(episode, action)

    def _action_message(self, action: Action) -> Message:
        """The action as a message, within the service's limit (an environment's own
        smaller limit is checked once the episode says which environment it is)."""
        message = _action_message(action)
        _limit_action(message, self.settings.max_action_bytes)
        return message

    async def _scored(self, episode: StoredEpisode) -> StoredEpisode:
        """``episode`` with its score and public state: an episode stored by a version
        that did not keep them (still in Redis during an upgrade) is scored again, in the
        sandbox like any environment call."""
        if "score" in episode:
            return episode
        env = self.catalog.env(episode["env"])
        config = self.catalog.config(env, episode["config"])
        rescored = await self.sandbox.rescore(
            env, config, episode["state"], tenant=episode.get("tenant")
        )
        return {**episode, "score": rescored["score"], "info": rescored["info"]}

    def _record(self, episode: StoredEpisode) -> dict[str, Any]:
        """The episode as an ``EpisodeRecord``: what the archive keeps."""
        record: dict[str, Any] = {field: episode[field] for field in RECORD_FIELDS}  # type: ignore[literal-required]
        record["tenant"] = episode.get("tenant")
        record["done"] = is_done(episode)
        record["score"] = self._score(episode)
        record["state"] = episode["info"]
        return record

    async def _apply(self, episode: StoredEpisode, action: Message) -> Decision:
        """The step's result and the episode after ``action``; nothing is written."""
        env = self.catalog.env(episode["env"])
        config = self.catalog.config(env, episode["config"])
        started = time.perf_counter()
        state, seed = episode["state"], episode["seed"]
        advanced = await self.sandbox.advance(
            env, config, state, action, seed, tenant=episode.get("tenant"), episode=episode["id"]
        )
        metrics.for_env(env.name).step_latency.observe(time.perf_counter() - started)
        score: StoredScore = advanced["score"]
        total, done = score["total"], advanced["done"]
        reward = total - episode["total"]
        turn = episode["turn"] + 1
        result: StepResult = {
            "episode_id": episode["id"],
            "turn": turn,
            "observation": advanced["messages"],
            "reward": reward,
            "done": done,
            "info": advanced["info"],
        }
        # An episode stored before the log holds its messages: they move to the log now.
        append = encode_log([*episode.get("messages", ()), action, *advanced["messages"]])
        stamp = now()
        updated: StoredEpisode = {
            **episode,
            "turn": turn,
            "status": "done" if done else "active",
            "messages_bytes": grown(episode.get("messages_bytes", EMPTY_LOG_BYTES), append),
            "state": advanced["state"],
            "step_rewards": [*episode["step_rewards"], reward],
            "total": total,
            "score": score,
            "info": advanced["info"],
            "last_step": {"action": action, "result": result},
            "updated_at": stamp,
            "finished_at": stamp if done else None,
        }
        updated.pop("messages", None)
        return Decision(result, updated, append, advanced["invalid"])

    def _score(self, episode: StoredEpisode) -> dict[str, Any]:
        """The episode's ``Score``, as its last step stored it: no environment code runs."""
        score = episode["score"]
        weights = self.catalog.env(episode["env"]).reward_weights
        return {
            "episode_id": episode["id"],
            "done": is_done(episode),
            "total": score["total"],
            "components": score["components"],
            # every component's weight: an environment may name its components as it
            # plays (a hosted Verifiers taskset), so those it lists may not be all
            "weights": {**weights, **{name: weights[name] for name in score["components"]}},
            "metrics": score["metrics"],
            "outcome": score["outcome"],
        }


def _count_step(decision: Decision) -> None:
    """Metrics of a step that was written."""
    episode = decision.updated
    assert episode is not None
    counters = metrics.for_env(episode["env"])
    counters.steps.inc()
    if decision.invalid:
        counters.invalid_actions.inc()
    if is_done(episode):
        counters.finished(episode["status"])


def _item_error(episode_id: str, exc: Exception) -> StepError:
    """A batch item's failure, as its own request would have been answered (an
    environment that raised: ``env_error``); a bug of the service fails that item
    alone, never the batch."""
    if isinstance(exc, WanderError):
        error = {"code": exc.code, "message": exc.message, "details": exc.details}
    else:
        log.error("step of episode %s failed", episode_id, exc_info=exc)
        error = {
            "code": ErrorCode.INTERNAL_ERROR, "message": "internal server error", "details": None,
        }  # fmt: skip
    return {"episode_id": episode_id, "error": error}


def _limit_action(message: Message, limit: int, whose: str = "") -> None:
    """413 when ``message`` is over ``limit`` bytes of JSON."""
    content = message.get("content") or ""
    # Content is at most 4 bytes a character: measure exactly only when it may matter.
    may_exceed = 4 * len(content) > limit or "tool_calls" in message
    if may_exceed and len(canonical_json(message)) > limit:
        raise PayloadTooLarge(f"the action exceeds the {limit} bytes{whose}")


def _decode(episode_id: str, item: Versioned | None, principal: Principal) -> StoredEpisode:
    """The stored episode, if ``principal`` may see it: another tenant's episode is not
    found, in the same words as an unknown one, so that ids cannot be probed."""
    episode = None if item is None else decode(item.data)
    scope = principal.scope
    if episode is None or (scope is not None and episode.get("tenant") != scope):
        raise EpisodeNotFound(f"no episode {episode_id!r} (unknown, or expired after idling)")
    return episode


def _within_quota(quota: str, limit: int | None, requested: int) -> None:
    """429 ``quota_exceeded`` when one request asks for more than the key's ``quota``."""
    if limit is not None and requested > limit:
        raise QuotaExceeded(
            f"{requested} is over this key's {quota} quota of {limit}",
            {"quota": quota, "limit": limit, "requested": requested},
        )


def _field_error(field: str, message: str) -> InvalidInput:
    return InvalidInput(message, [{"loc": ["body", field], "msg": message, "type": "value_error"}])


def _action_message(action: Action) -> Message:
    if isinstance(action, str):
        return {"role": "assistant", "content": action}
    return action.model_dump(mode="json")


def _new_id(kind: str) -> str:
    """An unguessable id: 128 random bits."""
    return f"{kind}_{secrets.token_urlsafe(16)}"
