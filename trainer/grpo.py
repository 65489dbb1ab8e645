"""``wander train grpo``: TRL's GRPOTrainer playing the service, by Wander's rollout
function or by TRL's own tool loop (``rollout`` in the config)."""

from __future__ import annotations

import dataclasses
import difflib
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from wander.client import WanderClient
from wander.client.models import RewardComponent
from wander.trainer.backends import Sampling
from wander.trainer.batches import evaluation_rows, training_rows
from wander.trainer.config import EnvironmentEntry, GRPORunConfig
from wander.trainer.models import device_defaults
from wander.trainer.rollout import TOTAL, Task, WanderRollout, example_prompt
from wander.trainer.tool_environment import score_reward, tool_environment, wander_score


def reward_function(
    field: str, *, reports: bool = False, totals: Mapping[str, Mapping[str, float]] | None = None
) -> Callable[..., list[float | None]]:
    """A TRL reward function reading one field the rollout returned (a score component
    or a rewarded metric): None for a failed episode, which TRL leaves out of its
    group's baseline (advantage 0), and for another task's. ``reports``: also logs
    how many episodes of the batch failed, as ``wander/failed_episodes``, each
    task's mean reward as ``wander/<task>/reward`` (``totals``: each task's fields and
    their weights), and how many optimizer steps old the policy behind the batch was
    (``wander/staleness``, with asynchronous rollouts); one of a run's reward
    functions reports."""

    def reward(
        prompts: list[Any],
        completions: list[Any],
        log_metric: Callable[[str, float], None] | None = None,
        **fields: Any,
    ) -> list[float | None]:
        if reports and log_metric is not None:
            log_metric("wander/failed_episodes", float(sum(fields["wander_failed"])))
            if "wander_staleness" in fields:  # asynchronous rollouts
                staleness = fields["wander_staleness"]
                log_metric("wander/staleness", sum(staleness) / len(staleness))
            for task, weights in (totals or {}).items():
                played = [
                    sum(weight * fields[name][i] for name, weight in weights.items())
                    for i, label in enumerate(fields["wander_task"])
                    if label == task and not fields["wander_failed"][i]
                ]
                if played:
                    log_metric(f"wander/{task}/reward", sum(played) / len(played))
        return [None if value is None else float(value) for value in fields[field]]

    reward.__name__ = field
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
        **({"eval_strategy": "steps"} if run.evaluates else {}),
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
    """``rollout_func``: the training batches to ``train``; a trainer that evaluates
    hands its evaluation batches to the same function, and they are played on the
    evaluation split."""

    train: Callable[[list[list[dict[str, Any]]], Any], dict[str, Any]]
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
    row: Callable[[str, int], dict[str, Any]]
    """The dataset row of an entry's example."""
    generation: dict[str, Any]


def rollout_task(entry: EnvironmentEntry, client: WanderClient) -> tuple[Task, list[float]]:
    """An entry's task (one reward field per score component, then one per
    ``metric_rewards`` entry) and its fields' weights: the environment's for its
    components unless the entry's ``reward_weights`` say otherwise, then its own."""
    listed = client.environment(entry.env).reward_components
    # An environment that names its components as it plays lists none: its total is the reward.
    components = listed or [RewardComponent(name=TOTAL, weight=1.0)]
    names = [c.name for c in components]
    if clashes := sorted(set(names) & entry.metric_rewards.keys()):
        raise ValueError(
            f"metric_rewards names {', '.join(clashes)}, which {entry.env}'s score components "
            "name too: weigh a component with reward_weights"
        )
    if unknown := sorted(entry.reward_weights.keys() - set(names)):
        raise ValueError(
            f"[[envs]] {entry.name!r}: reward_weights names {', '.join(unknown)}, which is not "
            f"one of {entry.env}'s score components ({', '.join(names)})"
        )
    task = Task(entry.env, names, list(entry.metric_rewards), entry.config, entry.split, entry.name)
    weights = [entry.reward_weights.get(c.name, c.weight) for c in components]
    return task, [*weights, *entry.metric_rewards.values()]


def rollout_func_plan(run: GRPORunConfig, client: WanderClient, tokenizer: Any) -> RolloutPlan:
    """Wander's rollout function plays the episodes of every entry (``rollout_task``);
    one reward function per field it returns, each with its weight."""
    entries = run.entries()
    tasks, weights = zip(*(rollout_task(entry, client) for entry in entries), strict=True)
    options: dict[str, Any] = {
        "sampling": Sampling(
            run.sampling.max_tokens_per_turn,
            run.sampling.temperature,
            run.sampling.top_p,
            run.sampling.top_k,
        ),
        "max_completion_length": run.max_completion_length,
        "max_failure_rate": run.max_failure_rate,
        "train_from": run.train_from,
    }
    train = WanderRollout(client, tokenizer, tasks, run=run.run, **options)
    evaluation = WanderRollout(
        client,
        tokenizer,
        [
            dataclasses.replace(task, split=entry.eval_split)
            for task, entry in zip(tasks, entries, strict=True)
        ],
        run=f"{run.run}-eval" if run.run else None,
        **options,
    )
    weight_of = dict(zip(train.fields, itertools.chain(*weights), strict=True))
    totals = {
        task.label: {name: weight_of[name] for name, (of, _) in train.fields.items() if of is task}
        for task in tasks
    }
    return RolloutPlan(
        [
            reward_function(name, reports=i == 0, totals=totals if len(tasks) > 1 else None)
            for i, name in enumerate(train.fields)
        ],
        list(weight_of.values()),
        lambda task, example: {"prompt": example_prompt(example, task)},
        {"rollout_func": ByMode(train, evaluation)},
    )


def environment_factory_plan(run: GRPORunConfig, client: WanderClient) -> RolloutPlan:
    """TRL's tool loop plays the episodes (``tool_environment``); the reward is Wander's
    score total. A row is its example: TRL hands it to ``reset``, and with no
    ``prompt`` column the prompt is the episode's opening text. With several entries,
    TRL's dict ``environment_factory`` holds one per entry, a row names its entry
    (``environment``), and each entry's score is a reward function of its own."""
    factories = {
        entry.name: tool_environment(
            client, entry.env, config=entry.config, split=entry.split, run=run.run
        )
        for entry in run.entries()
    }
    if not run.envs:
        [factory] = factories.values()
        return RolloutPlan(
            [wander_score],
            [1.0],
            lambda task, example: {"example": example},
            {"environment_factory": factory},
        )
    return RolloutPlan(
        [score_reward(kind, name) for name, kind in factories.items()],
        [1.0] * len(factories),
        lambda task, example: {"environment": task, "example": example},
        {"environment_factory": factories},
    )


def build_trainer(run: GRPORunConfig, client: WanderClient, model: Any, tokenizer: Any) -> Any:
    """TRL's ``GRPOTrainer`` for the run: its groups drawn among its environments by
    weight, each one's examples in stratified order (``batches.training_rows``); with
    ``eval_examples``, each environment's first examples of its ``eval_split`` to
    evaluate on."""
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
    rows = training_rows(run.entries(), run.examples, groups, args.seed)
    dataset = [plan.row(*row) for row in rows]
    trainer_class, callbacks = GRPOTrainer, [FiniteGradients()]
    if run.max_staleness:
        trainer_class, closing = asynchronous(run, args, plan, dataset)
        callbacks.append(closing)
    peft_config = None
    if run.peft is not None:
        from peft import LoraConfig

        peft_config = LoraConfig(task_type="CAUSAL_LM", **run.peft)
    evaluation = evaluation_rows(run.entries())
    return trainer_class(
        model=model,
        reward_funcs=plan.reward_funcs,
        args=args,
        train_dataset=Dataset.from_list(dataset),
        eval_dataset=(
            Dataset.from_list([plan.row(*row) for row in evaluation]) if evaluation else None
        ),
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=callbacks,
        **plan.generation,
    )


def asynchronous(
    run: GRPORunConfig, args: Any, plan: RolloutPlan, dataset: list[dict[str, Any]]
) -> tuple[type, Any]:
    """The trainer class and the callback of a run with asynchronous rollouts: its
    training batches played ahead (``async_rollout``), each token weighed by its
    importance weight against the policy that sampled it (``off_policy``: TRL's own
    correction on a vLLM server, Wander's subclass without one)."""
    from accelerate import PartialState
    from trl import GRPOTrainer

    from wander.trainer import async_rollout
    from wander.trainer.off_policy import OffPolicyGRPOTrainer

    async_rollout.check(args, PartialState().num_processes)
    ahead = async_rollout.ahead(run.max_staleness, args)
    groups = args.generation_batch_size // args.num_generations
    prompts = [row["prompt"] for row in dataset]
    asked = async_rollout.batches_asked(args)
    batches = async_rollout.batch_plan(prompts, groups, args.num_generations, asked)
    by_mode: ByMode = plan.generation["rollout_func"]
    played = async_rollout.AsyncRollout(
        by_mode.train, batches, ahead, run.max_staleness, served=bool(args.use_vllm)
    )
    plan.generation["rollout_func"] = dataclasses.replace(by_mode, train=played)
    trainer_class = GRPOTrainer if args.use_vllm else OffPolicyGRPOTrainer
    return trainer_class, async_rollout.Closing(played)
