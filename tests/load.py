"""Load for fault tests: agents playing tic-tac-toe through the project's client, with its
retries, and an account of every request sent and every episode the clients saw finish.

The account is the client's side of the story: an episode counts as finished when the
response of its last step reached the agent. Whatever the service went through, each of
those must be in the archive exactly once, with the turns the agent played.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

import httpx
import sqlalchemy

from tests.agents import random_agent
from wander.client import (
    AsyncWanderClient,
    Retry,
    ServiceUnavailable,
    StepResult,
    WanderAPIError,
    WanderConnectionError,
)
from wander.service.archive.tables import ArchivedEpisode

T = TypeVar("T")

PATIENT = Retry(attempts=8, backoff_seconds=0.2, max_backoff_seconds=2.0)
"""The client's own retries, a little more patient than its default: a restarting
service takes a few seconds to listen again."""


@dataclass
class Traffic:
    """Every request the agents sent, as the wire saw it (each retry is a request)."""

    requests: int = 0
    unanswered: int = 0
    """Requests that got no response: connection refused or cut."""
    statuses: Counter[int] = field(default_factory=Counter)
    server_errors: Counter[str] = field(default_factory=Counter)
    """5xx responses by ``"status code"``, e.g. ``"503 store_unavailable"``."""

    @property
    def refused(self) -> int:
        """5xx responses."""
        return sum(self.server_errors.values())

    def copy(self) -> Traffic:
        return Traffic(
            self.requests, self.unanswered, Counter(self.statuses), Counter(self.server_errors)
        )

    def __sub__(self, earlier: Traffic) -> Traffic:
        """What was sent since ``earlier`` (a copy of this account, taken then)."""
        return Traffic(
            self.requests - earlier.requests,
            self.unanswered - earlier.unanswered,
            self.statuses - earlier.statuses,
            self.server_errors - earlier.server_errors,
        )


class CountingTransport(httpx.AsyncBaseTransport):
    """httpx's transport, counting what it sends and what comes back into ``traffic``."""

    def __init__(self, traffic: Traffic) -> None:
        self.traffic = traffic
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.traffic.requests += 1
        try:
            response = await self._inner.handle_async_request(request)
        except httpx.TransportError:
            self.traffic.unanswered += 1
            raise
        self.traffic.statuses[response.status_code] += 1
        if response.status_code >= 500:
            await response.aread()
            self.traffic.server_errors[f"{response.status_code} {_code(response)}"] += 1
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def _code(response: httpx.Response) -> str:
    try:
        return str(response.json()["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return "(not the error envelope)"


@dataclass
class Players:
    """``agents`` clients playing games of ``run`` until ``stop`` is set, each finishing
    the game it is in first; every call goes through the client's retries, and a call
    that still fails (the service was away longer) is sent again after a pause."""

    url: str
    run: str
    agents: int = 8
    traffic: Traffic = field(default_factory=Traffic)
    finished: dict[str, int] = field(default_factory=dict)
    """Episodes the agents saw finish, and how many turns each took."""
    broken: dict[str, str] = field(default_factory=dict)
    """Episodes a step failed for good, and the error ("404 episode_not_found": the
    store lost it); the agent starts another game."""
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def play(self) -> None:
        transport = CountingTransport(self.traffic)
        async with AsyncWanderClient(self.url, retry=PATIENT, transport=transport) as client:
            await asyncio.gather(*(self._agent(client, seed) for seed in range(self.agents)))

    async def _agent(self, client: AsyncWanderClient, seed: int) -> None:
        agent = random_agent(seed)
        for example in _examples(seed):
            if self.stop.is_set():
                return
            create = functools.partial(client.create, "tictactoe", example=example, run=self.run)
            [episode] = await _persist(create)
            try:
                while not episode.done:
                    # The handle keeps its turn until a step is answered: a step sent again
                    # is the same request, which the service applies at most once.
                    await _persist(functools.partial(episode.step, agent(episode.info["board"])))
            except WanderAPIError as error:
                self.broken[episode.id] = f"{error.status} {error.code}"
            else:
                self.finished[episode.id] = episode.turn


@dataclass
class BatchPlayers:
    """``clients`` clients, each keeping ``width`` games of ``run`` live and stepping all
    of them in one ``POST /v1/step`` per turn (a trainer's rollout, or a batch evaluator),
    starting a group of new games for those that end, until ``stop`` is set."""

    url: str
    run: str
    clients: int = 4
    width: int = 64
    traffic: Traffic = field(default_factory=Traffic)
    finished: dict[str, int] = field(default_factory=dict)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def play(self) -> None:
        transport = CountingTransport(self.traffic)
        async with AsyncWanderClient(self.url, retry=PATIENT, transport=transport) as client:
            await asyncio.gather(*(self._client(client, seed) for seed in range(self.clients)))

    async def _client(self, client: AsyncWanderClient, seed: int) -> None:
        agent, examples = random_agent(seed), _examples(seed)
        live: dict[str, tuple[int, str]] = {}  # episode -> (turn, board)
        while not self.stop.is_set():
            if len(live) < self.width:
                create = functools.partial(
                    client.create, "tictactoe", example=next(examples), run=self.run,
                    n=self.width - len(live),
                )  # fmt: skip
                for episode in await _persist(create):
                    live[episode.id] = (episode.turn, episode.info["board"])
            steps = [
                {"episode_id": episode_id, "turn": turn, "action": agent(board)}
                for episode_id, (turn, board) in live.items()
            ]
            for result in await _persist(functools.partial(client.step_many, steps)):
                if isinstance(result, StepResult):
                    if result.done:
                        del live[result.episode_id]
                        self.finished[result.episode_id] = result.turn
                    else:
                        live[result.episode_id] = (result.turn, result.info["board"])


def _examples(seed: int) -> Iterator[int]:
    """Examples for one agent, each agent from a different one."""
    return (example % 1000 for example in itertools.count(seed * 37))


async def _persist(call: Callable[[], Awaitable[T]]) -> T:
    """``call()``, sent again for as long as the service stays unreachable or unavailable."""
    while True:
        try:
            return await call()
        except (WanderConnectionError, ServiceUnavailable):
            await asyncio.sleep(0.5)


@dataclass(frozen=True)
class Account:
    """What the clients saw finish against what the archive holds."""

    finished: int
    archived: int
    lost: list[str]
    """Finished, as a client saw it, and not archived."""
    duplicated: list[str]
    """Archived more than once, or with more turns than the client played (a step
    applied twice)."""
    unseen: int
    """Archived, though no client saw them finish (the last answer was lost)."""


def account(finished: dict[str, int], database_url: str, run: str) -> Account:
    """Compare ``finished`` with the rows of ``run`` in the archive, read from its table
    directly: every row, whatever the archive's queries show."""
    engine = sqlalchemy.create_engine(database_url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                sqlalchemy.select(ArchivedEpisode.id, ArchivedEpisode.turns).where(
                    ArchivedEpisode.run == run
                )
            ).all()
    finally:
        engine.dispose()
    ids = Counter(episode_id for episode_id, _ in rows)
    turns = dict(rows)
    return Account(
        finished=len(finished),
        archived=len(ids),
        lost=sorted(set(finished) - set(ids)),
        duplicated=sorted(
            i for i, n in ids.items() if n > 1 or (i in finished and turns[i] != finished[i])
        ),
        unseen=len(set(ids) - set(finished)),
    )
