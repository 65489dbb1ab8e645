"""Wander's Python client: typed, async-first access to the v1 HTTP API (DESIGN §7).

from wander.client import WanderClient

with WanderClient("http://127.0.0.1:8000") as wander:
    [episode] = wander.create("tictactoe", example=0)
    result = episode.step("<think>Centre.</think><move>4</move>")
"""

from wander.client.aio import AsyncWanderClient
from wander.client.episode import AsyncEpisode, Episode
from wander.client.errors import (
    BadRequest,
    Conflict,
    EnvironmentFailed,
    EnvNotFound,
    EpisodeDone,
    EpisodeNotDone,
    EpisodeNotFound,
    Forbidden,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    PolicyEndpointError,
    QuotaExceeded,
    RateLimited,
    RunNotFound,
    ServiceUnavailable,
    TurnMismatch,
    Unauthorized,
    WanderAPIError,
    WanderConnectionError,
    WanderError,
)
from wander.client.models import (
    ArchivedEpisodesPage,
    AssistantMessage,
    DeadLetterInfo,
    DeadLettersChanged,
    DeadLettersPage,
    EnvInfo,
    EpisodeRecord,
    Message,
    RunInfo,
    RunsPage,
    RunSummary,
    Score,
    StepError,
    StepResult,
    ToolCall,
    UnavailableEnvironments,
)
from wander.client.retry import NO_RETRY, Retry
from wander.client.sync import WanderClient

__all__ = [
    "NO_RETRY",
    "ArchivedEpisodesPage",
    "AssistantMessage",
    "AsyncEpisode",
    "AsyncWanderClient",
    "BadRequest",
    "Conflict",
    "DeadLetterInfo",
    "DeadLettersChanged",
    "DeadLettersPage",
    "EnvInfo",
    "EnvNotFound",
    "EnvironmentFailed",
    "Episode",
    "EpisodeDone",
    "EpisodeNotDone",
    "EpisodeNotFound",
    "EpisodeRecord",
    "Forbidden",
    "InvalidRequest",
    "Message",
    "NotFound",
    "PayloadTooLarge",
    "PolicyEndpointError",
    "QuotaExceeded",
    "RateLimited",
    "Retry",
    "RunInfo",
    "RunNotFound",
    "RunSummary",
    "RunsPage",
    "Score",
    "ServiceUnavailable",
    "StepError",
    "StepResult",
    "ToolCall",
    "TurnMismatch",
    "Unauthorized",
    "UnavailableEnvironments",
    "WanderAPIError",
    "WanderClient",
    "WanderConnectionError",
    "WanderError",
]
