"""Episode records for archive tests, built like the engine builds them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from wander.client.models import EpisodeRecord, Message, Score

T0 = datetime(2026, 1, 1, tzinfo=UTC)
WEIGHTS = {"win": 1.0, "format": 0.2, "invalid_move": 1.0}
WIN_VALUE = {"win": 1.0, "draw": 0.5, "loss": 0.0, None: 0.0}


def tictactoe_record(
    index: int,
    outcome: str | None,
    *,
    run: str | None = "run-a",
    invalid_moves: int = 0,
    formatted: float = 1.0,
    status: str = "done",
    env: str = "tictactoe",
    tenant: str | None = None,
) -> EpisodeRecord:
    components = {
        "win": WIN_VALUE[outcome],
        "format": formatted,
        "invalid_move": -0.1 if invalid_moves else 0.0,
    }
    total = sum(WEIGHTS[k] * v for k, v in components.items())
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": f"board {index}"},
        {"role": "assistant", "content": f"<think>t</think><move>{index % 9}</move>"},
        {"role": "user", "content": "Game over."},
    ]
    created = T0 + timedelta(seconds=index)
    return EpisodeRecord(
        id=f"ep_{index:04d}",
        tenant=tenant,
        env=env,
        version="1.0.0",
        split="train",
        example=index,
        seed=1000 + index,
        group=f"grp_{index // 2}",
        run=run,
        metadata={"i": index},
        config={"seed": 0},
        turn=1,
        done=True,
        status=status,  # type: ignore[arg-type]
        messages=[Message.model_validate(m) for m in messages],
        step_rewards=[total],
        score=Score(
            episode_id=f"ep_{index:04d}",
            done=True,
            total=total,
            components=components,
            weights=WEIGHTS,
            metrics={
                "outcome": outcome,
                "invalid_moves": invalid_moves,
                "turns": 1 + invalid_moves,
                "model_starts": index % 2 == 0,
                "random_move_prob": 0.5,
            },
            outcome=outcome,
        ),
        state={"board": "X........"},
        created_at=created,
        updated_at=created + timedelta(seconds=1),
        finished_at=created + timedelta(seconds=1),
    )


def with_outcome(record: EpisodeRecord, outcome: str) -> EpisodeRecord:
    """``record`` with another ``outcome``: one longer than its column is refused by
    PostgreSQL (SQLite stores it anyway)."""
    return record.model_copy(update={"score": record.score.model_copy(update={"outcome": outcome})})


def many_runs(count: int) -> list[EpisodeRecord]:
    """One to three episodes for each of ``count`` runs (``count`` prime to 7), plus one
    unlabelled: the labels sort otherwise than the runs were created, and the runs start
    three at a time at the same moment, so that only the label orders those."""
    records = []
    for k in range(count):
        run = f"run-{7 * k % count:03d}"
        for j in range(k % 3 + 1):
            created = T0 + timedelta(seconds=10 * (k // 3) + j)
            record = tictactoe_record(len(records), "win", run=run)
            records.append(record.model_copy(update={
                "created_at": created,
                "updated_at": created + timedelta(seconds=1),
                "finished_at": created + timedelta(seconds=1),
            }))  # fmt: skip
    return [*records, tictactoe_record(len(records), "win", run=None)]


def oldest_first(records: list[EpisodeRecord]) -> list[str]:
    """The run labels of ``records`` as ``GET /v1/runs`` orders them: by the creation of
    each run's first episode, then by label."""
    first: dict[str, datetime] = {}
    for record in records:
        if record.run is not None:
            first[record.run] = min(first.get(record.run, record.created_at), record.created_at)
    return sorted(first, key=lambda run: (first[run], run))
