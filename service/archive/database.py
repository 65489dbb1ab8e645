"""The archive database: writes finished episodes, answers the runs API.

Synchronous SQLAlchemy on purpose: the write-behind worker and the routes call
it from worker threads, and one engine works the same on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.exc import (
    DataError,
    DBAPIError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    ProgrammingError,
)
from sqlalchemy.orm import Session

from wander.client.models import (
    ArchivedEpisodesPage,
    EpisodeRecord,
    RunInfo,
    RunsPage,
    RunSummary,
    Score,
)
from wander.client.summary import RunAggregate
from wander.service.archive.connect import make_engine
from wander.service.archive.migrations import current_revision, head_revision
from wander.service.archive.tables import ArchivedEpisode
from wander.service.errors import DatabaseUnavailable, RunNotFound

ERROR_CHARS = 1000
"""The most of a database's error message kept: enough for its reason and details."""


class WriteRefused(Exception):
    """The database answered, and refused a write: ``str()`` is its reason, on one line."""


class RecordRefused(WriteRefused):
    """The database refused a record for what it holds (a string it cannot store, a value
    longer than its column, a constraint): the same record can never be written."""


PROBE = EpisodeRecord(
    id="wander-write-probe", env="probe", version="0", split="probe", example=0, seed=0,
    group="probe", run=None, metadata=None, config={}, turn=0, done=True, status="done",
    messages=[], step_rewards=[], state={},
    score=Score(episode_id="wander-write-probe", done=True, total=0.0, components={},
                weights={}, metrics={}),
    created_at=datetime(2026, 1, 1, tzinfo=UTC), updated_at=datetime(2026, 1, 1, tzinfo=UTC),
    finished_at=None,
)  # fmt: skip
"""A record any working archive accepts: ``check_writes`` writes it, then rolls back."""


@dataclass(frozen=True)
class EpisodeFilter:
    """Which archived episodes of a run to list or export."""

    env: str | None = None
    status: str | None = None
    outcome: Sequence[str] = ()
    exclude_outcome: Sequence[str] = ()
    min_reward: float | None = None
    max_reward: float | None = None

    def apply(self, query: Select[Any]) -> Select[Any]:
        conditions = []
        if self.env is not None:
            conditions.append(ArchivedEpisode.env == self.env)
        if self.status is not None:
            conditions.append(ArchivedEpisode.status == self.status)
        if self.outcome:
            conditions.append(ArchivedEpisode.outcome.in_(self.outcome))
        if self.exclude_outcome:
            # An episode without an outcome is not one of the excluded outcomes.
            conditions.append(
                ArchivedEpisode.outcome.is_(None)
                | ArchivedEpisode.outcome.not_in(self.exclude_outcome)
            )
        if self.min_reward is not None:
            conditions.append(ArchivedEpisode.total_reward >= self.min_reward)
        if self.max_reward is not None:
            conditions.append(ArchivedEpisode.total_reward <= self.max_reward)
        return query.where(*conditions)


class Archive:
    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)
        self._upsert = _upsert_statement(self.engine.dialect.name)

    def dispose(self) -> None:
        self.engine.dispose()

    def ping(self) -> None:
        """Raise ``DatabaseUnavailable`` unless the database answers and is fully migrated."""
        with self._available():
            revision = current_revision(self.engine)
        if revision != head_revision():
            raise DatabaseUnavailable(
                f"the archive database is at revision {revision}, not {head_revision()}: "
                "run `wander db upgrade`"
            )

    def write(self, records: Sequence[EpisodeRecord]) -> None:
        """Insert or replace ``records``: an episode archived twice is still one row.

        Raises ``DatabaseUnavailable`` (nothing was written; try again later),
        ``RecordRefused`` (a record of them can never be written) or ``WriteRefused``
        (the database refused for a reason of its own)."""
        # One row per id: PostgreSQL refuses to upsert the same row twice in a statement.
        rows = list({record.id: _row(record) for record in records}.values())
        with self._writing(), self.engine.begin() as connection:
            connection.execute(self._upsert, rows)

    def check_writes(self) -> None:
        """Raise as ``write`` would unless the database accepts a plain record now (written,
        then rolled back): when one record fails for no reason the database names, this
        tells a record it dislikes from a database that takes no writes at all (read-only,
        out of space, missing privileges)."""
        with self._writing(), self.engine.connect() as connection:
            transaction = connection.begin()
            try:
                connection.execute(self._upsert, [_row(PROBE)])
            finally:
                transaction.rollback()

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """Errors of a write, named for what the caller can do about them."""
        with self._available():
            try:
                yield
            except (DataError, IntegrityError) as exc:
                raise RecordRefused(_reason(exc)) from exc
            except DBAPIError as exc:
                if _is_disconnect(exc):
                    raise
                raise WriteRefused(_reason(exc)) from exc

    def runs(self, *, tenant: str | None, limit: int, offset: int) -> RunsPage:
        """A page of the runs of ``tenant`` (None: of every tenant), oldest first: by their
        first episode's creation, then by label, then by tenant, so that equal times still
        give one order and every page its own runs. A run is a label of one tenant: two
        tenants' ``eval`` are two runs."""
        labelled = _scoped(ArchivedEpisode.run.is_not(None), tenant)
        first_created = func.min(ArchivedEpisode.created_at)
        query = (
            select(
                ArchivedEpisode.tenant,
                ArchivedEpisode.run,
                func.count(),
                first_created,
                func.max(ArchivedEpisode.finished_at),
            )
            .where(*labelled)
            .group_by(ArchivedEpisode.tenant, ArchivedEpisode.run)
            .order_by(first_created, ArchivedEpisode.run, ArchivedEpisode.tenant.nulls_first())
            .limit(limit)
            .offset(offset)
        )
        runs = select(ArchivedEpisode.tenant, ArchivedEpisode.run).where(*labelled).distinct()
        count = select(func.count()).select_from(runs.subquery())
        no_label = select(func.count()).where(*_scoped(ArchivedEpisode.run.is_(None), tenant))
        with self._available(), self.engine.connect() as connection:
            total = connection.execute(count).scalar_one()
            unlabelled = connection.execute(no_label).scalar_one()
            rows = connection.execute(query).all()
            envs: dict[tuple[str | None, str], list[str]] = {}
            if rows:
                on_page = ArchivedEpisode.run.in_(sorted({run for _, run, *_ in rows}))
                triples = (
                    select(ArchivedEpisode.tenant, ArchivedEpisode.run, ArchivedEpisode.env)
                    .where(on_page, *labelled)
                    .distinct()
                )
                for owner, run, env in connection.execute(triples):
                    envs.setdefault((owner, run), []).append(env)
        page = [
            RunInfo(
                run=run,
                tenant=owner,
                episodes=episodes,
                envs=sorted(envs[owner, run]),
                first_created_at=utc(first),
                last_finished_at=utc(last),
            )
            for owner, run, episodes, first, last in rows
        ]
        return RunsPage(
            total=total, limit=limit, offset=offset, runs=page, tenant=tenant,
            unlabelled=unlabelled,
        )  # fmt: skip

    def summary(self, run: str, *, tenant: str | None) -> RunSummary:
        """The summary of ``tenant``'s run ``run``; with ``tenant`` None, of the episodes
        of every tenant with that label. ``RunNotFound`` when there is none."""
        query = select(
            ArchivedEpisode.env,
            ArchivedEpisode.status,
            ArchivedEpisode.total_reward,
            ArchivedEpisode.components,
            ArchivedEpisode.metrics,
            ArchivedEpisode.created_at,
            ArchivedEpisode.finished_at,
        ).where(*_in_run(run, tenant))
        done = RunAggregate()
        statuses: dict[str, int] = {}
        envs: dict[str, int] = {}
        first: datetime | None = None
        last: datetime | None = None
        with self._available(), self.engine.connect() as connection:
            rows = connection.execution_options(yield_per=1000).execute(query)
            for env, status, total, components, metrics, created, finished in rows:
                statuses[status] = statuses.get(status, 0) + 1
                envs[env] = envs.get(env, 0) + 1
                first = created if first is None else min(first, created)
                if finished is not None:
                    last = finished if last is None else max(last, finished)
                if status == "done":
                    done.add(total, components, metrics)
        if first is None:
            raise _run_not_found(run)
        return RunSummary(
            run=run,
            tenant=tenant,
            episodes=sum(statuses.values()),
            statuses=statuses,
            envs=envs,
            first_created_at=utc(first),
            last_finished_at=utc(last),
            reward=done.reward(),
            components=done.component_means(),
            metrics=done.metric_summaries(),
        )

    def require_run(self, run: str, *, tenant: str | None) -> None:
        """Raise ``RunNotFound`` unless some archived episode of ``tenant`` (None: of any
        tenant) has the label ``run``: another tenant's run reads as an unknown one."""
        query = select(ArchivedEpisode.id).where(*_in_run(run, tenant)).limit(1)
        with self._available(), self.engine.connect() as connection:
            if connection.execute(query).first() is None:
                raise _run_not_found(run)

    def episodes(
        self, run: str, filters: EpisodeFilter, *, tenant: str | None, limit: int, offset: int
    ) -> ArchivedEpisodesPage:
        """A page of the episodes of ``tenant``'s run ``run`` (None: every tenant's) that
        match ``filters``, oldest first."""
        matching = filters.apply(select(ArchivedEpisode).where(*_in_run(run, tenant)))
        count = select(func.count()).select_from(matching.subquery())
        page = _ordered(matching).limit(limit).offset(offset)
        with self._available(), Session(self.engine) as session:
            total = session.execute(count).scalar_one()
            episodes = [_record(episode) for episode in session.scalars(page)]
        return ArchivedEpisodesPage(
            run=run, total=total, limit=limit, offset=offset, episodes=episodes
        )

    def episode(self, episode_id: str, *, tenant: str | None) -> EpisodeRecord | None:
        """The archived episode ``episode_id`` of ``tenant`` (None: of any tenant), or None:
        another tenant's episode reads as an unknown one."""
        query = select(ArchivedEpisode).where(*_scoped(ArchivedEpisode.id == episode_id, tenant))
        with self._available(), Session(self.engine) as session:
            episode = session.scalars(query).first()
            return None if episode is None else _record(episode)

    def transcripts(self, run: str, filters: EpisodeFilter, *, tenant: str | None) -> Iterator[str]:
        """JSON lines ``{"messages": [...]}``, one per matching episode of ``tenant``'s run
        (None: every tenant's), ending on the model's last message: a chat dataset for SFT."""
        query = _ordered(
            filters.apply(select(ArchivedEpisode.messages).where(*_in_run(run, tenant)))
        )
        with self._available(), self.engine.connect() as connection:
            for (messages,) in connection.execution_options(yield_per=500).execute(query):
                yield json.dumps({"messages": _through_last_assistant(messages)}) + "\n"

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A connection in a transaction, committed when the block ends without error:
        for the archive's other tables (``KeyBook``). ``DatabaseUnavailable`` when the
        database cannot be reached, or lacks a table (it is not migrated)."""
        with self._available():
            try:
                with self.engine.begin() as connection:
                    yield connection
            except (ProgrammingError, OperationalError) as exc:
                if not _missing_table(exc):
                    raise
                raise DatabaseUnavailable(
                    f"the archive database is not migrated (run `wander db upgrade`): {exc.orig}"
                ) from exc

    @contextmanager
    def _available(self) -> Iterator[None]:
        try:
            yield
        except DBAPIError as exc:
            if _is_disconnect(exc):
                raise DatabaseUnavailable(
                    f"the archive database is unreachable: {exc.orig}"
                ) from exc
            raise


def _upsert_statement(dialect: str) -> Any:
    """``INSERT ... ON CONFLICT (id) DO UPDATE``, built once and sent with many rows."""
    table = ArchivedEpisode.__table__
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    statement = insert(table)
    return statement.on_conflict_do_update(
        index_elements=[table.c.id],
        set_={c.name: statement.excluded[c.name] for c in table.c if c.name != "id"},
    )


def _scoped(condition: ColumnElement[bool], tenant: str | None) -> list[ColumnElement[bool]]:
    """``condition``, and the rows of ``tenant`` only unless it is None (every tenant)."""
    return [condition] if tenant is None else [condition, ArchivedEpisode.tenant == tenant]


def _in_run(run: str, tenant: str | None) -> list[ColumnElement[bool]]:
    return _scoped(ArchivedEpisode.run == run, tenant)


def _run_not_found(run: str) -> RunNotFound:
    return RunNotFound(f"no archived episode has the run label {run!r}")


def _missing_table(exc: DBAPIError) -> bool:
    """PostgreSQL's ``undefined_table`` (SQLSTATE 42P01), or SQLite's "no such table"."""
    return getattr(exc.orig, "sqlstate", None) == "42P01" or "no such table" in str(exc.orig)


def _is_disconnect(exc: DBAPIError) -> bool:
    return exc.connection_invalidated or isinstance(exc, OperationalError | InterfaceError)


def _reason(exc: DBAPIError) -> str:
    """The database's own words, on one line and bounded; never the statement or its
    parameters, which SQLAlchemy's message carries (a whole episode)."""
    reason = " ".join(str(exc.orig).split())
    text = f"{type(exc.orig).__name__}: {reason}"
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 1] + "…"


def _ordered(query: Select[Any]) -> Select[Any]:
    return query.order_by(ArchivedEpisode.created_at, ArchivedEpisode.id)


def _through_last_assistant(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    return messages[: last + 1]


def utc(moment: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes; everything the archive stores is UTC."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


def _row(record: EpisodeRecord) -> dict[str, Any]:
    score = record.score
    return {
        "id": record.id,
        "tenant": record.tenant,
        "env": record.env,
        "env_version": record.version,
        "config": record.config,
        "split": record.split,
        "example": record.example,
        "seed": record.seed,
        "group_id": record.group,
        "run": record.run,
        "status": record.status,
        "turns": record.turn,
        "messages": [m.model_dump(mode="json") for m in record.messages],
        "step_rewards": record.step_rewards,
        "total_reward": score.total,
        "components": score.components,
        "weights": score.weights,
        "metrics": score.metrics,
        "outcome": score.outcome,
        "metadata": record.metadata,
        "state": record.state,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "finished_at": record.finished_at,
        "archived_at": datetime.now(UTC),
    }


def _record(episode: ArchivedEpisode) -> EpisodeRecord:
    return EpisodeRecord(
        id=episode.id,
        tenant=episode.tenant,
        env=episode.env,
        version=episode.env_version,
        split=episode.split,
        example=episode.example,
        seed=episode.seed,
        group=episode.group_id,
        run=episode.run,
        metadata=episode.meta,
        config=episode.config,
        turn=episode.turns,
        done=True,
        status=episode.status,  # type: ignore[arg-type]
        messages=episode.messages,  # type: ignore[arg-type]
        step_rewards=episode.step_rewards,
        score=Score(
            episode_id=episode.id,
            done=True,
            total=episode.total_reward,
            components=episode.components,
            weights=episode.weights,
            metrics=episode.metrics,
            outcome=episode.outcome,
        ),
        state=episode.state,
        created_at=utc(episode.created_at),  # type: ignore[arg-type]
        updated_at=utc(episode.updated_at),  # type: ignore[arg-type]
        finished_at=utc(episode.finished_at),
    )
