"""Every dataset of the ``reasoning-gym`` package as a single-turn environment ``rg/<name>``.

Questions come from the dataset's own generator, seeded by the split and
``config.seed`` (so example i is the same everywhere), and answers are scored
by the dataset's own ``score_answer``, except where that evaluates the answer as code:
those datasets are scored by Wander's own parsers (``rg_scoring``), which give the same
scores without running a character of the answer. Generator options pass through in
``config.options``, each within its bound (``rg_bounds``). Needs the ``rg`` extra:
the ``rg`` extra.
"""

from __future__ import annotations

import copy
import json
import logging
import math
from functools import lru_cache
from typing import Any, cast

from pydantic import Field, create_model, model_validator
from pydantic_core import PydanticCustomError

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
    canonical_json,
    last_tagged,
    stable_hash,
)
from wander.service.envs.guard import own_code, reportable
from wander.service.envs.rg_bounds import Bound, option_bounds

log = logging.getLogger(__name__)

SYSTEM_PROMPT = (
    "Solve the task. You may reason inside <think>...</think>; then give your final "
    "answer, exactly in the form the task asks for, inside <answer>...</answer>."
)
SPLITS_BUILT_WHOLE = {"acre": 10_000}
"""Datasets whose generator builds every question of its split when it is created,
rather than one question when asked, and the largest split each may have, within
the deadline of one environment call. The others cost
nothing per example until it is played."""


class RGConfig(SizedConfig):
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="Options of the dataset's generator (fields of its reasoning-gym config).",
    )


@lru_cache(maxsize=128)
def _dataset(name: str, seed: int, size: int, options: str) -> Any:
    """The generator of one dataset, split and config (items are made on demand)."""
    import reasoning_gym

    return reasoning_gym.create_dataset(name, seed=seed, size=size, **json.loads(options))


@lru_cache(maxsize=1024)
def _item(name: str, seed: int, size: int, options: str, index: int) -> dict[str, Any]:
    item: dict[str, Any] = _dataset(name, seed, size, options)[index]
    return item


class ReasoningGymEnv(Environment[RGConfig]):
    """One reasoning-gym dataset (``environments()`` makes one per dataset)."""

    version = "1.0.0"
    kind = "single_turn"
    reward_weights = {"correct": 1.0, "format": 0.1}

    def __init__(self, dataset: str, config_class: type, curriculum: Any | None = None) -> None:
        self.dataset = dataset
        self.name = f"rg/{dataset}"  # type: ignore[misc]
        self.description = f"reasoning-gym's {dataset} dataset: one question, its own scoring."  # type: ignore[misc]
        bounds = option_bounds(config_class, curriculum)
        self.Config = _config_model(dataset, config_class, bounds)  # type: ignore[misc]

    def examples(self, config: RGConfig, split: str) -> GeneratedExamples[dict[str, Any]]:
        """References ``{"split", "index"}``: nothing is generated until an episode is played."""
        size = config.split_size(split)
        return GeneratedExamples(size, lambda i: {"split": split, "index": i})

    def generator(self, config: RGConfig, split: str) -> Any:
        """The reasoning-gym dataset behind ``split`` (its own code, which may run
        programs of its own making: ``codeio``)."""
        with own_code():
            return _dataset(*self._split_key(config, split))

    def entry(self, config: RGConfig, split: str, index: int) -> dict[str, Any]:
        """The dataset's item: ``{"question", "answer", "metadata"}``, made once per
        process (a score makes it again, and some take seconds: ``futoshiki``); a copy,
        which the caller may change."""
        with own_code():
            item: dict[str, Any] = _item(*self._split_key(config, split), index)
        return copy.deepcopy(item)

    def _split_key(self, config: RGConfig, split: str) -> tuple[str, int, int, str]:
        """What makes the dataset of ``split``: name, seed, size and options."""
        seed = stable_hash("rg", self.dataset, split, config.seed) % 2**32  # some need 32 bits
        return self.dataset, seed, config.split_size(split), canonical_json(config.options).decode()

    def reset(self, config: RGConfig, example: dict[str, Any], seed: int) -> Reset:
        question = self.entry(config, example["split"], example["index"])["question"]
        state: State = {**example, "question": question, "answer": None}
        messages = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": question},
        ]
        return Reset(state, messages)

    def step(self, config: RGConfig, state: State, action: Message, rng: TurnRandom) -> Transition:
        found = last_tagged(action.get("content"), "answer")
        return Transition({**state, "answer": (found or "").strip()}, [], True)

    def score(self, config: RGConfig, state: State) -> Score:
        if state["answer"] is None:
            return Score({"correct": 0.0, "format": 0.0}, {"dataset": self.dataset})
        correct, failure = self.judge(config, state)
        components = {"correct": correct, "format": 1.0 if state["answer"] else 0.0}
        metrics: dict[str, Any] = {"dataset": self.dataset}
        if failure is not None:
            metrics["scorer_error"] = failure
        return Score(components, metrics)

    def judge(self, config: RGConfig, state: State) -> tuple[float, str | None]:
        """The dataset's score of the answer, and the name of the exception its scorer
        raised, if it did. An answer the scorer cannot read (``nan`` to an integer
        parser, parentheses nested past the recursion limit) is a wrong answer, scored
        0, not a failed step: the trainer gets its reward. Wander's own scorer where the
        dataset's would evaluate the answer."""
        generator = self.generator(config, state["split"])
        item = self.entry(config, state["split"], state["index"])
        answer = state["answer"] or None
        scorer = _scorers().get(self.dataset)
        try:
            if scorer is None:
                correct = float(generator.score_answer(answer, item))
            else:
                correct = float(scorer(generator, answer, item))
        except MemoryError:
            raise  # the worker retires after one: its heap may be in any state
        except Exception as exc:  # RecursionError included
            return 0.0, reportable(type(exc).__name__)
        if not math.isfinite(correct):
            return 0.0, "NonFiniteScore"
        return correct, None

    def public_state(self, state: State) -> dict[str, Any]:
        return {"question": state["question"], "answered": state["answer"] is not None}


def _config_model(dataset: str, config_class: type, bounds: dict[str, Bound]) -> type[RGConfig]:
    """The env's config: each of ``options`` within its bound, then checked by the
    dataset's own config class; the bounds are published in the JSON schema."""
    known = list(bounds)

    def check(config: RGConfig) -> RGConfig:
        unknown = sorted(set(config.options) - set(known))
        if unknown:
            raise ValueError(f"unknown options {unknown} for {dataset}; it has {known}")
        for name, value in config.options.items():
            if not bounds[name].admits(value):
                raise PydanticCustomError(
                    "option_out_of_bounds",
                    "option {option} of {dataset} must be {bound}",
                    {"option": name, "dataset": dataset, "bound": bounds[name].describe()},
                )
        try:
            _validate(config_class, config.options)
        except Exception as exc:  # reasoning-gym's checks raise assertions, and worse
            raise ValueError(f"invalid options for {dataset}: {exc}") from None
        return config

    schema = {name: bound.schema() for name, bound in bounds.items()}
    options = Field(
        default_factory=dict,
        description=RGConfig.model_fields["options"].description,
        json_schema_extra={"properties": schema, "additionalProperties": False},
    )
    fields: dict[str, Any] = {"options": (dict[str, Any], options)}
    most = SPLITS_BUILT_WHOLE.get(dataset)
    if most is not None:
        for split in ("train_size", "eval_size"):
            inherited = RGConfig.model_fields[split]
            default, why = min(inherited.default, most), inherited.description
            fields[split] = (int, Field(default, ge=1, le=most, description=why))
    validators = {"_check_options": model_validator(mode="after")(check)}
    model = create_model(
        f"RG_{dataset}_Config", __base__=RGConfig, __validators__=validators, **fields
    )
    return cast(type[RGConfig], model)


def _validate(config_class: type, options: dict[str, Any]) -> None:
    """Build the dataset's config; raises if reasoning-gym finds the options invalid."""
    config = config_class(**options, seed=0, size=1)
    if hasattr(config, "validate"):
        config.validate()


def _scorers() -> dict[str, Any]:
    """Wander's own scorers of the datasets whose scorer evaluates text (``rg_scoring``),
    imported once reasoning-gym is known to be here: they need its numpy and sympy, and
    an install without them must hear that reasoning-gym is missing, not numpy."""
    from wander.service.envs.rg_scoring import SCORERS

    return SCORERS


def environments() -> list[ReasoningGymEnv]:
    """One environment per reasoning-gym dataset (the package is an optional extra)."""
    try:
        from reasoning_gym.factory import CURRICULA, DATASETS
    except ImportError:
        raise EnvironmentUnavailable(
            f"needs the reasoning-gym package, which is not installed: {install_command('rg')}"
        ) from None
    _scorers()  # imported here, in the fork server too, before any call
    envs = []
    for name, (_, config_class) in sorted(DATASETS.items()):
        try:
            _validate(config_class, {})
        except (AssertionError, TypeError, ValueError) as exc:
            log.info("rg/%s left out: it has no usable default config (%s)", name, exc)
            continue
        curriculum = CURRICULA[name]() if name in CURRICULA else None
        envs.append(ReasoningGymEnv(name, config_class, curriculum))
    return envs
