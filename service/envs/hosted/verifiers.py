"""Verifiers 0.4 tasksets (``verifiers.v1``) served as ``vf/<id>``.

The operator names taskset ids in ``WANDER_VERIFIERS`` (comma-separated; ``wander serve
--verifiers``), each resolved as ``vf-eval`` resolves ``[env.taskset] id``: verifiers'
own loaders find the taskset, and the env that plays it (the taskset module's exported
``Env``, else verifiers' single-agent env). The env's ``run()`` runs unchanged, in the
sandbox's workers; Wander plays the model of every seat (``vf_seat.py``):

- create: ``example`` is the task's index in the taskset; the observation is the first
  model call's request (system prompt and first user message);
- step: the action is the model's reply; the observation is what the env says next (the
  messages after the model's last reply in the next model call), until ``run()`` ends;
- tools: a taskset with tool servers (``Task.toolsets`` and ``Taskset.toolsets``: MCP
  servers that Verifiers starts as processes, here for each episode) is a ``tool``
  environment: its tools are published as OpenAI schemas, named as Verifiers'
  harnesses name them (``<server>_<tool>``); a reply's tool calls are made by the seat,
  and their results are the observation. Its workers must be granted processes
  (``WANDER_ENV_PROCESSES``);
- score: one component per reward the traces recorded, worth its score times its weight
  (so the total is Verifiers' reward); each reward's own score and weight are metrics.

``config`` sets the taskset config's own fields (those its ``TasksetConfig`` subclass
declares). Verifiers' shared ones are the operator's, never a request's:
``system_prompt`` names a file to read, and ``task`` plugs functions by import path;
so is a tool server's config (its runtime, its URL).

Wander stores the seed and the replies; any replica rebuilds the episode by running it
again with the recorded replies under the same seeds (``replay.py``).
"""

from __future__ import annotations

import importlib
import itertools
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any, ClassVar

from pydantic import Field, create_model

from wander.extras import install_command
from wander.sdk import (
    EnvConfig,
    Environment,
    EnvironmentUnavailable,
    GeneratedExamples,
    Message,
    Reset,
    Score,
    State,
    Transition,
    TurnRandom,
)
from wander.service.envs.hosted import AnyComponent, Hosted
from wander.service.envs.hosted.replay import (
    LiveRuns,
    Nondeterministic,
    digest,
    seeded_globals,
    turn_seed,
)

VARIABLE = "WANDER_VERIFIERS"
"""Where the operator names the tasksets to serve (the service and its fork server both
read it: it names code, never a secret)."""
PINNED = "WANDER_VERIFIERS_CONFIG"
"""Taskset fields the operator fixes, a JSON object by taskset id (``{"openenv":
{"base_url": "http://..."}}``): a request can no longer set them. Read where
environments load, the workers included: never a secret."""
PREFIX = "vf"
TASKSET_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
SEAT = "wander"
"""The harness id every seat of a hosted episode runs: the top-level package ``wander``
exports ``WanderSeat`` (``vf_seat.py``) to Verifiers' harness loader."""
REWARD_BOUND = 1e9
UNBOUNDED_SIZE = 100
"""The default split size of a taskset whose tasks never end (``Taskset.INFINITE``)."""
MAX_SIZE = 1_000_000
ERROR_CHARS = 300
"""The most of a failed episode's error that its score's metrics keep."""
COUNTED_TASKS = 10_000_000
"""The most tasks counted of a bounded taskset (its split sizes)."""


def parse_ids(value: str) -> list[str]:
    """The taskset ids of ``WANDER_VERIFIERS``; ``ValueError`` naming one that is not."""
    ids = [part.strip() for part in value.split(",") if part.strip()]
    for taskset in ids:
        if TASKSET_ID.match(taskset) is None:
            raise ValueError(f"{taskset!r} is not a Verifiers taskset id")
    if len(set(ids)) != len(ids):
        raise ValueError(f"a taskset is named twice: {', '.join(ids)}")
    return ids


def parse_pinned(value: str) -> dict[str, dict[str, Any]]:
    """``WANDER_VERIFIERS_CONFIG`` as fields by taskset id; ``ValueError`` saying why not."""
    try:
        pinned = json.loads(value or "{}")
    except ValueError as exc:
        raise ValueError(f"{PINNED} is not JSON: {exc}") from None
    if not isinstance(pinned, dict) or not all(isinstance(v, dict) for v in pinned.values()):
        raise ValueError(f"{PINNED} must be a JSON object of objects, one per taskset id")
    return pinned


def environments() -> list[Environment[Any]]:
    """The environments ``WANDER_VERIFIERS`` names (none if it is not set)."""
    ids = parse_ids(os.environ.get(VARIABLE, ""))
    if not ids:
        return []
    pinned = parse_pinned(os.environ.get(PINNED, ""))
    if strays := sorted(pinned.keys() - set(ids)):
        raise EnvironmentUnavailable(f"{PINNED} pins tasksets {VARIABLE} does not name: {strays}")
    try:
        importlib.import_module("verifiers.v1")
    except ImportError:
        raise EnvironmentUnavailable(
            f"{VARIABLE} names Verifiers tasksets, but verifiers is not installed: "
            f"{install_command('verifiers')}"
        ) from None
    return [HostedVerifiers(taskset, pinned.get(taskset, {})) for taskset in ids]


class EnvEndedEarly(RuntimeError):
    """The env's ``run()`` ended before its first model call (it failed, as a rule): a
    Wander episode cannot end at its create, so the create fails (``env_error``; the
    service's log has what Verifiers recorded)."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__(f"the env ended before its first model call: {errors or 'no error'}")


class HostedVerifiersConfig(EnvConfig):
    """Base of a hosted taskset's config; its own fields are added per taskset.

    A task is reached by iterating the taskset up to it (a taskset has no other way in),
    in the worker, under the call's deadline, at every create and replay: the splits of
    an unbounded taskset are its first tasks, ``UNBOUNDED_SIZE`` by default."""

    train_size: int = Field(
        UNBOUNDED_SIZE, ge=1, le=MAX_SIZE,
        description="Examples in `train` of a taskset whose tasks never end (its first "
        "tasks: each example is made by iterating the taskset up to it, so keep it to what "
        "the taskset makes in well under the call deadline). A bounded taskset's are its tasks.",
    )  # fmt: skip
    eval_size: int = Field(
        UNBOUNDED_SIZE, ge=1, le=MAX_SIZE,
        description="Examples in `eval` of a taskset whose tasks never end (as `train_size`).",
    )  # fmt: skip


LIVE: LiveRuns[Any] = LiveRuns()
"""Live episodes of this process, each paused at the model call after the replies its
key names (a kept worker's: ``pool.py``)."""


class HostedVerifiers(Hosted[HostedVerifiersConfig]):
    """One Verifiers taskset, with the env that plays it, as a Wander environment whose
    state is its episode's seed, replies and observation digests."""

    version: ClassVar[str] = "1"
    kind: ClassVar = "multi_turn"
    reward_weights: ClassVar[Mapping[str, float]] = AnyComponent()
    component_range: ClassVar[tuple[float, float]] = (-REWARD_BOUND, REWARD_BOUND)

    def __init__(self, taskset: str, pinned: Mapping[str, Any] | None = None) -> None:
        import verifiers.v1 as vf  # pyright: ignore[reportMissingImports] (verifiers extra)

        try:
            self._taskset_config: type[Any] = vf.taskset_config_type(taskset)
            vf.env_config_type(taskset)  # the env that plays it resolves too
            # The seat's class, as Verifiers' loader finds it: loaded here, where the fork
            # server loads environments, its imports are every worker's (~45 ms each).
            vf.harness_config_type(SEAT)
            with seeded_globals(0):  # NumPy's generators, imported where numpy is
                pass
        except (ImportError, TypeError, AttributeError, ValueError) as exc:
            raise EnvironmentUnavailable(
                f"{VARIABLE} names {taskset!r}, which Verifiers cannot load here: {exc}"
            ) from None
        self.taskset = taskset
        self.name = f"{PREFIX}/{taskset}"  # type: ignore[misc]
        self._pinned = dict(pinned or {})
        shared = set(vf.TasksetConfig.model_fields)
        if strays := sorted(self._pinned.keys() - self._taskset_config.model_fields.keys()):
            raise EnvironmentUnavailable(f"{PINNED} pins fields {taskset!r} lacks: {strays}")
        # The taskset's own fields; one that Wander's config has too (``seed``) is the
        # taskset's, and means what the taskset says. A tool server's config (where it
        # runs, its URL) is the operator's, as ``task`` is.
        own = {
            name: (field.annotation, field)
            for name, field in self._taskset_config.model_fields.items()
            if name not in shared and name not in self._pinned
            and not _is_toolset_config(field.annotation)
        }  # fmt: skip
        self.Config = create_model(  # type: ignore[misc]
            f"{_camel(taskset)}Config", __base__=HostedVerifiersConfig, **own
        )
        self._own = tuple(own)
        try:
            tools = _tool_schemas(taskset, json.dumps(self._pinned, sort_keys=True))
        except (ImportError, TypeError, AttributeError, ValueError) as exc:
            raise EnvironmentUnavailable(
                f"{VARIABLE} names {taskset!r}, whose tools Verifiers cannot list here: {exc}"
            ) from None
        self.tools = tools or None  # type: ignore[misc]
        if self.tools:
            self.kind = "tool"  # type: ignore[misc]
            self.starts_processes = True
        self.description = (  # type: ignore[misc]
            f"Verifiers' {taskset} taskset, hosted: a task per example, the model's replies "
            "as steps; the reward is Verifiers' (a component per reward, weighted)."
        )

    def examples(self, config: HostedVerifiersConfig, split: str) -> Sequence[int]:
        size = self._size(config)
        if size is None:
            size = config.train_size if split == "train" else config.eval_size
        return GeneratedExamples(size, lambda index: index)

    def reset(self, config: HostedVerifiersConfig, example: int, seed: int) -> Reset:
        run = self._run(config, example)
        try:
            with seeded_globals(turn_seed(seed, -1, [])):
                asked = run.advance()
            if asked is None:  # an episode is not over before it began: its env failed
                raise EnvEndedEarly(_outcome(run.episode)["errors"])
        except BaseException:
            run.close()
            raise
        state: dict[str, Any] = {"seed": seed, "example": example, "actions": [], "invalid": 0}
        # Kept live for the first step where the create's worker is kept (an episode
        # created alone); a group's create worker is not, and the run goes with it.
        key = LIVE.key(self.name, config.model_dump(), example, seed)
        LIVE.keep(LIVE.key(key, []), run)
        return Reset(*self._after(state, run, asked))

    def step(
        self, config: HostedVerifiersConfig, state: State, action: Message, rng: TurnRandom
    ) -> Transition:
        reply_message = self._reply(action)
        if reply_message is None:
            invalid = {**state, "invalid": state["invalid"] + 1}
            reply = "Not a reply: a hosted Verifiers taskset takes the model's text" + (
                ", or its tool calls." if self.tools else "."
            )
            return Transition(invalid, [{"role": "user", "content": reply}], False, True)
        actions = [*state["actions"], reply_message]
        key = LIVE.key(self.name, config.model_dump(), state["example"], state["seed"])
        run = LIVE.take(LIVE.key(key, state["actions"])) or self._replayed(config, state)
        with seeded_globals(turn_seed(state["seed"], len(actions) - 1, actions)):
            asked = run.advance(reply_message)
        new, messages = self._after({**state, "actions": actions}, run, asked)
        if new["done"]:
            run.close()
        else:
            LIVE.keep(LIVE.key(key, actions), run)
        return Transition(new, messages, new["done"])

    def score(self, config: HostedVerifiersConfig, state: State) -> Score:
        rewards: dict[str, list[float]] = state.get("rewards", {})
        components = {name: _bounded(score * weight) for name, (score, weight) in rewards.items()}
        metrics: dict[str, Any] = {
            "turns": len(state["actions"]),
            "invalid_actions": state["invalid"],
            **{f"{name}.score": score for name, (score, _) in rewards.items()},
            **{f"{name}.weight": weight for name, (_, weight) in rewards.items()},
            **state.get("metrics", {}),
        }
        if state.get("errors"):
            metrics["errors"] = state["errors"]
        return Score(components, metrics, "failed" if state.get("errors") else None)

    def public_state(self, state: State) -> dict[str, Any]:
        return {"turns": len(state["actions"]), "done": state["done"]}

    def _reply(self, action: Message) -> dict[str, Any] | None:
        """The model's reply as the seat hands it on (an assistant message on the wire),
        or None for an action that is not one: no text, or tool calls where there are no
        tools."""
        content, calls = action.get("content"), action.get("tool_calls") or []
        if calls and not self.tools:
            return None
        if not calls:
            return {"role": "assistant", "content": content} if isinstance(content, str) else None
        wired = [
            {"id": call.get("id", ""), "type": "function",
             "function": {"name": call["function"]["name"],
                          "arguments": call["function"].get("arguments") or "{}"}}
            for call in calls
        ]  # fmt: skip
        return {"role": "assistant", "content": content or None, "tool_calls": wired}

    def _after(
        self, state: dict[str, Any], run: Any, asked: list[dict[str, Any]] | None
    ) -> tuple[dict[str, Any], list[Message]]:
        """The state and observation once ``run`` paused at the model call ``asked``
        (the env's next messages) or ended (None: its traces' rewards)."""
        observed = [*state.get("observed", []), digest(asked)]
        if asked is not None:
            return {**state, "observed": observed, "done": False}, _since_reply(asked)
        return {**state, "observed": observed, "done": True, **_outcome(run.episode)}, []

    def _run(self, config: HostedVerifiersConfig, example: int) -> Any:
        from wander.service.envs.hosted.vf_seat import Run

        env = _env(self.taskset, self._settings(config))
        task = next(itertools.islice(iter(env.taskset), example, None), None)
        if task is None:
            raise ValueError(f"the taskset has no task {example}")
        return Run(env, task, tools=bool(self.tools))

    def _replayed(self, config: HostedVerifiersConfig, state: State) -> Any:
        """The episode at its pending model call, rebuilt by running it again with the
        recorded replies (``Nondeterministic`` where it asks differently)."""
        seed, actions, observed = state["seed"], state["actions"], state["observed"]
        run = self._run(config, state["example"])
        try:
            with seeded_globals(turn_seed(seed, -1, [])):
                asked = run.advance()
            for turn, action in enumerate(actions):
                if digest(asked) != observed[turn]:
                    raise Nondeterministic(turn)
                with seeded_globals(turn_seed(seed, turn, actions)):
                    asked = run.advance(action)
            if asked is None or digest(asked) != observed[len(actions)]:
                raise Nondeterministic(len(actions))
        except BaseException:
            run.close()
            raise
        return run

    def _settings(self, config: HostedVerifiersConfig) -> str:
        """The taskset's fields: those ``config`` sets and those the operator pinned, as
        canonical JSON."""
        own = config.model_dump(mode="json", include=set(self._own))
        return json.dumps({**own, **self._pinned}, sort_keys=True)

    def _size(self, config: HostedVerifiersConfig) -> int | None:
        """The number of tasks of a bounded taskset, None for an unbounded one."""
        return _size(self.taskset, self._settings(config))


@lru_cache(maxsize=8)
def _env(taskset: str, settings: str) -> Any:
    """The Verifiers env of ``taskset`` with ``settings``, every seat played by Wander."""
    import verifiers.v1 as vf  # pyright: ignore[reportMissingImports] (verifiers extra)

    seat = {"harness": {"id": SEAT}, "runtime": {"type": "subprocess"}}
    roles = vf.env_config_type(taskset).model_fields
    config = {
        "taskset": {**json.loads(settings), "id": taskset},
        **{name: seat for name, field in roles.items() if _is_seat(field.annotation)},
    }
    return vf.load_environment(vf.resolve_env_config(config))


@lru_cache(maxsize=32)
def _size(taskset: str, settings: str) -> int | None:
    import verifiers.v1 as vf  # pyright: ignore[reportMissingImports] (verifiers extra)

    config = vf.taskset_config_type(taskset).model_validate({**json.loads(settings), "id": taskset})
    tasks = vf.load_taskset(config)
    if not tasks.bounded:
        return None
    return sum(1 for _ in itertools.islice(iter(tasks), COUNTED_TASKS))


@lru_cache(maxsize=8)
def _tool_schemas(taskset: str, pinned: str) -> list[dict[str, Any]]:
    """The tools of the taskset's tool servers (shared, ``Taskset.toolsets``, and
    task-scoped, ``Task.toolsets``), as the seat offers them to the model: each server's
    tools as its MCP server lists them (``Toolset.register`` on MCP's own
    ``ToolManager``, the part of an MCP server that holds its tools: no server made, no
    process started), named ``<server>_<tool>`` as Verifiers' harnesses do. From the
    fields the operator pinned (the task config is never a request's)."""
    import verifiers.v1 as vf  # pyright: ignore[reportMissingImports] (verifiers extra)
    from mcp.server.mcpserver.tools import ToolManager  # pyright: ignore[reportMissingImports]

    config = vf.taskset_config_type(taskset).model_validate({**json.loads(pinned), "id": taskset})
    taskset_type = type(vf.load_taskset(config))
    toolsets = [*taskset_type.toolsets(config), *taskset_type.task_type().toolsets(config.task)]
    schemas: list[dict[str, Any]] = []
    for toolset in toolsets:
        tools = ToolManager()
        toolset.register(tools)
        prefix = f"{toolset.server_name}_" if toolset.server_name else ""
        for tool in tools.list_tools():
            function = {"name": f"{prefix}{tool.name}", "description": tool.description or "",
                        "parameters": tool.parameters}  # fmt: skip
            schemas.append({"type": "function", "function": function})
    return schemas


def _is_toolset_config(annotation: Any) -> bool:
    import verifiers.v1 as vf  # pyright: ignore[reportMissingImports] (verifiers extra)

    kinds = (vf.ToolsetConfig, vf.SharedToolsetConfig)
    return isinstance(annotation, type) and issubclass(annotation, kinds)


def _is_seat(annotation: Any) -> bool:
    import verifiers.v1 as vf  # pyright: ignore[reportMissingImports] (verifiers extra)

    return isinstance(annotation, type) and issubclass(annotation, vf.AgentConfig)


def _since_reply(messages: list[dict[str, Any]]) -> list[Message]:
    """The messages after the model's last reply: what the env said since."""
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    return [_message(m) for m in messages[last + 1 :]]


def _message(message: dict[str, Any]) -> Message:
    content = message.get("content")
    if isinstance(content, list):  # content parts: their text
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    said: Message = {"role": message.get("role", "user"), "content": content or ""}
    if said["role"] == "tool":
        said["tool_call_id"] = str(message.get("tool_call_id") or "")
    return said


def _outcome(episode: Any) -> dict[str, Any]:
    """The rewards (score, weight) and numeric metrics of a finished episode: the mean
    over its trainable traces, as Verifiers reports an episode."""
    traces = [t for t in episode.traces if t.agent is None or t.agent.trainable] or list(
        episode.traces
    )
    rewards: dict[str, list[float]] = {}
    metrics: dict[str, float] = {}
    for name in sorted({name for trace in traces for name in trace.rewards}):
        found = [trace.rewards.get(name) for trace in traces]
        scores = [r.score if r is not None else 0.0 for r in found]
        weight = next((r.weight for r in found if r is not None), 1.0)
        rewards[name] = [_bounded(math.fsum(scores) / len(traces)), weight]
    for name in sorted({name for trace in traces for name in trace.metrics}):
        values = [trace.metrics.get(name) for trace in traces]
        numbers = [float(v) for v in values if isinstance(v, int | float)]
        if numbers:
            metrics[f"vf.{name}"] = _bounded(math.fsum(numbers) / len(numbers))
    errors = [_said(error) for error in episode.errors] + [
        _said(trace.errors[-1]) for trace in traces if not trace.ok and trace.errors
    ]
    return {"rewards": rewards, "metrics": metrics, "errors": errors}


def _said(error: Any) -> str:
    """A Verifiers error as the score's metrics say it (its type, and its message's start)."""
    return f"{error.type}: {error.message}"[:ERROR_CHARS]


def _bounded(value: float) -> float:
    return min(max(value, -REWARD_BOUND), REWARD_BOUND) if math.isfinite(value) else 0.0


def _camel(taskset: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", taskset)) or "Taskset"
