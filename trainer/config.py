"""Training configuration: one TOML file, checked before anything loads.

Top-level keys describe the run against the service; ``[grpo]`` and ``[peft]``
pass through to TRL's ``GRPOConfig`` and PEFT's ``LoraConfig`` (any of their
options; ``wander.trainer.grpo.trl_args`` checks ``[grpo]`` as a whole before any
model loads), ``[sampling]`` controls each turn's generation. ``rollout`` picks who
plays the episodes: Wander's rollout function (any environment), or TRL's own
tool loop through ``environment_factory`` (tool environments).

A run trains on one environment (``env``, ``env_config``, ``split``...) or on a
mixture: ``[[envs]]`` entries, each an environment with its own config, split,
weight, reward weights and evaluation (``EnvironmentEntry``); ``entries()`` gives
either as entries.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from wander.client import WanderClient
from wander.client.retry import PATIENT
from wander.trainer.batches import check_strata
from wander.trainer.rollout import MAX_FAILURE_RATE


class SamplingConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_tokens_per_turn: int = Field(128, ge=1)
    temperature: float = Field(1.0, gt=0)
    top_p: float = Field(1.0, gt=0, le=1)
    top_k: int = Field(0, ge=0, description="0: the whole vocabulary.")


class EnvironmentEntry(BaseModel):
    """One environment of a run: an ``[[envs]]`` entry, or the run's own ``env``."""

    model_config = ConfigDict(extra="forbid")

    env: str
    name: str = Field(
        "",
        description="The entry's label (default: `env`): its reward functions are logged as "
        "rewards/<name>/<component>. Two entries may share an environment under two names "
        "(e.g. two opponent strengths).",
    )
    config: dict[str, Any] = Field(default_factory=dict)
    split: str = "train"
    weight: float = Field(1.0, gt=0, description="Its share of each batch's groups.")
    examples: int | None = Field(
        None,
        ge=1,
        description="How many examples of the split it cycles over (none: a new one for "
        "every group drawn).",
    )
    reward_weights: dict[str, float] = Field(
        default_factory=dict,
        description="Weights of its score components, over the environment's own.",
    )
    metric_rewards: dict[str, float] = Field(
        default_factory=dict, description="As the run's `metric_rewards`, for this entry."
    )
    eval_split: str = "eval"
    eval_examples: int = Field(0, ge=0, description="Its examples played at each evaluation.")

    @model_validator(mode="after")
    def _named(self) -> EnvironmentEntry:
        self.name = self.name or self.env
        return self


IMPORTANCE_SAMPLING_MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")
"""TRL's ``vllm_importance_sampling_mode`` values: how a stale sample is weighed."""
SINGLE_ENVIRONMENT = ("env", "env_config", "split", "metric_rewards", "eval_split", "eval_examples")
"""The run's keys for one environment, which an ``[[envs]]`` entry holds instead."""


class GRPORunConfig(BaseModel):
    """What ``wander train grpo --config FILE.toml`` reads."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field("tiny", description="A hub id or local path, or `tiny` (built offline).")
    rollout: Literal["rollout_func", "environment_factory"] = Field(
        "rollout_func",
        description="`rollout_func`: Wander's rollout plays the episodes (any environment). "
        "`environment_factory`: TRL's tool loop plays them, each tool call one Wander step "
        "(tool environments; the model's chat template must support tools).",
    )
    url: str = Field("http://127.0.0.1:8000", description="The Wander service.")
    api_key: SecretStr | None = Field(
        None,
        description="The service's API key, if it wants one. `--api-key` or $WANDER_API_KEY "
        "take precedence; better kept there than in a file. Shown as ********** in reprs, "
        "logs and dumps.",
    )
    env: str = "tictactoe"
    env_config: dict[str, Any] = Field(default_factory=dict)
    split: str = "train"
    examples: int = Field(
        1024,
        ge=1,
        description="Examples of the split to train on; with [[envs]], the GRPO groups of "
        "the run, drawn among the entries by weight.",
    )
    envs: list[EnvironmentEntry] = Field(
        default_factory=list,
        description="Several environments in one run: each batch's groups are drawn among "
        "them by weight (a group is one environment's).",
    )
    run: str | None = Field(None, description="Run label of the training episodes.")
    output_dir: str = "runs/grpo"
    max_completion_length: int = Field(1024, ge=1)
    max_failure_rate: float = Field(
        MAX_FAILURE_RATE,
        ge=0,
        lt=1,
        description="The share of a batch's episodes whose step may fail (deleted, expired, "
        "the environment raised): those are left out of training (rewards None, tokens "
        "masked) and counted as wander/failed_episodes; above it the run stops.",
    )
    train_from: str | None = Field(
        None,
        min_length=1,
        description="A marker in the model's turns (e.g. `<move>`): the tokens before it are "
        "sampled but masked from the loss, so that GRPO trains the action and leaves the "
        "reasoning before it, which no reward scores, as it was; a turn without the marker "
        "is trained whole. None: every model token is trained.",
    )
    max_staleness: int = Field(
        0,
        ge=0,
        description="Asynchronous rollouts: how many optimizer steps old the policy behind "
        "a sample may be. 0: lockstep (each batch played by the policy it trains). N: "
        "the next batches are played while the trainer trains, each by the newest policy "
        "when it starts (trainer/async_rollout.py).",
    )
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    metric_rewards: dict[str, float] = Field(
        default_factory=dict,
        description="Numeric score metrics made reward functions, each with its weight, after "
        "the environment's score components: e.g. `{invalid_moves = -1.0}` in tic-tac-toe "
        "costs every invalid move, where the `invalid_move` component marks a game once. "
        "`[grpo] reward_weights`, if set, weighs the components, then these.",
    )
    eval_examples: int = Field(
        0,
        ge=0,
        description="Examples of `eval_split` played every `[grpo] eval_steps` steps (0: no "
        "evaluation); TRL logs their rewards as eval_reward and eval_rewards/<component>/mean.",
    )
    eval_split: str = "eval"
    grpo: dict[str, Any] = Field(default_factory=dict, description="TRL GRPOConfig options.")
    peft: dict[str, Any] | None = Field(None, description="PEFT LoraConfig options (none: full).")

    @model_validator(mode="after")
    def _one_way_to_name_environments(self) -> GRPORunConfig:
        if not self.envs:
            return self
        if given := [key for key in SINGLE_ENVIRONMENT if key in self.model_fields_set]:
            raise ValueError(
                f"{', '.join(given)} and [[envs]] both name the run's environments: with "
                "[[envs]], set them in each entry (env, config, split, metric_rewards, "
                "eval_split, eval_examples)"
            )
        names = [entry.name for entry in self.envs]
        if twice := sorted({name for name in names if names.count(name) > 1}):
            raise ValueError(
                f"[[envs]] names {', '.join(twice)} more than once: give each entry a `name`"
            )
        if "reward_weights" in self.grpo:
            raise ValueError(
                "grpo.reward_weights weighs one environment's rewards: with [[envs]], set "
                "reward_weights in each entry (its components' names to weights)"
            )
        return self

    def entries(self) -> list[EnvironmentEntry]:
        """The run's environments: its ``[[envs]]``, or its one environment as an entry."""
        if self.envs:
            return self.envs
        return [
            EnvironmentEntry(
                env=self.env,
                config=self.env_config,
                examples=self.examples,
                split=self.split,
                metric_rewards=self.metric_rewards,
                eval_split=self.eval_split,
                eval_examples=self.eval_examples,
            )
        ]

    @property
    def evaluates(self) -> bool:
        return any(entry.eval_examples for entry in self.entries())

    @model_validator(mode="after")
    def _one_sampling(self) -> GRPORunConfig:
        """``temperature``, ``top_p`` and ``top_k`` have one value. TRL's loss divides the
        logits by ``[grpo] temperature`` while the rollout samples with ``[sampling]``'s:
        set in one table, the value is the run's; set in both, they must agree."""
        for name in ("temperature", "top_p", "top_k"):
            if name not in self.grpo:
                continue
            mine = getattr(self.sampling, name)
            if name in self.sampling.model_fields_set and mine != self.grpo[name]:
                raise ValueError(
                    f"grpo.{name} ({self.grpo[name]}) and sampling.{name} ({mine}) disagree; "
                    f"set {name} in [sampling] only"
                )
            settings = {**self.sampling.model_dump(exclude_unset=True), name: self.grpo[name]}
            self.sampling = SamplingConfig.model_validate(settings)
        return self

    @model_validator(mode="after")
    def _plain_sampling(self) -> GRPORunConfig:
        """Wander's rollout samples with temperature, top-p and top-k only (the
        distribution TRL's loss scores the tokens under): a ``[grpo]`` sampling option it
        would not apply is refused, not ignored."""
        if self.rollout != "rollout_func":
            return self
        neutral = {
            "repetition_penalty": (1.0,),
            "min_p": (None, 0.0),
            "generation_kwargs": (None, {}),
        }
        for name, values in neutral.items():
            if self.grpo.get(name) not in (None, *values):
                raise ValueError(
                    f"grpo.{name} is not applied by Wander's rollout (rollout = "
                    '"rollout_func"), which samples with [sampling] temperature, top_p and '
                    "top_k only: the distribution TRL's loss scores the tokens under"
                )
        return self

    @model_validator(mode="after")
    def _vllm_on_a_server(self) -> GRPORunConfig:
        """Wander's rollout samples on a vLLM server (TRL's client); TRL's default mode,
        ``colocate``, keeps vLLM inside the trainer, where the rollout has no client (it
        failed once the models had loaded)."""
        mode = self.grpo.get("vllm_mode", "colocate")
        if self.rollout == "rollout_func" and self.grpo.get("use_vllm") and mode != "server":
            raise ValueError(
                f'grpo.use_vllm with vllm_mode = "{mode}" is not what Wander\'s rollout '
                'samples with: set grpo.vllm_mode = "server" and start a vLLM server '
                '(docs/training.md, "Generation on a vLLM server"), or leave use_vllm off to '
                "sample in the trainer"
            )
        correction = self.grpo.get("vllm_importance_sampling_correction", True)
        if self.max_staleness and self.grpo.get("use_vllm") and not correction:
            raise ValueError(
                "max_staleness on a vLLM server weighs each sample against the policy that "
                "played it by TRL's importance-sampling correction: leave "
                "grpo.vllm_importance_sampling_correction on"
            )
        weighing = self.grpo.get("vllm_importance_sampling_mode", "sequence_mask")
        if self.max_staleness and weighing not in IMPORTANCE_SAMPLING_MODES:
            raise ValueError(
                f"grpo.vllm_importance_sampling_mode {weighing!r} is none of TRL's: "
                f"{', '.join(IMPORTANCE_SAMPLING_MODES)}"
            )
        return self

    @model_validator(mode="after")
    def _evaluation(self) -> GRPORunConfig:
        if self.evaluates and self.rollout == "environment_factory":
            raise ValueError(
                'eval_examples is for rollout = "rollout_func"; TRL\'s tool loop '
                "(environment_factory) plays every row on the training split"
            )
        if self.grpo.get("eval_strategy", "no") != "no" and not self.evaluates:
            raise ValueError(
                f"grpo.eval_strategy is {self.grpo['eval_strategy']!r} but eval_examples is 0: "
                "set how many examples of the eval_split to evaluate on"
            )
        return self

    @model_validator(mode="after")
    def _stratified_batches(self) -> GRPORunConfig:
        generations = self.grpo.get("num_generations")
        batch = self.grpo.get("generation_batch_size")
        if generations and batch:
            check_strata(self.entries(), batch // generations)
        return self

    @model_validator(mode="after")
    def _options_need_the_rollout(self) -> GRPORunConfig:
        if self.rollout != "environment_factory":
            return self
        if "max_tokens_per_turn" in self.sampling.model_fields_set:
            raise ValueError(
                'sampling.max_tokens_per_turn is for rollout = "rollout_func"; TRL\'s tool '
                "loop (environment_factory) generates each turn within max_completion_length"
            )
        if any(entry.reward_weights for entry in self.entries()):
            raise ValueError(
                '[[envs]] reward_weights is for rollout = "rollout_func"; TRL\'s tool loop '
                "(environment_factory) rewards each entry with Wander's score total"
            )
        if any(entry.metric_rewards for entry in self.entries()):
            raise ValueError(
                'metric_rewards is for rollout = "rollout_func"; TRL\'s tool loop '
                "(environment_factory) is rewarded with Wander's score total"
            )
        if self.max_staleness:
            raise ValueError(
                'max_staleness is for rollout = "rollout_func"; TRL\'s tool loop '
                "(environment_factory) generates in the trainer, batch by batch"
            )
        if "max_failure_rate" in self.model_fields_set:
            raise ValueError(
                'max_failure_rate is for rollout = "rollout_func"; in TRL\'s tool loop '
                "(environment_factory) a failed tool call is the tool's error reply to the model"
            )
        if self.train_from is not None:
            raise ValueError(
                'train_from is for rollout = "rollout_func"; TRL\'s tool loop '
                "(environment_factory) trains every token the model generates"
            )
        return self

    def client(self, url: str | None = None, api_key: str | None = None) -> WanderClient:
        """The client every part of the run plays through: ``url`` and ``api_key`` (the
        command line's, or its environment's) before the file's ``url`` and ``api_key``."""
        key = api_key or (self.api_key.get_secret_value() if self.api_key else None)
        return WanderClient(url or self.url, key, retry=PATIENT)


def load_config(path: Path) -> GRPORunConfig:
    with path.open("rb") as file:
        return GRPORunConfig.model_validate(tomllib.load(file))
