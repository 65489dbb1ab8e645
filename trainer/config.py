"""Training configuration: one TOML file, checked before anything loads.

Top-level keys describe the run against the service; ``[grpo]`` and ``[peft]``
pass through to TRL's ``GRPOConfig`` and PEFT's ``LoraConfig`` (any of their
options), ``[sampling]`` controls each turn's generation. ``rollout`` picks who
plays the episodes: Wander's rollout function (any environment), or TRL's own
tool loop through ``environment_factory`` (tool environments).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from wander.client import WanderClient


class SamplingConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_tokens_per_turn: int = Field(128, ge=1)
    temperature: float = Field(1.0, gt=0)
    top_p: float = Field(1.0, gt=0, le=1)


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
    examples: int = Field(1024, ge=1, description="Examples of the split to train on.")
    run: str | None = Field(None, description="Run label of the training episodes.")
    output_dir: str = "runs/grpo"
    max_completion_length: int = Field(1024, ge=1)
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    grpo: dict[str, Any] = Field(default_factory=dict, description="TRL GRPOConfig options.")
    peft: dict[str, Any] | None = Field(None, description="PEFT LoraConfig options (none: full).")

    @model_validator(mode="after")
    def _stratified_batches(self) -> GRPORunConfig:
        groups = self.env_config.get("num_groups")
        generations = self.grpo.get("num_generations")
        batch = self.grpo.get("generation_batch_size")
        if groups and generations and batch and batch // generations != groups:
            raise ValueError(
                f"env_config.num_groups ({groups}) must equal generation_batch_size / "
                f"num_generations ({batch} / {generations}) so that every batch spans the "
                "opponent strata evenly"
            )
        return self

    @model_validator(mode="after")
    def _turn_length_needs_the_rollout(self) -> GRPORunConfig:
        if (
            self.rollout == "environment_factory"
            and "max_tokens_per_turn" in self.sampling.model_fields_set
        ):
            raise ValueError(
                'sampling.max_tokens_per_turn is for rollout = "rollout_func"; TRL\'s tool '
                "loop (environment_factory) generates each turn within max_completion_length"
            )
        return self

    def client(self, url: str | None = None, api_key: str | None = None) -> WanderClient:
        """The client every part of the run plays through: ``url`` and ``api_key`` (the
        command line's, or its environment's) before the file's ``url`` and ``api_key``."""
        key = api_key or (self.api_key.get_secret_value() if self.api_key else None)
        return WanderClient(url or self.url, key)


def load_config(path: Path) -> GRPORunConfig:
    with path.open("rb") as file:
        return GRPORunConfig.model_validate(tomllib.load(file))
