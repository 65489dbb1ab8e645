"""``wander train grpo``: TRL's GRPOTrainer playing the service, by Wander's rollout
function or by TRL's own tool loop (``rollout`` in the config)."""

from __future__ import annotations

import dataclasses
import difflib
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from wander.client import WanderClient
from wander.client.models import RewardComponent
from wander.trainer.backends import Sampling
from wander.trainer.config import GRPORunConfig
from wander.trainer.models import device_defaults
from wander.trainer.rollout import TOTAL, WanderRollout, example_prompt
from wander.trainer.tool_environment import tool_environment, wander_score


def stratified_order(examples: int, groups: int, seed: int = 0) -> list[int]:
    """Example indices in blocks of ``groups`` consecutive examples, blocks shuffled.

    The environment puts example i in difficulty stratum i mod ``groups``, so
    every block spans the strata evenly; with ``groups = generation batch /
    num_generations`` every generation batch is one block.
    """
    starts = range(0, examples, groups)
    blocks = [list(range(start, min(start + groups, examples))) for start in starts]
    random.Random(seed).shuffle(blocks)
    return [index for block in blocks for index in block]


def reward_function(
    component: str, *, counts_failures: bool = False
) -> Callable[..., list[float | None]]:
    """A TRL reward function reading one field the rollout returned (a score component
    or a rewarded metric): None for a failed episode, which TRL leaves out of its
    group's baseline (advantage 0). ``counts_failures``: also logs how many episodes
    of the batch failed, as ``wander/failed_episodes`` (one of a run's reward
    functions does)."""

    def reward(
        prompts: list[Any],
        completions: list[Any],
        log_metric: Callable[[str, float], None] | None = None,
        **fields: Any,
    ) -> list[float | None]:
        values = fields[component]
        if counts_failures and log_metric is not None:
            log_metric("wander/failed_episodes", float(sum(value is None for value in values)))
        return [None if value is None else float(value) for value in values]

    reward.__name__ = component
    return reward


CISPO_EPSILON_HIGH = 5.0
"""CISPO's cap on the importance weight. Left unset, TRL falls back to ``epsilon``
(0.2), and since on-policy weights are 1, every token's weight is then cut to 0.2:
a fifth of the learning rate. 5.0 is the value TRL's docs recommend (ScaleRL)."""


def trl_args(run: GRPORunConfig) -> Any:
    """The run's TRL ``GRPOConfig``: Wander's defaults, then the ``[grpo]`` table.

    Built (so checked whole, as TRL checks it) before any model loads: a mistyped
    option is a configuration error at once, not a failure after the model has
    loaded. ``reward_weights`` are left to ``build_trainer``, which knows the
    environment's reward components.
    """
    from trl import GRPOConfig

    known = {f.name for f in dataclasses.fields(GRPOConfig) if f.init}
    for name in run.grpo.keys() - known:
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"[grpo] {name!r} is not an option of TRL's GRPOConfig{hint}")
    options = {
        "output_dir": run.output_dir,
        "max_completion_length": run.max_completion_length,
        "temperature": run.sampling.temperature,
        "top_p": run.sampling.top_p,
        "top_k": run.sampling.top_k,
        "shuffle_dataset": False,  # the order below keeps batches stratified
        "report_to": "none",
        **({"eval_strategy": "steps"} if run.eval_examples else {}),
        **device_defaults(),
        **run.grpo,
    }
    if options.get("loss_type") == "cispo":
        options.setdefault("epsilon_high", CISPO_EPSILON_HIGH)
    try:
        return GRPOConfig(**options)
    except ValueError as exc:
        raise ValueError(f"[grpo] {exc}") from exc


def reward_weights(run: GRPORunConfig, plan: RolloutPlan) -> list[float]:
    """``[grpo] reward_weights``, one per reward function, or the plan's (the
    environment's weights) where the table sets none."""
    weights = run.grpo.get("reward_weights")
    if weights is None:
        return plan.reward_weights
    names = [function.__name__ for function in plan.reward_funcs]
    if len(weights) != len(names):
        raise ValueError(
            f"[grpo] reward_weights has {len(weights)} weights for {len(names)} reward "
            f"functions ({', '.join(names)}; the environment's weights: {plan.reward_weights})"
        )
    return [float(weight) for weight in weights]


@dataclass(frozen=True)
class ByMode:
    """``rollout_func`` for a trainer that evaluates too: TRL hands its evaluation
    batches to the same function, and they are played on the evaluation split."""

    train: WanderRollout
    evaluation: WanderRollout

    def __call__(self, prompts: list[list[dict[str, Any]]], trainer: Any = None) -> dict[str, Any]:
        training = trainer is None or trainer.model.training
        return (self.train if training else self.evaluation)(prompts, trainer)


@dataclass(frozen=True)
class RolloutPlan:
    """How a run plays the service, as TRL is handed it: the reward functions and
    their weights, the dataset row of an example, and ``rollout_func=`` or
    ``environment_factory=``."""

    reward_funcs: list[Callable[..., list[Any]]]
    reward_weights: list[float]
    row: Callable[[int], dict[str, Any]]
    generation: dict[str, Any]


def rollout_func_plan(run: GRPORunConfig, client: WanderClient, tokenizer: Any) -> RolloutPlan:
    """Wander's rollout function plays the episodes; one reward function per score
    component, with the environment's weight, then one per ``metric_rewards`` entry,
    with its own."""
    listed = client.environment(run.env).reward_components
    # An environment that names its components as it plays lists none: its total is the reward.
    components = listed or [RewardComponent(name=TOTAL, weight=1.0)]
    names = [c.name for c in components]
    if clashes := sorted(set(names) & run.metric_rewards.keys()):
        raise ValueError(
            f"metric_rewards names {', '.join(clashes)}, which {run.env}'s score components "
            "name too: weigh a component with [grpo] reward_weights"
        )

    def rollout(split: str, label: str | None) -> WanderRollout:
        return WanderRollout(
            client,
            run.env,
            tokenizer,
            names,
            metrics=list(run.metric_rewards),
            config=run.env_config,
            split=split,
            run=label,
            sampling=Sampling(
                run.sampling.max_tokens_per_turn,
                run.sampling.temperature,
                run.sampling.top_p,
                run.sampling.top_k,
            ),
            max_completion_length=run.max_completion_length,
            max_failure_rate=run.max_failure_rate,
        )

    train = rollout(run.split, run.run)
    evaluation = rollout(run.eval_split, f"{run.run}-eval" if run.run else None)
    return RolloutPlan(
        [
            reward_function(name, counts_failures=i == 0)
            for i, name in enumerate([*names, *run.metric_rewards])
        ],
        [*(c.weight for c in components), *run.metric_rewards.values()],
        lambda example: {"prompt": example_prompt(example)},
        {"rollout_func": ByMode(train, evaluation) if run.eval_examples else train},
    )


def environment_factory_plan(run: GRPORunConfig, client: WanderClient) -> RolloutPlan:
    """TRL's tool loop plays the episodes (``tool_environment``); the reward is Wander's
    score total. A row is its example: TRL hands it to ``reset``, and with no
    ``prompt`` column the prompt is the episode's opening text."""
    factory = tool_environment(client, run.env, config=run.env_config, split=run.split, run=run.run)
    return RolloutPlan(
        [wander_score],
        [1.0],
        lambda example: {"example": example},
        {"environment_factory": factory},
    )


def build_trainer(run: GRPORunConfig, client: WanderClient, model: Any, tokenizer: Any) -> Any:
    """TRL's ``GRPOTrainer`` for the run, its examples in stratified order; with
    ``eval_examples``, the first examples of ``eval_split`` to evaluate on."""
    from datasets import Dataset
    from trl import GRPOTrainer

    from wander.trainer.gradients import FiniteGradients

    args = trl_args(run)
    if run.rollout == "environment_factory":
        plan = environment_factory_plan(run, client)
    else:
        plan = rollout_func_plan(run, client, tokenizer)
    args.reward_weights = reward_weights(run, plan)
    groups = args.generation_batch_size // args.num_generations
    order = stratified_order(run.examples, groups, args.seed)
    peft_config = None
    if run.peft is not None:
        from peft import LoraConfig

        peft_config = LoraConfig(task_type="CAUSAL_LM", **run.peft)
    return GRPOTrainer(
        model=model,
        reward_funcs=plan.reward_funcs,
        args=args,
        train_dataset=Dataset.from_list([plan.row(i) for i in order]),
        eval_dataset=(
            Dataset.from_list([plan.row(i) for i in range(run.eval_examples)])
            if run.eval_examples
            else None
        ),
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=[FiniteGradients()],
        **plan.generation,
    )
