"""Sending a ``Call`` with retries, blocking or awaited."""

from __future__ import annotations

import asyncio
import time
from typing import TypeVar

import httpx
from wander.client._api import Call
from wander.client.errors import WanderConnectionError
from wander.client.retry import Retry

T = TypeVar("T")


def send(http: httpx.Client, call: Call[T], retry: Retry) -> T:
    attempt = 0
    while True:
        try:
            response = http.request(call.method, call.path, json=call.json, params=call.params)
        except httpx.TransportError as error:
            delay = retry.delay(call, attempt, error=error)
            if delay is None:
                raise WanderConnectionError(f"{call.method} {call.path}: {error!r}") from error
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
                raise WanderConnectionError(f"{call.method} {call.path}: {error!r}") from error
        else:
            delay = retry.delay(call, attempt, response=response)
            if delay is None:
                return call.result(response)
        await asyncio.sleep(delay)
        attempt += 1
