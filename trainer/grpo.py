"""``wander train grpo``: TRL's GRPOTrainer with the Wander rollout."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from wander.client import WanderClient
from wander.trainer.backends import Sampling
from wander.trainer.config import GRPORunConfig
from wander.trainer.models import device_defaults
from wander.trainer.rollout import WanderRollout, example_prompt


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


def reward_function(component: str) -> Callable[..., list[float]]:
    """A TRL reward function reading one score component the rollout returned."""

    def reward(prompts: list[Any], completions: list[Any], **fields: Any) -> list[float]:
        return [float(value) for value in fields[component]]

    reward.__name__ = component
    return reward


CISPO_EPSILON_HIGH = 5.0
"""CISPO's cap on the importance weight. Left unset, TRL falls back to ``epsilon``
(0.2), and since on-policy weights are 1, every token's weight is then cut to 0.2:
a fifth of the learning rate. 5.0 is the value TRL's docs recommend (ScaleRL)."""


def build_trainer(run: GRPORunConfig, client: WanderClient, model: Any, tokenizer: Any) -> Any:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    info = client.environment(run.env)
    components = [c.name for c in info.reward_components]
    options = {
        "output_dir": run.output_dir,
        "max_completion_length": run.max_completion_length,
        "temperature": run.sampling.temperature,
        "top_p": run.sampling.top_p,
        "shuffle_dataset": False,  # the order below keeps batches stratified
        "report_to": "none",
        **device_defaults(),
        **run.grpo,
        "reward_weights": [c.weight for c in info.reward_components],
    }
    if options.get("loss_type") == "cispo":
        options.setdefault("epsilon_high", CISPO_EPSILON_HIGH)
    args = GRPOConfig(**options)
    groups = args.generation_batch_size // args.num_generations
    order = stratified_order(run.examples, groups, args.seed)
    dataset = Dataset.from_list([{"prompt": example_prompt(i)} for i in order])
    rollout = WanderRollout(
        client,
        run.env,
        tokenizer,
        components,
        config=run.env_config,
        split=run.split,
        run=run.run,
        sampling=Sampling(
            run.sampling.max_tokens_per_turn, run.sampling.temperature, run.sampling.top_p
        ),
        max_completion_length=run.max_completion_length,
    )
    peft_config = None
    if run.peft is not None:
        from peft import LoraConfig

        peft_config = LoraConfig(task_type="CAUSAL_LM", **run.peft)
    return GRPOTrainer(
        model=model,
        reward_funcs=[reward_function(name) for name in components],
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        rollout_func=rollout,
        peft_config=peft_config,
    )
