"""What the client says when the service cannot be reached: where it looked, and why."""

from __future__ import annotations

import httpx
import pytest

from wander.client import (
    NO_RETRY,
    AsyncWanderClient,
    Forbidden,
    QuotaExceeded,
    RateLimited,
    Unauthorized,
    WanderAPIError,
    WanderClient,
)
from wander.client.errors import WanderConnectionError
from wander.client.retry import Retry
from wander.testing import free_port

QUICK = Retry(attempts=2, backoff_seconds=0.01)


def test_the_blocking_client_names_the_url_it_tried() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with WanderClient(url + "/", retry=QUICK) as wander, pytest.raises(WanderConnectionError) as e:
        wander.environments()
    assert str(e.value) == (
        f"cannot reach the Wander service at {url}: Connection refused "
        "(GET /v1/environments, tried 2 times)"
    )
    assert e.value.url == url


async def test_the_async_client_names_the_url_it_tried() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    async with AsyncWanderClient(url, retry=QUICK) as wander:
        with pytest.raises(WanderConnectionError) as e:
            await wander.create("tictactoe")
    # asyncio reports "All connection attempts failed"; the reason underneath is given
    assert str(e.value) == (
        f"cannot reach the Wander service at {url}: Connection refused "
        "(POST /v1/episodes, tried 2 times)"
    )


def test_a_password_in_the_url_is_not_repeated(monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()
    monkeypatch.setenv("WANDER_URL", f"http://agent:s3cret@127.0.0.1:{port}")
    with WanderClient(retry=QUICK) as wander, pytest.raises(WanderConnectionError) as e:
        wander.runs()
    assert e.value.url == f"http://agent:***@127.0.0.1:{port}"
    assert "s3cret" not in str(e.value)


@pytest.mark.parametrize(
    ("status", "code", "raised"),
    [
        (401, "unauthorized", Unauthorized),
        (403, "forbidden", Forbidden),
        (429, "rate_limited", RateLimited),
        (429, "quota_exceeded", QuotaExceeded),
        (401, None, Unauthorized),  # a proxy's answer, without the service's body
        (403, None, Forbidden),
        (429, None, RateLimited),
    ],
)
def test_refusals_of_a_key_are_typed(status: int, code: str | None, raised: type) -> None:
    """Each refusal has its class (exported by ``wander.client``), so a caller can tell a
    missing key from a role too low, a rate to wait for and a quota to free."""
    body = {"error": {"code": code, "message": "no", "details": None}} if code else None

    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json=body) if body else httpx.Response(status, text="no")

    transport = httpx.MockTransport(refuse)
    with (
        WanderClient("http://t", transport=transport, retry=NO_RETRY) as wander,
        pytest.raises(WanderAPIError) as error,
    ):
        wander.runs()
    assert type(error.value) is raised
    assert (error.value.status, error.value.code) == (status, code or f"http_{status}")
