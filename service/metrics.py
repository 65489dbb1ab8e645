"""Prometheus metrics of the service (exposed at ``/metrics``).

With several ``wander serve`` workers, set ``PROMETHEUS_MULTIPROC_DIR`` to a
writable folder shared by them: prometheus-client then aggregates all workers.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from prometheus_client import Counter, Gauge, Histogram

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

REQUESTS = Counter(
    "wander_http_requests_total", "HTTP requests by route, method and status.",
    ["route", "method", "status"],
)  # fmt: skip
REQUEST_LATENCY = Histogram(
    "wander_http_request_duration_seconds", "HTTP request latency by route and method.",
    ["route", "method"], buckets=LATENCY_BUCKETS,
)  # fmt: skip
STEP_LATENCY = Histogram(
    "wander_step_duration_seconds", "Time to apply one step, by environment.",
    ["env"], buckets=LATENCY_BUCKETS,
)  # fmt: skip
STEPS = Counter("wander_steps_total", "Steps applied, by environment.", ["env"])
INVALID_ACTIONS = Counter(
    "wander_invalid_actions_total",
    "Steps whose action the environment counted as invalid (its `invalid_moves` metric rose).",
    ["env"],
)
HOSTED_STEPS = Counter(
    "wander_hosted_steps_total",
    "Steps of hosted environments (openenv/*, vf/*), by where their episode was: `live` in the "
    "worker kept for it, or `replayed` from its actions in a fresh one.",
    ["env", "episode"],
)
EPISODES_CREATED = Counter("wander_episodes_created_total", "Episodes created.", ["env"])
EPISODES_FINISHED = Counter(
    "wander_episodes_finished_total", "Episodes ended, by environment and status.",
    ["env", "status"],
)  # fmt: skip
LIVE_EPISODES = Gauge(
    "wander_live_episodes",
    "Episodes created and neither ended nor expired, in the store (set at every scrape).",
    ["env"],
    multiprocess_mode="mostrecent",
)
"""Counted by the store, not by the process (an episode that expires has no request to
count it out): every process and replica reports the same number, so take one, not
their sum. With several workers, the worker that answers the scrape sets it."""
KEY_REQUESTS = Counter(
    "wander_key_requests_total",
    "Requests by API key id and outcome (ok, client_error, server_error, forbidden, "
    "rate_limited, quota_exceeded).",
    ["key", "outcome"],
)
ERRORS = Counter(
    "wander_errors_total",
    "Error answers by their `code` (`turn_mismatch`, `validation_error`, ...); the errors of "
    "a batch's items, inside its 200, are not counted.",
    ["code"],
)
STORE_ERRORS = Counter("wander_store_errors_total", "Requests that found the store down.")
DATABASE_ERRORS = Counter(
    "wander_database_errors_total",
    "Archive writes and queries that failed on the database: down, or refusing the write.",
)
ARCHIVE_BACKLOG = Gauge(
    "wander_archive_backlog", "Finished episodes waiting to be archived (set at every attempt).",
    multiprocess_mode="max",
)  # fmt: skip
ARCHIVE_DEAD_LETTERS = Gauge(
    "wander_archive_dead_letters",
    "Finished episodes the database refused, set aside for `wander archive dead-letters`.",
    multiprocess_mode="max",
)


class EnvMetrics:
    """The per-environment children, bound once: ``labels()`` costs more than the
    increment itself, and the engine counts every step."""

    def __init__(self, env: str) -> None:
        self.env = env
        self.steps = STEPS.labels(env)
        self.step_latency = STEP_LATENCY.labels(env)
        self.invalid_actions = INVALID_ACTIONS.labels(env)
        self.created = EPISODES_CREATED.labels(env)

    def finished(self, status: str) -> None:
        EPISODES_FINISHED.labels(self.env, status).inc()


def set_live_episodes(counts: Mapping[str, int]) -> None:
    """Set ``wander_live_episodes`` from the store's count (``EpisodeStore.live``)."""
    for env, count in counts.items():
        LIVE_EPISODES.labels(env).set(count)


@functools.cache
def for_env(env: str) -> EnvMetrics:
    """The metrics of one environment (names come from the registry: a bounded set)."""
    return EnvMetrics(env)
