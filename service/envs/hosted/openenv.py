"""OpenEnv environments (``openenv.core.env_server.Environment`` subclasses) served as
``openenv/<name>``.

The operator names them in ``WANDER_OPENENV`` (``name=module:Class``, comma-separated;
``wander serve --openenv``): the class is OpenEnv's server-side environment, with its own
Action and Observation models, run in the sandbox's workers like any environment. An
episode is OpenEnv's ``reset`` then one ``step`` per action; Wander stores the seed and
the actions, and any replica continues the episode by replaying them (``replay.py``).

What crosses the chat:

- an observation is a user message whose content is the JSON of its fields, as OpenEnv's
  own server sends them (``serialize_observation``: without ``reward`` and ``done``);
- an action is the assistant's content: a JSON object validated by the Action model
  (``deserialize_action``, as OpenEnv's server does), or, for an Action with one text
  field, that text. An action the model does not accept is invalid: the environment is
  not stepped, and the reply says what was wrong;
- the reward is the sum of the observations' rewards (component ``reward``), so each
  step's reward is the one OpenEnv gave; the episode ends when an observation is done.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, NamedTuple, get_type_hints

from pydantic import BaseModel, ValidationError

from wander.extras import install_command
from wander.sdk import (
    Environment,
    EnvironmentUnavailable,
    GeneratedExamples,
    Message,
    Reset,
    Score,
    SizedConfig,
    State,
    Transition,
    TurnRandom,
)
from wander.service.envs.hosted import Hosted
from wander.service.envs.hosted.replay import (
    LiveRuns,
    Nondeterministic,
    digest,
    seeded_globals,
    turn_seed,
)

VARIABLE = "WANDER_OPENENV"
"""Where the operator names the OpenEnv environments to serve (the service and its fork
server both read it: it names code, never a secret)."""
PREFIX = "openenv"
SPEC = re.compile(r"^(?P<name>[a-z0-9][a-z0-9_-]{0,63})=(?P<module>[\w.]+):(?P<cls>\w+)$")
REWARD_BOUND = 1e9
"""The largest reward (in absolute value) a hosted OpenEnv episode may sum to: OpenEnv
sets no range, and the service still refuses what no environment means (inf, 1e300)."""


class Spec(NamedTuple):
    name: str
    module: str
    cls: str


def parse_specs(value: str) -> list[Spec]:
    """``name=module:Class,...`` as specs; ``ValueError`` naming the item that is not one."""
    specs = []
    for item in filter(None, (part.strip() for part in value.split(","))):
        found = SPEC.match(item)
        if found is None:
            raise ValueError(
                f"{item!r} is not name=module:Class (a name of lower-case letters, digits, "
                "'-' and '_', then the import path of an OpenEnv Environment class)"
            )
        specs.append(Spec(found["name"], found["module"], found["cls"]))
    names = [spec.name for spec in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"a name is given twice: {', '.join(names)}")
    return specs


def environments() -> list[Environment[Any]]:
    """The environments ``WANDER_OPENENV`` names (none if it is not set)."""
    specs = parse_specs(os.environ.get(VARIABLE, ""))
    if not specs:
        return []
    try:
        from openenv.core.env_server import (  # pyright: ignore[reportMissingImports] (openenv extra)
            Environment as OpenEnvEnvironment,
        )
    except ImportError:
        raise EnvironmentUnavailable(
            f"{VARIABLE} names OpenEnv environments, but the openenv package is not "
            f"installed: {install_command('openenv')}"
        ) from None
    hosted: list[Environment[Any]] = []
    for spec in specs:
        try:
            module = importlib.import_module(spec.module)
        except ImportError as exc:
            raise EnvironmentUnavailable(
                f"{VARIABLE} names {spec.module}:{spec.cls}, which cannot be imported here "
                f"({exc}): is its folder on PYTHONPATH?"
            ) from None
        cls = getattr(module, spec.cls, None)
        if not (isinstance(cls, type) and issubclass(cls, OpenEnvEnvironment)):
            raise EnvironmentUnavailable(
                f"{spec.module}:{spec.cls} is not an OpenEnv Environment subclass"
            )
        hosted.append(HostedOpenEnv(spec.name, cls))
    return hosted


class HostedOpenEnvConfig(SizedConfig):
    """Examples are seeds: OpenEnv environments have no dataset, each reset is the game."""


LIVE: LiveRuns[Any] = LiveRuns()
"""Live OpenEnv environments of this process, each at the end of the actions its key
names (a kept worker's: ``pool.py``)."""


class HostedOpenEnv(Hosted[HostedOpenEnvConfig]):
    """One OpenEnv environment class, as a Wander environment whose state is its episode's
    seed, actions and observation digests."""

    version: ClassVar[str] = "1"
    kind: ClassVar = "multi_turn"
    Config: ClassVar = HostedOpenEnvConfig
    reward_weights: ClassVar[Mapping[str, float]] = {"reward": 1.0}
    component_range: ClassVar[tuple[float, float]] = (-REWARD_BOUND, REWARD_BOUND)

    def __init__(self, name: str, cls: type) -> None:
        from openenv.core.env_server import (  # pyright: ignore[reportMissingImports] (openenv extra)
            deserialize_action,
            serialize_observation,
        )

        self.name = f"{PREFIX}/{name}"  # type: ignore[misc]
        self.cls = cls
        self.action_type: type[BaseModel] = get_type_hints(cls.step)["action"]
        self.description = (  # type: ignore[misc]
            f"OpenEnv's {cls.__module__}.{cls.__qualname__}, hosted: one step per action "
            f"({self.action_type.__name__} as JSON); the reward is the sum of OpenEnv's."
        )
        self._deserialize, self._serialize = deserialize_action, serialize_observation
        self._text_field = _only_text_field(self.action_type)

    def examples(self, config: HostedOpenEnvConfig, split: str) -> Sequence[int]:
        return GeneratedExamples(config.split_size(split), lambda index: index)

    def reset(self, config: HostedOpenEnvConfig, example: int, seed: int) -> Reset:
        # Kept live for the first step where the create's worker is kept (an episode
        # created alone); a group's create worker is not, and this goes with it.
        env, observed = self._opened(seed)
        LIVE.keep(LIVE.key(self.name, config.model_dump(), seed, []), env)
        state = {
            "seed": seed,
            "actions": [],
            "observed": [digest(observed)],
            "rewards": [_reward(observed)],
            "done": bool(observed["done"]),
            "invalid": 0,
        }
        return Reset(state, [_message(observed)])

    def step(
        self, config: HostedOpenEnvConfig, state: State, action: Message, rng: TurnRandom
    ) -> Transition:
        parsed = self._action(action.get("content"))
        if isinstance(parsed, str):
            invalid = {**state, "invalid": state["invalid"] + 1}
            return Transition(invalid, [{"role": "user", "content": parsed}], False, True)
        actions: list[Any] = [*state["actions"], parsed.model_dump(mode="json")]
        env = self._live(config, state)
        with seeded_globals(turn_seed(state["seed"], len(actions) - 1, actions)):
            observed = self._serialize(env.step(parsed))
        LIVE.keep(LIVE.key(self.name, config.model_dump(), state["seed"], actions), env)
        new = {
            **state,
            "actions": actions,
            "observed": [*state["observed"], digest(observed)],
            "rewards": [*state["rewards"], _reward(observed)],
            "done": bool(observed["done"]),
        }
        return Transition(new, [_message(observed)], new["done"])

    def score(self, config: HostedOpenEnvConfig, state: State) -> Score:
        total = math.fsum(state["rewards"])
        metrics = {"steps": len(state["actions"]), "invalid_actions": state["invalid"]}
        return Score({"reward": total}, metrics)

    def public_state(self, state: State) -> dict[str, Any]:
        return {
            "steps": len(state["actions"]),
            "invalid_actions": state["invalid"],
            "done": state["done"],
        }

    def _action(self, content: Any) -> BaseModel | str:
        """The Action the content is, or what is wrong with it (for the model to read)."""
        text = content if isinstance(content, str) else ""
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
            data = None
        if not isinstance(data, dict):
            if self._text_field is None:
                return f"Not an action: reply with a JSON object of {self._fields()}."
            data = {self._text_field: text}
        try:
            action: BaseModel = self._deserialize(data, self.action_type)
        except (ValidationError, TypeError, ValueError) as exc:
            return f"Not an action of {self._fields()}: {_errors(exc)}"
        return action

    def _opened(self, seed: int) -> tuple[Any, dict[str, Any]]:
        """A fresh environment reset for the episode of ``seed``, and what it observed."""
        env = self.cls()
        with seeded_globals(turn_seed(seed, -1, [])):
            observed = self._serialize(env.reset(seed=seed & 0xFFFF_FFFF, episode_id=_id(seed)))
        return env, observed

    def _fields(self) -> str:
        fields = [name for name in self.action_type.model_fields if name != "metadata"]
        return f"{self.action_type.__name__} ({', '.join(fields) or 'no fields'})"

    def _live(self, config: HostedOpenEnvConfig, state: State) -> Any:
        """The environment at the end of ``state``'s actions: kept live here, or replayed
        from a fresh one (``Nondeterministic`` where it answers differently)."""
        key = LIVE.key(self.name, config.model_dump(), state["seed"], state["actions"])
        env = LIVE.take(key)
        if env is not None:
            return env
        seed, actions, observed = state["seed"], state["actions"], state["observed"]
        env, first = self._opened(seed)
        if digest(first) != observed[0]:
            raise Nondeterministic(0)
        for turn, action in enumerate(actions):
            with seeded_globals(turn_seed(seed, turn, actions)):
                replayed = self._serialize(env.step(self._deserialize(action, self.action_type)))
            if digest(replayed) != observed[turn + 1]:
                raise Nondeterministic(turn + 1)
        return env


def _only_text_field(model: type[BaseModel]) -> str | None:
    """The one field of ``model`` (besides OpenEnv's ``metadata``) when it takes text."""
    fields = {name: f for name, f in model.model_fields.items() if name != "metadata"}
    if len(fields) != 1:
        return None
    name, field = next(iter(fields.items()))
    return name if field.annotation is str else None


def _errors(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(
            f"{'.'.join(map(str, error['loc'])) or 'action'}: {error['msg']}"
            for error in exc.errors(include_url=False, include_input=False)
        )
    return type(exc).__name__


def _id(seed: int) -> str:
    """The OpenEnv episode id of the episode of ``seed``: the same on every replay."""
    return f"wander-{seed:016x}"


def _reward(observed: dict[str, Any]) -> float:
    reward = observed.get("reward")
    return 0.0 if reward is None else float(reward)


def _message(observed: dict[str, Any]) -> Message:
    return {"role": "user", "content": json.dumps(observed["observation"], sort_keys=True)}
