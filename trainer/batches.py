"""What each generation batch of a run holds: its GRPO groups, drawn among the run's
environments by weight, each environment's examples in stratified order.

TRL's generation batch is ``generation_batch_size / num_generations`` consecutive
dataset rows, each row one GRPO group (its prompt repeated ``num_generations``
times), so a group is always one environment's. The rows are laid out here:
batch by batch, each environment's share of the groups (``quotas``), then its
next examples (``stratified_order``: an environment that puts example i in
difficulty stratum i mod ``num_groups`` sees every stratum evenly in each batch
when its share is ``num_groups``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the config checks its batches with check_strata
    from wander.trainer.config import EnvironmentEntry


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


def shares(entries: Sequence[EnvironmentEntry], groups: int) -> list[float]:
    """Each entry's expected groups in a batch of ``groups``: its share by weight."""
    total = sum(entry.weight for entry in entries)
    return [groups * entry.weight / total for entry in entries]


def quotas(entries: Sequence[EnvironmentEntry], groups: int, rng: random.Random) -> list[int]:
    """Each entry's groups in one batch: the whole part of its share, then the groups
    left over drawn one by one with the fractions as weights (so that over many
    batches each entry gets its share exactly in expectation)."""
    expected = shares(entries, groups)
    counts = [math.floor(share + 1e-9) for share in expected]
    fractions = [share - count for share, count in zip(expected, counts, strict=True)]
    for _ in range(groups - sum(counts)):
        [index] = rng.choices(range(len(entries)), weights=fractions)
        counts[index] += 1
        fractions[index] = 0.0
    return counts


def check_strata(entries: Sequence[EnvironmentEntry], groups: int) -> None:
    """An entry whose config sets ``num_groups`` (its difficulty strata) must get
    exactly that many groups in every batch, or its batches span the strata unevenly."""
    for entry, share in zip(entries, shares(entries, groups), strict=True):
        strata = entry.config.get("num_groups")
        if strata and share != strata:
            where = "env_config" if len(entries) == 1 else f"[[envs]] {entry.name!r}: config"
            raise ValueError(
                f"{where}.num_groups ({strata}) must equal the groups it gets in each batch "
                f"({share:g} of generation_batch_size / num_generations = {groups}) so that "
                "every batch spans the opponent strata evenly"
            )


def examples_of(entry: EnvironmentEntry, drawn: int, block: int, seed: int) -> Iterator[int]:
    """The entry's examples in the order its groups are drawn: ``entry.examples``
    of them, cycled (each pass in its own stratified order), or ``drawn`` distinct
    ones."""
    examples = entry.examples or max(drawn, 1)
    for cycle in range(math.ceil(drawn / examples)):
        yield from stratified_order(examples, block, seed + cycle)


def training_rows(
    entries: Sequence[EnvironmentEntry], rows: int, groups: int, seed: int = 0
) -> list[tuple[str, int]]:
    """``(entry name, example)`` for each of the ``rows`` groups of the run, batches
    of ``groups`` at a time."""
    check_strata(entries, groups)
    rng = random.Random(seed)
    batches = [quotas(entries, groups, rng) for _ in range(math.ceil(rows / groups))]
    drawn = [sum(column) for column in zip(*batches, strict=True)]
    orders = [
        examples_of(entry, count, entry.config.get("num_groups") or groups, seed)
        for entry, count in zip(entries, drawn, strict=True)
    ]
    layout = [
        (entry.name, next(order))
        for batch in batches
        for entry, order, count in zip(entries, orders, batch, strict=True)
        for _ in range(count)
    ]
    return layout[:rows]


def evaluation_rows(entries: Sequence[EnvironmentEntry]) -> list[tuple[str, int]]:
    """``(entry name, example)`` of every evaluation: each entry's first ``eval_examples``."""
    return [(entry.name, example) for entry in entries for example in range(entry.eval_examples)]
