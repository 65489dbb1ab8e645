"""Service settings, read from ``WANDER_*`` environment variables (docs/operations.md#settings)."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from wander.service.envs.hosted.openenv import parse_specs
from wander.service.envs.hosted.verifiers import parse_ids, parse_pinned
from wander.service.redis_url import parse_redis_url


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="WANDER_",
        extra="ignore",
        hide_input_in_errors=True,  # keys, passwords
    )

    redis_url: str | None = Field(
        None,
        description="Redis URL for episode state: `redis://host:6379/0` (one Redis), "
        "`redis+cluster://host:7000,host:7001` (a Redis Cluster) or "
        "`redis+sentinel://host:26379/mymaster` (the primary Sentinel names); unset: the "
        "in-process store (one process).",
    )
    redis_partitions: int = Field(
        16,
        ge=1,
        le=1024,
        description="On a Redis Cluster, how many partitions (hash tags) the keys are split "
        "into: the most primaries that share the load. Never lower it on a cluster that "
        "holds data (the partitions past it would be read no more); ignored on one Redis.",
    )
    redis_max_connections: int = Field(
        64, ge=1, description="Redis connections per process; more requests wait for one."
    )
    redis_prefix: str = Field("wander:", description="Prefix of every Redis key written.")
    episode_ttl_seconds: float = Field(
        3600,
        ge=0.001,
        description="An episode untouched this long is forgotten (seconds, to the millisecond).",
    )
    finished_grace_seconds: float = Field(
        600,
        ge=0.001,
        description="How long a finished episode's document stays in the store once the "
        "archive holds it: a retried last step is answered from it (for as long as the "
        "clients retry: ten minutes). Its messages leave the store at once, and reads of "
        "the episode are answered from the archive (seconds, to the millisecond).",
    )
    memory_max_episodes: int = Field(
        100_000,
        ge=1,
        description="The most episodes the in-process store holds (live ones, and finished "
        "ones the archive does not have yet); past it creating episodes answers 503 "
        "`store_full` (clients retry it), steps still apply. Ignored with Redis.",
    )
    max_body_bytes: int = Field(
        16 * 2**20, ge=1, description="Largest request body, refused unread (413 above)."
    )
    max_header_bytes: int = Field(
        65_536,
        ge=4096,
        description="Largest request line and headers, counted as they arrive: 431 above, "
        "and the connection is closed (`wander serve`).",
    )
    header_timeout_seconds: float = Field(
        10.0,
        gt=0,
        le=3600,
        description="A request's headers must all arrive within this long of its start (or "
        "of the connection's); else 408 and the connection is closed (`wander serve`).",
    )
    request_timeout_seconds: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="A whole request, body included, must arrive within this long of its "
        "start; else 408 and the connection is closed (`wander serve`).",
    )
    keep_alive_seconds: float = Field(
        5.0,
        gt=0,
        le=3600,
        description="An idle connection between requests is closed after this long.",
    )
    max_connections: int = Field(
        1024,
        ge=1,
        description="Connections one service process holds open; one more is answered 503 "
        "and closed (`wander serve`).",
    )
    max_action_bytes: int = Field(65_536, ge=1, description="Largest action (413 above).")
    max_group_size: int = Field(256, ge=1, description="Largest `n` of one create request.")
    max_batch_steps: int = Field(1024, ge=1, description="Most steps in one batch request.")
    max_metadata_bytes: int = Field(16_384, ge=0, description="Largest metadata (413 above).")
    max_episode_bytes: int = Field(
        8 * 2**20,
        ge=65_536,
        description="Largest stored episode (its JSON, or its archive record's): a step that "
        "would make it larger is refused (413) and leaves it unchanged. Redis refuses "
        "documents past 512 MB.",
    )
    env_call_seconds: float = Field(
        5.0,
        gt=0,
        le=600,
        description="Deadline of one isolated environment call (reset, or a step and its "
        "score); past it the worker is killed and the step fails with `env_timeout`.",
    )
    env_memory_bytes: int = Field(
        1 << 30,
        ge=256 << 20,
        description="Address space of an environment worker (RLIMIT_AS); a call that needs "
        "more fails with `env_failed`.",
    )
    env_wait_seconds: float = Field(
        10.0,
        gt=0,
        le=600,
        description="How long an isolated environment call may wait for a free worker; "
        "past it the step fails with `env_busy` (503, retried by clients).",
    )
    env_workers: int = Field(
        2, ge=1, le=64, description="Worker processes that run isolated environment calls."
    )
    env_live_episodes: int = Field(
        16,
        ge=0,
        le=1024,
        description="Episodes of hosted environments (`openenv/*`, `vf/*`) whose worker is kept "
        "between steps, the environment live in it, so that the episode's next step "
        "continues it rather than replaying the episode (each a worker process: a few MB "
        "and the environment; the least recently stepped goes first). A kept worker serves "
        "no other episode. 0: every step replays.",
    )
    env_network: str = Field(
        "",
        description="Environments whose workers may reach the network, `name,...` (a hosted "
        "taskset that talks to a server of its own: `vf/openenv`): each call of one runs in "
        "a worker forked for it in the service's network, every other confinement kept. "
        "Give it only to environments whose code you trust with your network, and pin what "
        "they connect to (`WANDER_VERIFIERS_CONFIG`). Root only: without root no worker "
        "is kept off the network.",
    )
    env_processes: str = Field(
        "",
        description="Environments whose workers may start processes, `name,...` (a hosted "
        "Verifiers taskset whose tools are MCP servers it starts for each episode: "
        "`vf/<id>`): each call of one runs in a worker forked for it with a network of its "
        "own (its loopback, nothing else, unless `env_network` names it too), up to 64 "
        "processes and threads, each under `env_memory_bytes`, and 64 MB of files of its "
        "own. Its servers start again whenever its episode replays, so raise "
        "`env_call_seconds` to cover that. Root only for the network and the process limit.",
    )
    env_uids: str = Field(
        "100000-165535",
        pattern=r"^\s*\d+\s*-\s*\d+\s*$",
        description="User ids of the environment workers (`first-last`, as root): each live "
        "worker runs as one of its own, so none can signal, trace or read another. Pick ids "
        "no user or service of the machine has; never 0. Up to three times `env_workers` "
        "workers live at once (those running calls, and those forked ahead of need), and "
        "`env_live_episodes` more kept for hosted environments' episodes, so give it more "
        "than that.",
    )
    database_url: str = Field(
        "sqlite:///wander.db",
        description="SQLAlchemy URL of the archive; the default is a SQLite file in the "
        "working directory, migrated automatically by `wander serve`.",
    )
    archive_claim_seconds: float = Field(
        60.0,
        gt=0,
        description="A finished episode taken by an archiver that never wrote it "
        "(it died) is taken over by another after this long.",
    )
    auth: Literal["open", "keys"] | None = Field(
        None,
        description="`keys`: every route but /healthz and /readyz needs an API key (from "
        "WANDER_API_KEYS or `wander keys create`); `open`: none does. Unset: `keys` when "
        "WANDER_API_KEYS is set, else `open`. An open service whose archive holds active "
        "keys refuses to start, rather than ignore them.",
    )
    api_keys: SecretStr | None = Field(
        None,
        description="Keys for simple deployments: comma-separated `tenant:role:key` entries "
        "(role `agent`, `trainer` or `admin`). Never logged.",
    )
    key_cache_seconds: float = Field(
        5.0,
        gt=0,
        le=3600,
        description="How long a replica trusts what it read of a key in the archive: a key "
        "revoked elsewhere is refused within this long. While the archive is down, keys "
        "already seen keep working.",
    )
    audit_log: bool = Field(
        True,
        description="Log who created, stepped, deleted or exported what (logger "
        "`wander.service.audit`: tenant and key id, never the key).",
    )
    ws_compression: bool = Field(
        False,
        description="Compress WebSocket frames (permessage-deflate) when a client offers it. "
        "Off by default: an observation is a few KB of JSON, and deflating every frame on "
        "both ends cost a fifth of the service's CPU per OpenEnv step (bench/README.md); "
        "turn it on for clients on slow links.",
    )
    console: bool = Field(
        True,
        description="Serve the web console at /console (static pages that call the v1 API "
        "with the visitor's key; `wander serve --no-console` turns it off).",
    )
    access_log: bool = Field(
        False, description="Log every request (costs a tenth of the throughput)."
    )
    otel: bool = Field(
        False,
        description="FastAPI's native OpenTelemetry: a span and metrics of every request, "
        "sent to the global providers when some are configured. Off, no request asks "
        "whether they are (6-8 µs of the ~85 µs that the HTTP layer costs a step).",
    )
    log_level: Literal["debug", "info", "warning", "error", "critical"] = "info"
    archive_writer: Literal["process", "thread"] = Field(
        "process",
        description="Where finished episodes are parsed and written into the archive: a "
        "process of their own, whose GIL the requests do not share (a database held in "
        "memory is always written from a thread), or a thread of the service.",
    )
    archive_writer_processes: int = Field(
        2,
        ge=1,
        le=16,
        description="Writer processes of the archive (`WANDER_ARCHIVE_WRITER` `process`), "
        "each batch split between them: a writer is bound by its own CPU, parsing records "
        "and building rows, which they do side by side (SQLite takes their transactions "
        "one at a time).",
    )
    archive_backlog_max: int = Field(
        20_000,
        ge=0,
        description="Finished episodes waiting for the archive past which creating episodes "
        "answers 503 `archive_backlog` (clients retry it) until the archive catches up; "
        "steps of live episodes still apply. Bounds the store's memory and how far run "
        "summaries trail the games. 0: no bound.",
    )
    openenv: str = Field(
        "",
        description="OpenEnv environments to serve, `name=module:Class,...`: each class (an "
        "OpenEnv `Environment` subclass, importable here) is served as `openenv/<name>` "
        '(docs/environments.md, "Hosting OpenEnv environments"). Read from the '
        "environment where environments load, so set it there (`wander serve --openenv`).",
    )
    verifiers: str = Field(
        "",
        description="Verifiers 0.4 tasksets to serve, `id,...`: each (installed here, "
        "resolved as `vf-eval` resolves a taskset id) is served as `vf/<id>` "
        '(docs/environments.md, "Hosting Verifiers tasksets"). Read from the environment '
        "where environments load, so set it there (`wander serve --verifiers`).",
    )
    verifiers_config: str = Field(
        "",
        description="Taskset fields the operator fixes, a JSON object by taskset id "
        '(`{"openenv": {"base_url": "http://127.0.0.1:9000"}}`): a request can no longer set '
        "them (what a taskset connects to, above all). It reaches the workers: never a secret.",
    )

    @field_validator("redis_url")
    @classmethod
    def _redis_url_is_a_target(cls, value: str | None) -> str | None:
        """A URL the store cannot use stops the service at start, saying why."""
        if value:
            parse_redis_url(value)
        return value

    @field_validator("openenv")
    @classmethod
    def _openenv_names_classes(cls, value: str) -> str:
        """A list that does not parse stops the service at start, naming the bad item."""
        parse_specs(value)
        return value

    @field_validator("verifiers")
    @classmethod
    def _verifiers_names_tasksets(cls, value: str) -> str:
        """A list that does not parse stops the service at start, naming the bad item."""
        parse_ids(value)
        return value

    @field_validator("verifiers_config")
    @classmethod
    def _verifiers_config_is_fields_by_taskset(cls, value: str) -> str:
        """A value that is not a JSON object of objects stops the service at start."""
        parse_pinned(value)
        return value

    @field_validator("env_uids")
    @classmethod
    def _env_uids_are_a_range(cls, value: str) -> str:
        """A range that is not ordered, or holds uid 0 (root), stops the service at start."""
        first, last = (int(end) for end in value.split("-"))
        if not 0 < first <= last <= 2**32 - 2:
            raise ValueError("WANDER_ENV_UIDS must be `first-last`, 0 < first <= last")
        return value

    @field_validator("auth", mode="before")
    @classmethod
    def _empty_auth_is_unset(cls, value: object) -> object:
        """``WANDER_AUTH=`` is unset: what compose passes for a variable nobody set."""
        return None if value == "" else value

    @model_validator(mode="after")
    def _keys_apply(self) -> Self:
        """Keys that cannot be applied stop the service at start, never silently ignored."""
        from wander.service.keys import parse_api_keys  # the settings stay import-light

        if self.api_keys is not None:
            keys = parse_api_keys(self.api_keys.get_secret_value())
            if keys and self.auth == "open":
                raise ValueError("WANDER_AUTH=open, but WANDER_API_KEYS lists keys: drop one")
        return self

    @property
    def requires_keys(self) -> bool:
        """Whether callers must present a key."""
        if self.auth is not None:
            return self.auth == "keys"
        return self.api_keys is not None and bool(self.api_keys.get_secret_value().strip())
