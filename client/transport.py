"""Sending a ``Call`` with retries, blocking or awaited."""

from __future__ import annotations

import asyncio
import os
import time
from typing import TypeVar

import httpx

from wander.client._api import Call
from wander.client.errors import WanderConnectionError
from wander.client.retry import Retry

T = TypeVar("T")


def unreachable(
    base_url: httpx.URL, request: str, error: Exception, attempts: int = 1
) -> WanderConnectionError:
    """The error for a ``request`` ("GET /v1/...") that got no answer: where, why, how often."""
    tries = "once" if attempts == 1 else f"{attempts} times"
    reason = f"{describe(error)} ({request}, tried {tries})"
    return WanderConnectionError(display_url(base_url), reason)


def describe(error: BaseException) -> str:
    """Why a request got no answer: the operating system's words where it has some
    ("Connection refused", "Name or service not known"; asyncio's connect wraps them in
    "All connection attempts failed"), else the error's message, else its class."""
    root = error
    while (cause := root.__cause__ or root.__context__) is not None:
        root = cause
    if isinstance(root, OSError) and root.errno is not None and root.errno > 0:
        return os.strerror(root.errno)
    if isinstance(root, OSError) and root.strerror:
        return root.strerror
    return str(error) or type(error).__name__


def display_url(url: httpx.URL) -> str:
    """``url`` as the user wrote it, without a trailing slash or a password."""
    if url.password:
        url = url.copy_with(username=url.username, password="***")
    return str(url).rstrip("/")


def send(http: httpx.Client, call: Call[T], retry: Retry) -> T:
    attempt = 0
    while True:
        try:
            response = http.request(call.method, call.path, json=call.json, params=call.params)
        except httpx.TransportError as error:
            delay = retry.delay(call, attempt, error=error)
            if delay is None:
                request = f"{call.method} {call.path}"
                raise unreachable(http.base_url, request, error, attempt + 1) from error
        else:
            delay = retry.delay(call, attempt, response=response)
            if delay is None:
                return call.result(response)
        time.sleep(delay)
        attempt += 1


async def asend(http: httpx.AsyncClient, call: Call[T], retry: Retry) -> T:
    attempt = 0
    while True:
        try:
            response = await http.request(
                call.method, call.path, json=call.json, params=call.params
            )
        except httpx.TransportError as error:
            delay = retry.delay(call, attempt, error=error)
            if delay is None:
                request = f"{call.method} {call.path}"
                raise unreachable(http.base_url, request, error, attempt + 1) from error
        else:
            delay = retry.delay(call, attempt, response=response)
            if delay is None:
                return call.result(response)
        await asyncio.sleep(delay)
        attempt += 1
