"""reasoning-gym options are bounded by each dataset's safe ranges.

Options pass through to a dataset's generator, whose cost grows with them: before the
bounds, ``max_n=10**6`` or ``train_size=10**7`` froze the service or gave a 500. Each
option is now bounded by its curriculum's range, or a small multiple of its default
(``service/envs/rg_bounds.py``), published in the config schema and checked before
any generator runs. How long refusals and plays take, and what the attack does to a
light client's latency, is measured by ``python -m bench.timings``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from reasoning_gym.factory import CURRICULA, DATASETS

from tests.helpers import IN_THE_SHARED_LOOP, error_of, fork_servers
from wander.service.archive.migrations import upgrade
from wander.service.envs.rg_bounds import HEADROOM
from wander.testing import ServiceProcess, light_client, oversized_rg_configs

SHARED_SERVICE = True
pytestmark = IN_THE_SHARED_LOOP

DEADLINE = 2.0
REFUSED = {"validation_error", "env_timeout", "env_failed", "env_error"}
"""The documented answers to a config too heavy to play."""


async def published(api: httpx.AsyncClient, dataset: str) -> dict[str, Any]:
    """The bounds of ``rg/<dataset>``'s options, as its config schema publishes them."""
    info = (await api.get(f"/v1/environments/rg/{dataset}")).json()
    properties: dict[str, Any] = info["config_schema"]["properties"]["options"]["properties"]
    return properties


def default_of(dataset: str, option: str) -> Any:
    field = next(f for f in dataclasses.fields(DATASETS[dataset][1]) if f.name == option)
    return field.default


async def test_a_curriculum_bounds_its_options_by_its_range(api: httpx.AsyncClient) -> None:
    attribute = next(
        a
        for a in CURRICULA["count_primes"]().attributes.values()
        if getattr(a, "upper_field_name", None) == "max_n"
    )
    levels = [*attribute.levels, default_of("count_primes", "max_n")]
    bounds = await published(api, "count_primes")
    assert bounds["max_n"] == {"type": "integer", "minimum": min(levels), "maximum": max(levels)}


async def test_an_option_without_a_curriculum_is_bounded_by_its_default(
    api: httpx.AsyncClient,
) -> None:
    year = default_of("calendar_arithmetic", "year")
    bounds = await published(api, "calendar_arithmetic")
    assert bounds["year"] == {"type": "integer", "minimum": 0, "maximum": HEADROOM * year}
    assert bounds["leap_year_range"]["maximum"] == HEADROOM * 200
    operators = (await published(api, "basic_arithmetic"))["operators"]
    assert operators["type"] == "array" and operators["items"]["type"] == "string"


@pytest.mark.parametrize(
    ("dataset", "options", "named"),
    [
        ("count_primes", {"max_n": 10**6}, "an integer from 10 to 100000"),
        ("count_primes", {"max_n": "100"}, "an integer"),
        ("count_primes", {"max_n": 100.5}, "an integer"),
        ("count_primes", {"max_n": True}, "an integer"),
        ("calendar_arithmetic", {"year": 10**9}, f"from 0 to {HEADROOM * 2022}"),
        ("basic_arithmetic", {"operators": ["+"] * 1000}, "a list of at most"),
        ("figlet_font", {"static_word": "w" * 10_000}, "bytes of JSON"),
    ],
)
async def test_an_option_past_its_bound_is_refused_before_anything_runs(
    api: httpx.AsyncClient, dataset: str, options: dict[str, Any], named: str
) -> None:
    response = await api.post(
        "/v1/episodes", json={"env": f"rg/{dataset}", "config": {"options": options}}
    )
    assert response.status_code == 422, response.text
    error = error_of(response)
    assert error["code"] == "validation_error"
    [detail] = error["details"]
    [option] = options
    assert detail["type"] == "option_out_of_bounds"
    assert detail["loc"] == ["body", "config"]
    assert f"option {option} of {dataset} must be" in detail["msg"] and named in detail["msg"]
    assert fork_servers(os.getpid()) == []  # no environment code ran: no worker was started


async def test_a_dataset_that_builds_its_split_whole_has_smaller_splits(
    api: httpx.AsyncClient,
) -> None:
    """acre builds every question of a split when created: 10,000 in ~3 s."""
    schema = (await api.get("/v1/environments/rg/acre")).json()["config_schema"]
    assert schema["properties"]["train_size"]["maximum"] == 10_000
    response = await api.post(
        "/v1/episodes", json={"env": "rg/acre", "config": {"eval_size": 10**7}}
    )
    assert response.status_code == 422, response.text
    assert error_of(response)["details"][0]["loc"] == ["body", "config", "eval_size"]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    database = f"sqlite:///{tmp_path_factory.mktemp('rg-bounds')}/archive.db"
    upgrade(database)
    env = {"WANDER_DATABASE_URL": database, "WANDER_REDIS_URL": ""}
    # Eight attacks at a time share two workers: they queue for them, rather than get
    # 503 env_busy (what queueing past WANDER_ENV_WAIT_SECONDS answers: test_sandbox).
    limits = {"WANDER_ENV_CALL_SECONDS": str(DEADLINE), "WANDER_ENV_WAIT_SECONDS": "120"}
    process = ServiceProcess({**env, **limits}).start()
    yield process
    process.stop()


async def test_oversized_configs_are_refused_while_others_are_served(
    client: httpx.AsyncClient,
) -> None:
    attacks = [(d, c) for d, c in oversized_rg_configs() if d != "composite"]  # not offered
    limits = {dataset: await published(client, dataset) for dataset, _ in attacks}
    gate = asyncio.Semaphore(8)

    async def attack(dataset: str, config: dict[str, Any]) -> httpx.Response:
        async with gate:
            body = {"env": f"rg/{dataset}", "config": config, "example": 0}
            return await client.post("/v1/episodes", json=body)

    stop = asyncio.Event()
    light = asyncio.create_task(light_client(client, stop))
    answers = await asyncio.gather(*(attack(dataset, config) for dataset, config in attacks))
    stop.set()
    latencies = await light

    past_bounds = 0
    for (dataset, config), response in zip(attacks, answers, strict=True):
        assert response.status_code in (201, 422), (dataset, config, response.text)
        if response.status_code == 422:
            assert error_of(response)["code"] in REFUSED, (dataset, response.text)
        beyond = [
            option
            for option, value in config.get("options", {}).items()
            if value > limits[dataset][option]["maximum"]
        ]
        for option in beyond:
            assert error_of(response)["code"] == "validation_error", (dataset, option)
            assert f"option {option} of {dataset}" in response.text
        past_bounds += bool(beyond)
    assert past_bounds > 90  # most of the ~100 attacks never reach a generator
    # The light client played through the attack, every answer as expected (light_client
    # checks each): served, not frozen out. Its latency is a number for the benchmark.
    assert latencies
