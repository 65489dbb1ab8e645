"""Retries rely on turn idempotency: a step whose answer was lost applies once."""

from __future__ import annotations

from typing import Literal

import httpx
import pytest
from starlette.types import ASGIApp

from tests.agents import answer
from wander.client import (
    AsyncWanderClient,
    QuotaExceeded,
    RateLimited,
    Retry,
    ServiceUnavailable,
    WanderClient,
    WanderConnectionError,
)
from wander.testing import ServiceProcess

FAST = Retry(attempts=4, backoff_seconds=0.01)
Fault = Literal["drop", "unavailable"]


class Faulty(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """Passes requests on, but the first ``times`` to a path ending in ``suffix`` fail:
    ``drop`` lets the request through and loses the answer (the connection dropped
    after the service applied it); ``unavailable`` answers 503 without passing it on."""

    def __init__(
        self,
        inner: httpx.BaseTransport | httpx.AsyncBaseTransport,
        suffix: str,
        fault: Fault,
        times: int = 1,
    ) -> None:
        self.inner, self.suffix, self.fault, self.times = inner, suffix, fault, times
        self.passed_on = 0

    def _fault(self, request: httpx.Request) -> Fault | None:
        if request.url.path.endswith(self.suffix) and self.times > 0:
            self.times -= 1
            return self.fault
        return None

    def _unavailable(self) -> httpx.Response:
        error = {"code": "store_unavailable", "message": "down", "details": None}
        return httpx.Response(503, headers={"Retry-After": "0"}, json={"error": error})

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        fault = self._fault(request)
        if fault == "unavailable":
            return self._unavailable()
        self.passed_on += request.url.path.endswith(self.suffix)
        response = self.inner.handle_request(request)  # type: ignore[union-attr]
        if fault == "drop":
            response.read()
            raise httpx.ReadError("connection dropped before the answer", request=request)
        return response

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        fault = self._fault(request)
        if fault == "unavailable":
            return self._unavailable()
        self.passed_on += request.url.path.endswith(self.suffix)
        response = await self.inner.handle_async_request(request)  # type: ignore[union-attr]
        if fault == "drop":
            await response.aread()
            raise httpx.ReadError("connection dropped before the answer", request=request)
        return response


def test_a_lost_answer_to_a_step_is_recovered_and_applied_once(live: ServiceProcess) -> None:
    faulty = Faulty(httpx.HTTPTransport(), "/step", "drop")
    with WanderClient(live.url, transport=faulty, retry=FAST) as wander:
        [episode] = wander.create("tictactoe", example=2)
        result = episode.step(answer(4))
        assert faulty.passed_on == 2  # the original, then the retry
        assert result.turn == 1
        record = wander.episode(episode.id)
    assert record.turn == 1
    assert [m.role for m in record.messages] == ["system", "user", "assistant", "user"]
    assert record.messages[-1] == result.observation[0]


async def test_the_async_client_recovers_a_lost_answer_too(app: ASGIApp) -> None:
    faulty = Faulty(httpx.ASGITransport(app=app), "/v1/step", "drop")
    async with AsyncWanderClient("http://t", transport=faulty, retry=FAST) as wander:
        group = await wander.create("tictactoe", example=2, n=2)
        steps = [{"episode_id": ep.id, "action": answer(4), "turn": 0} for ep in group]
        results = await wander.step_many(steps)
        assert faulty.passed_on == 2
        assert [r.turn for r in results] == [1, 1]  # type: ignore[union-attr]
        assert [(await wander.episode(ep.id)).turn for ep in group] == [1, 1]


def test_503_is_retried_and_then_applied(live: ServiceProcess) -> None:
    faulty = Faulty(httpx.HTTPTransport(), "/v1/episodes", "unavailable", times=2)
    with WanderClient(live.url, transport=faulty, retry=FAST) as wander:
        group = wander.create("tictactoe", example=1, n=3)  # not idempotent, yet safe on 503
    assert len(group) == 3 and faulty.passed_on == 1


def test_retries_give_up_with_the_last_error(live: ServiceProcess) -> None:
    faulty = Faulty(httpx.HTTPTransport(), "/score", "unavailable", times=99)
    with WanderClient(live.url, transport=faulty, retry=FAST) as wander:
        [episode] = wander.create("tictactoe", example=1)
        with pytest.raises(ServiceUnavailable):
            episode.score(partial=True)
    assert faulty.times == 99 - FAST.attempts


@pytest.mark.parametrize("suffix", ["/v1/episodes", "/step"])
def test_requests_that_could_apply_twice_are_not_resent(live: ServiceProcess, suffix: str) -> None:
    faulty = Faulty(httpx.HTTPTransport(), suffix, "drop", times=0)
    with WanderClient(live.url, transport=faulty, retry=FAST) as wander:
        [episode] = wander.create("tictactoe", example=1)
        faulty.times = 1
        with pytest.raises(WanderConnectionError):
            if suffix == "/step":
                wander.step(episode.id, answer(4))  # no turn: a resend could apply twice
            else:
                wander.create("tictactoe", example=1)
    assert faulty.passed_on == 1 + (suffix == "/v1/episodes")


def test_an_unreachable_service_is_a_connection_error() -> None:
    with (
        WanderClient("http://127.0.0.1:9", retry=FAST) as wander,
        pytest.raises(WanderConnectionError),
    ):
        wander.environments()


def too_many(retry_after: str | None) -> httpx.Response:
    """The service's 429s: ``rate_limited`` says when to come back, ``quota_exceeded`` not."""
    code = "quota_exceeded" if retry_after is None else "rate_limited"
    headers = {} if retry_after is None else {"Retry-After": retry_after}
    return httpx.Response(429, headers=headers, json={"error": {"code": code, "message": "no"}})


CREATED = {"episodes": []}


class Refusing(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """Answers the first ``times`` requests with ``refusal``, then 201 with no episodes."""

    def __init__(self, refusal: httpx.Response, times: int) -> None:
        self.refusal, self.times, self.sent = refusal, times, 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        return self.refusal if self.sent <= self.times else httpx.Response(201, json=CREATED)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return self.handle_request(request)


def test_a_rate_limited_create_is_sent_again_after_retry_after() -> None:
    """``rate_limited`` applied nothing, so even a create (not idempotent) is resent."""
    refusing = Refusing(too_many("0"), times=2)
    with WanderClient("http://t", transport=refusing, retry=FAST) as wander:
        assert wander.create("tictactoe") == []
    assert refusing.sent == 3


async def test_the_async_client_raises_rate_limited_once_its_retries_are_spent() -> None:
    refusing = Refusing(too_many("0"), times=99)
    async with AsyncWanderClient("http://t", transport=refusing, retry=FAST) as wander:
        with pytest.raises(RateLimited) as raised:
            await wander.create("tictactoe")
    assert refusing.sent == FAST.attempts
    assert (raised.value.status, raised.value.code) == (429, "rate_limited")


@pytest.mark.parametrize("method", ["create", "score"])  # one not idempotent, one idempotent
def test_a_429_without_retry_after_is_raised_at_once(method: str) -> None:
    """``quota_exceeded``: the quota frees when episodes end, not when time passes."""
    refusing = Refusing(too_many(None), times=1)
    with (
        WanderClient("http://t", transport=refusing, retry=FAST) as wander,
        pytest.raises(QuotaExceeded) as raised,
    ):
        wander.create("tictactoe") if method == "create" else wander.score("ep_1")
    assert refusing.sent == 1
    assert (raised.value.status, raised.value.code) == (429, "quota_exceeded")


async def test_the_async_client_raises_quota_exceeded_at_once_too() -> None:
    refusing = Refusing(too_many(None), times=1)
    async with AsyncWanderClient("http://t", transport=refusing, retry=FAST) as wander:
        with pytest.raises(QuotaExceeded):
            await wander.score("ep_1")
    assert refusing.sent == 1


def backlogged() -> httpx.Response:
    error = {"code": "archive_backlog", "message": "wait", "details": {"backlog": 3, "limit": 2}}
    return httpx.Response(503, headers={"Retry-After": "0"}, json={"error": error})


def test_a_patient_client_waits_out_what_the_service_asks_it_to_wait_for() -> None:
    """``waits``: attempts beyond ``attempts`` for answers with ``Retry-After`` only (the
    service is up and asks for time); others give up after ``attempts``."""
    patient = Retry(attempts=2, backoff_seconds=0.01, waits=10)
    refusing = Refusing(backlogged(), times=8)
    with WanderClient("http://t", transport=refusing, retry=patient) as wander:
        assert wander.create("tictactoe") == []
    assert refusing.sent == 9
    refusing = Refusing(backlogged(), times=99)
    with (
        WanderClient("http://t", transport=refusing, retry=patient) as wander,
        pytest.raises(ServiceUnavailable),
    ):
        wander.create("tictactoe")
    assert refusing.sent == 12  # attempts + waits
    silent = Refusing(httpx.Response(503), times=99)  # no Retry-After: attempts only
    with (
        WanderClient("http://t", transport=silent, retry=patient) as wander,
        pytest.raises(ServiceUnavailable),
    ):
        wander.score("ep_1")
    assert silent.sent == 2
