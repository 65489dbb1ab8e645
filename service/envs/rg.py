"""Every dataset of the ``reasoning-gym`` package as a single-turn environment ``rg/<name>``.

Questions come from the dataset's own generator, seeded by the split and
``config.seed`` (so example i is the same everywhere), and answers are scored
by the dataset's own ``score_answer``. Generator options pass through in
``config.options``. Needs the ``rg`` extra: ``pip install 'wander-rl[rg]'``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from functools import lru_cache
from typing import Any

from pydantic import Field, model_validator

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
    stable_hash,
)

log = logging.getLogger(__name__)

SYSTEM_PROMPT = (
    "Solve the task. You may reason inside <think>...</think>; then give your final "
    "answer, exactly in the form the task asks for, inside <answer>...</answer>."
)
ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


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


class ReasoningGymEnv(Environment[RGConfig]):
    """One reasoning-gym dataset (``environments()`` makes one per dataset)."""

    version = "1.0.0"
    kind = "single_turn"
    reward_weights = {"correct": 1.0, "format": 0.1}

    def __init__(self, dataset: str, config_class: type) -> None:
        self.dataset = dataset
        self.name = f"rg/{dataset}"  # type: ignore[misc]
        self.description = f"reasoning-gym's {dataset} dataset: one question, its own scoring."  # type: ignore[misc]
        self.Config = _config_model(dataset, config_class)  # type: ignore[misc]

    def examples(self, config: RGConfig, split: str) -> GeneratedExamples[dict[str, Any]]:
        """References ``{"split", "index"}``: nothing is generated until an episode is played."""
        size = config.split_size(split)
        return GeneratedExamples(size, lambda i: {"split": split, "index": i})

    def generator(self, config: RGConfig, split: str) -> Any:
        """The reasoning-gym dataset behind ``split``."""
        size = config.split_size(split)
        seed = stable_hash("rg", self.dataset, split, config.seed) % 2**32  # some need 32 bits
        return _dataset(self.dataset, seed, size, canonical_json(config.options).decode())

    def entry(self, config: RGConfig, split: str, index: int) -> dict[str, Any]:
        """The dataset's item: ``{"question", "answer", "metadata"}``."""
        item: dict[str, Any] = self.generator(config, split)[index]
        return item

    def reset(self, config: RGConfig, example: dict[str, Any], seed: int) -> Reset:
        question = self.entry(config, example["split"], example["index"])["question"]
        state: State = {**example, "question": question, "answer": None}
        messages = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": question},
        ]
        return Reset(state, messages)

    def step(self, config: RGConfig, state: State, action: Message, rng: TurnRandom) -> Transition:
        found = ANSWER.findall(action.get("content") or "")
        return Transition({**state, "answer": found[-1].strip() if found else ""}, [], True)

    def score(self, config: RGConfig, state: State) -> Score:
        if state["answer"] is None:
            return Score({"correct": 0.0, "format": 0.0}, {"dataset": self.dataset})
        generator = self.generator(config, state["split"])
        item = generator[state["index"]]
        correct = float(generator.score_answer(state["answer"] or None, item))
        components = {"correct": correct, "format": 1.0 if state["answer"] else 0.0}
        return Score(components, {"dataset": self.dataset})

    def public_state(self, state: State) -> dict[str, Any]:
        return {"question": state["question"], "answered": state["answer"] is not None}


def _config_model(dataset: str, config_class: type) -> type[RGConfig]:
    """The env's config: ``options`` checked against the dataset's own config class."""
    known = [f.name for f in dataclasses.fields(config_class) if f.name not in {"seed", "size"}]

    def check(config: RGConfig) -> RGConfig:
        unknown = sorted(set(config.options) - set(known))
        if unknown:
            raise ValueError(f"unknown options {unknown} for {dataset}; it has {known}")
        try:
            _validate(config_class, config.options)
        except (AssertionError, TypeError, ValueError) as exc:
            raise ValueError(f"invalid options for {dataset}: {exc}") from None
        return config

    validator = model_validator(mode="after")(check)
    return type(f"RG_{dataset}_Config", (RGConfig,), {"_check_options": validator})


def _validate(config_class: type, options: dict[str, Any]) -> None:
    """Build the dataset's config; raises if reasoning-gym finds the options invalid."""
    config = config_class(**options, seed=0, size=1)
    if hasattr(config, "validate"):
        config.validate()


def environments() -> list[ReasoningGymEnv]:
    """One environment per reasoning-gym dataset (the package is an optional extra)."""
    try:
        from reasoning_gym.factory import DATASETS
    except ImportError:
        raise EnvironmentUnavailable(
            "needs the reasoning-gym package, which is not installed: pip install 'wander-rl[rg]'"
        ) from None
    envs = []
    for name, (_, config_class) in sorted(DATASETS.items()):
        try:
            _validate(config_class, {})
        except (AssertionError, TypeError, ValueError) as exc:
            log.info("rg/%s left out: it has no usable default config (%s)", name, exc)
            continue
        envs.append(ReasoningGymEnv(name, config_class))
    return envs
