"""Wire models of the v1 HTTP API (docs/api.md).

The service validates requests and serialises responses with these models, and
the client parses responses with them, so both sides share one definition of
the contract. Request models reject unknown fields (a typo is an error, not a
silently ignored option); response models ignore them, so an older client keeps
working against a newer service.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    StringConstraints,
    Tag,
    WithJsonSchema,
)

from wander.client.error_codes import ErrorCode

SEED_LIMIT = 2**63
"""Seeds are 63-bit (docs/architecture.md#seeds-and-determinism)."""

INT_LIMIT = 2**63
"""Every integer a request carries is below this (and at least ``-INT_LIMIT``): the
store's JSON encoder and the archive's columns hold signed 64-bit integers, no more.
Bounds are stated as ``< 2**63`` rather than ``<= 2**63 - 1``: the OpenAPI document
holds them as floats, which hold a power of two exactly and round 2**63 - 1 up."""
INT_RANGE = (-INT_LIMIT, INT_LIMIT - 1)


def _storable_text(text: str) -> str:
    """PostgreSQL cannot store the NUL character: refused at the door, not in the archive."""
    if "\0" in text:
        raise ValueError("text may not contain the NUL character (\\u0000)")
    return text


def storable(text: str) -> str:
    """A model's text as Wander takes it: the NUL character, which the service refuses
    (PostgreSQL cannot store it) and an untrained model samples like any other byte,
    becomes U+FFFD."""
    return text.replace("\0", "\ufffd")


def text_of(messages: Sequence[Message]) -> str:
    """What a model is shown of Wander's messages as one text (a tool's reply, say): their
    contents, a blank line apart."""
    return "\n\n".join(message.content for message in messages if message.content)


def _storable_json(value: Any) -> Any:
    """Free-form JSON (configs, metadata) as the store and the archive can keep it:
    finite numbers, 64-bit integers, no NUL in strings or keys."""
    if isinstance(value, dict):
        for key, item in value.items():
            _storable_text(key)
            _storable_json(item)
    elif isinstance(value, list):
        for item in value:
            _storable_json(item)
    elif isinstance(value, str):
        _storable_text(value)
    elif isinstance(value, bool):
        pass
    elif isinstance(value, int) and not INT_RANGE[0] <= value <= INT_RANGE[1]:
        raise ValueError("integers must fit in 64 bits (-2**63 to 2**63 - 1)")
    elif isinstance(value, float) and not math.isfinite(value):
        raise ValueError("numbers must be finite (no NaN or Infinity)")
    return value


NO_NUL = "^[^\\u0000]*$"
"""The rule of ``_storable_text`` as a JSON-schema pattern, for the OpenAPI document
(the validator, not the pattern, checks: its message says what is wrong)."""

Text = Annotated[str, AfterValidator(_storable_text), Field(json_schema_extra={"pattern": NO_NUL})]
"""A string of a request: anything but NUL."""

JsonObject = Annotated[dict[str, Any], AfterValidator(_storable_json)]
"""A free-form JSON object of a request, storable as it is."""


def _whole_number(value: Any) -> Any:
    """JSON has one kind of number, and ``3.0`` is the integer 3 (as JSON Schema reads
    it, and as schemathesis sends it): a float with no fraction is taken as its integer."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


WHOLE = BeforeValidator(_whole_number)
Index = Annotated[int, Field(ge=0, lt=INT_LIMIT, strict=True), WHOLE]
"""A count or an index of a request, >= 0: a JSON number without a fraction (``3`` or
``3.0``), never a string or a boolean."""
Seed = Annotated[int, Field(ge=0, lt=SEED_LIMIT, strict=True), WHOLE]
GroupSize = Annotated[int, Field(ge=1, lt=INT_LIMIT, strict=True), WHOLE]


# Examples for the OpenAPI document (``json_schema_extra``): the README's quick-start
# game of tic-tac-toe, example 0 against the optimal opponent, as the service plays it.

_SYSTEM_PROMPT = (
    "You are playing tic-tac-toe as X against an opponent who plays O.\n"
    "The cells are numbered 0 to 8, row by row:\n\n"
    " 0 | 1 | 2\n---+---+---\n 3 | 4 | 5\n---+---+---\n 6 | 7 | 8\n\n"
    "On each turn, reason briefly inside <think>...</think>, then give the number of an "
    "empty cell inside <move>...</move>, for example: "
    "<think>The centre is free.</think><move>4</move>\n"
    "Three X in a row, column or diagonal wins."
)
_EPISODE_ID = "ep_HzH_gajOnYkAfDpCVT6Fbw"
_INFO = {"winner": None, "model_starts": False, "random_move_prob": 0.0, "invalid_moves": 0,
         "max_turns": 8}  # fmt: skip
_EPISODE = {
    "id": _EPISODE_ID,
    "env": "tictactoe",
    "split": "train",
    "example": 0,
    "seed": 2971752810431559990,
    "group": "grp_Sw90auxksPrppmRVYb6G9w",
    "run": "demo",
    "turn": 0,
    "done": False,
    "observation": [
        {"role": "system", "content": _SYSTEM_PROMPT},
        {
            "role": "user",
            "content": "The opponent (O) played first, in cell 8.\n\n"
            " 0 | 1 | 2\n---+---+---\n 3 | 4 | 5\n---+---+---\n 6 | 7 | O\n\n"
            "Available positions: 0, 1, 2, 3, 4, 5, 6, 7\nYour turn.",
        },
    ],
    "info": {"board": "........O", **_INFO},
}
_STEP = {"action": "<think>Take a corner.</think><move>0</move>", "turn": 0}
_STEP_RESULT = {
    "episode_id": _EPISODE_ID,
    "turn": 1,
    "observation": [
        {
            "role": "user",
            "content": "The opponent (O) played 6.\n\n"
            " X | 1 | 2\n---+---+---\n 3 | 4 | 5\n---+---+---\n O | 7 | O\n\n"
            "Available positions: 1, 2, 3, 4, 5, 7\nYour turn.",
        }
    ],
    "reward": 0.2,
    "done": False,
    "info": {"board": "X.....O.O", **_INFO},
}
_BATCH_ITEM = {
    "episode_id": _EPISODE_ID,
    "action": "<think>O threatens the bottom row: block it.</think><move>7</move>",
    "turn": 1,
}
_BATCH_RESULT = {
    "episode_id": _EPISODE_ID,
    "turn": 2,
    "observation": [
        {
            "role": "user",
            "content": "The opponent (O) played 2.\n\n"
            " X | 1 | O\n---+---+---\n 3 | 4 | 5\n---+---+---\n O | X | O\n\n"
            "Available positions: 1, 3, 4, 5\nYour turn.",
        }
    ],
    "reward": 0.0,
    "done": False,
    "info": {"board": "X.O...OXO", **_INFO},
}
_BATCH_ERROR = {
    "episode_id": "ep_missing",
    "error": {
        "code": "episode_not_found",
        "message": "no episode 'ep_missing' (unknown, or expired after idling)",
        "details": None,
    },
}
_SCORE = {
    "episode_id": _EPISODE_ID,
    "done": True,
    "total": 0.2,
    "components": {"win": 0.0, "format": 1.0, "invalid_move": 0.0},
    "weights": {"win": 1.0, "format": 0.2, "invalid_move": 1.0},
    "metrics": {"outcome": "loss", "invalid_moves": 0, "turns": 2, "model_starts": False,
                "random_move_prob": 0.0},
    "outcome": "loss",
}  # fmt: skip
_PROBABILITY = {"maximum": 1.0, "minimum": 0.0, "type": "number"}
_ENV_INFO = {
    "name": "tictactoe",
    "version": "1.0.0",
    "description": "Tic-tac-toe: the model plays X against an opponent that plays randomly "
    "with a per-example probability and minimax-optimally otherwise.",
    "kind": "multi_turn",
    "config_schema": {  # abridged: four of its seven properties
        "additionalProperties": False,
        "properties": {
            "seed": {"default": 0, "description": "Dataset seed: part of every example's seed.",
                     "title": "Seed", "type": "integer"},
            "min_random_move_prob": {"default": 0.0, "description": "Lowest chance that the "
                                     "opponent plays a random move.", **_PROBABILITY},
            "max_random_move_prob": {"default": 1.0, "description": "Highest chance that the "
                                     "opponent plays a random move.", **_PROBABILITY},
            "max_turns": {"default": 8, "description": "Model messages allowed, invalid ones "
                          "included; then a loss.", "maximum": 64, "minimum": 1,
                          "title": "Max Turns", "type": "integer"},
        },
        "title": "TicTacToeConfig",
        "type": "object",
    },
    "default_config": {"seed": 0, "train_size": 10000, "eval_size": 1000,
                       "min_random_move_prob": 0.0, "max_random_move_prob": 1.0,
                       "num_groups": 1, "max_turns": 8},
    "splits": {"train": 10000, "eval": 1000},
    "reward_components": [{"name": "win", "weight": 1.0}, {"name": "format", "weight": 0.2},
                          {"name": "invalid_move", "weight": 1.0}],
    "tools": None,
    "isolation": "inline",
}  # fmt: skip


def _examples(*examples: dict[str, Any]) -> ConfigDict:
    return ConfigDict(json_schema_extra={"examples": list(examples)})


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolCallFunction(BaseModel):
    name: Text
    arguments: Text = Field(description="The arguments as a JSON string, as OpenAI sends them.")


class ToolCall(BaseModel):
    id: Text
    type: Literal["function"] = "function"
    function: ToolCallFunction


def _absent(value: Any) -> bool:
    return value is None


class _ChatMessage(BaseModel):
    """Fields shared by every chat message; absent optional fields are left out of the JSON
    (``exclude_if`` rather than a model serializer: pydantic then still knows the fields,
    so the OpenAPI document shows a message's shape, and a dump is ~2.5x faster)."""

    role: str
    content: str | None = Field(None, exclude_if=_absent)
    tool_calls: list[ToolCall] | None = Field(None, exclude_if=_absent)
    tool_call_id: str | None = Field(None, exclude_if=_absent)
    name: str | None = Field(None, exclude_if=_absent)


class Message(_ChatMessage):
    """A chat message in the OpenAI shape."""

    role: Literal["system", "user", "assistant", "tool"]


class AssistantMessage(_ChatMessage):
    """An action: the model's message (text and/or tool calls)."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["assistant"] = "assistant"
    content: Text | None = Field(None, exclude_if=_absent)
    tool_call_id: Text | None = Field(None, exclude_if=_absent)
    name: Text | None = Field(None, exclude_if=_absent)


def tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> AssistantMessage:
    """The action holding one call of the tool ``name`` (its arguments sent as JSON, as
    OpenAI sends them): what a tool call made through an MCP server or TRL's
    ``environment_factory`` is as one Wander step."""
    function = ToolCallFunction(name=name, arguments=json.dumps(arguments))
    return AssistantMessage(tool_calls=[ToolCall(id=call_id, function=function)])


def _action_kind(value: Any) -> str:
    return "message" if isinstance(value, dict | AssistantMessage) else "text"


Action = Annotated[
    Annotated[Text, Tag("text")] | Annotated[AssistantMessage, Tag("message")],
    Discriminator(_action_kind),
]
"""A step's action: the assistant's text, or a whole assistant message (an error's
location says which: ``action.text`` or ``action.message.content``)."""


class RewardComponent(BaseModel):
    name: str
    weight: float


class EnvInfo(BaseModel):
    model_config = _examples(_ENV_INFO)

    name: str
    version: str
    description: str
    kind: Literal["single_turn", "multi_turn", "tool"]
    config_schema: dict[str, Any]
    default_config: dict[str, Any]
    splits: dict[str, int] = Field(description="Split name -> number of examples.")
    reward_components: list[RewardComponent]
    tools: list[dict[str, Any]] | None = None
    isolation: Literal["inline", "process"] = Field(
        "process",
        description="Where the service runs the environment's code: `inline` (pure and "
        "bounded, on the service's event loop) or `process` (confined worker processes "
        "under a deadline: every environment whose scorer evaluates model text).",
    )


class UnavailableEnvironments(BaseModel):
    """Environments installed but not offered, and why (usually a missing extra)."""

    name: str = Field(description="An environment's name, or a family such as `rg/*`.")
    reason: str


class EnvironmentsResponse(BaseModel):
    model_config = _examples({"environments": [_ENV_INFO]})

    environments: list[EnvInfo]
    unavailable: list[UnavailableEnvironments] = Field(default_factory=list)


class CreateEpisodesRequest(_Request):
    model_config = _examples(
        {"env": "tictactoe", "example": 0, "config": {"max_random_move_prob": 0}, "run": "demo"},
        {"env": "tictactoe", "split": "train", "n": 8, "config": {"num_groups": 4}},
    )

    env: Text = Field(min_length=1, max_length=200)
    config: JsonObject | None = Field(
        None, description="The environment's config; unset keys take its defaults."
    )
    split: Text = Field("train", max_length=200)
    example: Index | None = Field(
        None, description="Example index in the split; a random one when left out."
    )
    seed: Seed | None = Field(None, description="Overrides the example's seed.")
    n: GroupSize = Field(
        1,
        description="Episodes to create: one GRPO group sharing example and seed.",
    )
    run: Text | None = Field(None, min_length=1, max_length=200, description="Run label.")
    metadata: JsonObject | None = None


class NewEpisode(BaseModel):
    id: str
    env: str
    split: str
    example: int
    seed: int
    group: str
    run: str | None
    turn: int
    done: bool
    observation: list[Message]
    info: dict[str, Any]


class CreateEpisodesResponse(BaseModel):
    model_config = _examples({"episodes": [_EPISODE]})

    episodes: list[NewEpisode]


class StepRequest(_Request):
    model_config = _examples(_STEP, {"action": {"role": "assistant", "content": _STEP["action"]}})

    action: Action
    turn: Index | None = Field(
        None, description="Steps already applied; makes retries safe (applied at most once)."
    )


class BatchStepItem(StepRequest):
    model_config = _examples(_BATCH_ITEM)

    episode_id: Text = Field(max_length=200)


class BatchStepRequest(_Request):
    model_config = _examples({"steps": [_BATCH_ITEM, {**_STEP, "episode_id": "ep_missing"}]})

    steps: list[BatchStepItem]


class StepResult(BaseModel):
    model_config = _examples(_STEP_RESULT)

    episode_id: str
    turn: int = Field(description="Steps applied so far, this one included.")
    observation: list[Message]
    reward: float = Field(
        description="Change of the running total: an episode's rewards sum to its total."
    )
    done: bool
    info: dict[str, Any]


_ERROR_CODE_SCHEMA = {
    "type": "string",
    "enum": [code.value for code in ErrorCode],
    "description": "What went wrong, for programs (docs/api.md#errors). A client takes any "
    "other string too: a newer service may send a code it does not know.",
}


class ErrorInfo(BaseModel):
    code: Annotated[
        ErrorCode | str, Field(union_mode="left_to_right"), WithJsonSchema(_ERROR_CODE_SCHEMA)
    ]
    """An ``ErrorCode``; a plain ``str`` where the code is newer than this client."""
    message: str
    details: Any = None


class ErrorResponse(BaseModel):
    error: ErrorInfo


class StepError(BaseModel):
    episode_id: str
    error: ErrorInfo


class BatchStepResponse(BaseModel):
    model_config = _examples({"results": [_BATCH_RESULT, _BATCH_ERROR]})

    results: list[StepResult | StepError]


class Score(BaseModel):
    model_config = _examples(_SCORE)

    episode_id: str
    done: bool
    total: float
    components: dict[str, float]
    weights: dict[str, float]
    metrics: dict[str, Any]
    outcome: str | None = Field(
        None,
        description="How a finished episode ended, in the environment's words "
        "(tic-tac-toe: win, draw or loss); runs are filtered on it.",
    )


class EpisodeRecord(BaseModel):
    id: str
    env: str
    version: str
    tenant: str | None = Field(
        None,
        description="The tenant the episode belongs to (its creator's key's); null on a "
        "service with no keys.",
    )
    split: str
    example: int
    seed: int
    group: str
    run: str | None
    metadata: dict[str, Any] | None
    config: dict[str, Any]
    turn: int
    done: bool
    status: Literal["active", "done", "aborted"]
    messages: list[Message]
    step_rewards: list[float]
    score: Score
    state: dict[str, Any] = Field(description="The environment's public state.")
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None


class RunInfo(BaseModel):
    """One run: a run label of one tenant (two tenants' runs of one label are two runs)."""

    run: str
    tenant: str | None = Field(
        None, description="The tenant whose run it is; null for episodes of no tenant."
    )
    episodes: int
    envs: list[str]
    first_created_at: datetime
    last_finished_at: datetime | None


class RunsPage(BaseModel):
    total: int = Field(description="Runs in the archive that the caller sees.")
    limit: int
    offset: int
    runs: list[RunInfo] = Field(
        description="Oldest first (by first episode created, then label, then tenant)."
    )
    tenant: str | None = Field(
        None,
        description="The tenant whose runs these are (a tenant's key sees its own); null: "
        "every tenant's (an admin key, or an open service).",
    )
    unlabelled: int = Field(
        0,
        description="Archived episodes the caller sees that have no run label, so are in no "
        "run: give `run` when creating episodes to find them here.",
    )


class NumericSummary(BaseModel):
    """Distribution of a number over episodes (population standard deviation)."""

    kind: Literal["numeric"] = "numeric"
    mean: float
    std: float
    min: float
    max: float
    nonzero_rate: float = Field(description="Share of episodes where the value is not 0.")


class CategoricalSummary(BaseModel):
    """Share of episodes per value (booleans and null as ``"true"``, ``"false"``, ``"null"``)."""

    kind: Literal["categorical"] = "categorical"
    rates: dict[str, float]


class RunSummary(BaseModel):
    """A run's archived episodes; reward, components and metrics are over the ``done`` ones."""

    run: str
    tenant: str | None = Field(
        None,
        description="The tenant whose run is summarised; null when the summary covers "
        "the run label's episodes of every tenant (an admin's view).",
    )
    episodes: int
    statuses: dict[str, int] = Field(description="Episodes per status (done, aborted).")
    envs: dict[str, int]
    first_created_at: datetime
    last_finished_at: datetime | None
    reward: NumericSummary | None = Field(description="Total reward; null with no done episode.")
    components: dict[str, float] = Field(description="Mean of each reward component.")
    metrics: dict[str, NumericSummary | CategoricalSummary] = Field(
        description="Per metric: numeric distribution, or the rate of each value "
        "(tic-tac-toe: outcome win/draw/loss rates, invalid_moves, turns)."
    )


class ArchivedEpisodesPage(BaseModel):
    run: str
    total: int = Field(description="Episodes matching the filters.")
    limit: int
    offset: int
    episodes: list[EpisodeRecord]


# Admin: the archive's dead letters (``/v1/admin/dead-letters``).

MAX_DEAD_LETTER_IDS = 1000
"""Dead letters named in one request; ``all`` has no limit."""

DeadLetterId = Annotated[str, StringConstraints(pattern=r"^[0-9A-Za-z-]{1,64}$")]
"""A dead letter's id as the store hands it out (Redis: ``1732377600000-0``)."""


class DeadLetterInfo(BaseModel):
    """One dead letter: which episode, why the database refused it, and when."""

    id: str = Field(description="The dead letter's id, for retry and drop.")
    episode_id: str | None = Field(description="Null if the record is not even readable.")
    env: str | None
    run: str | None
    error: str
    failed_at: datetime


class DeadLettersPage(BaseModel):
    total: int = Field(description="Dead letters held now, on every page.")
    dead_letters: list[DeadLetterInfo] = Field(description="Oldest first.")


class _Selection(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class DeadLetterIds(_Selection):
    """These dead letters: ``{"ids": [...]}``."""

    ids: list[DeadLetterId] = Field(min_length=1, max_length=MAX_DEAD_LETTER_IDS)


class AllDeadLetters(_Selection):
    """Every dead letter held when the request arrives: ``{"all": true}``."""

    all: Literal[True]


DeadLetterSelection = DeadLetterIds | AllDeadLetters
"""Which dead letters to act on: one shape or the other, never both or neither (two
models rather than one with a check, so that the OpenAPI document says so too)."""


class DeadLettersChanged(BaseModel):
    ids: list[str] = Field(description="The dead letters acted on.")
    missing: list[str] = Field(description="Ids asked for that the store does not hold.")


# Admin: API keys (``/v1/admin/keys``).

TENANT_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,62}$"
"""A tenant's name: lower-case letters, digits and ``_.-``, 1 to 63 characters, starting
with a letter or digit (the service's ``TENANT`` rule; a test keeps the two equal)."""

KeyRole = Literal["agent", "trainer", "admin"]
"""What a key may do: an agent plays episodes; a trainer also reads its tenant's runs;
an admin sees every tenant and manages keys."""

NonNegativeRate = Annotated[float, Field(ge=0, lt=INT_LIMIT, strict=True, allow_inf_nan=False)]
"""A rate a second, >= 0 and below 2**63 (what the archive takes)."""


class QuotaOverrides(_Request):
    """A key's quotas that replace its role's defaults. A field left out keeps the
    role's default; null lifts that limit."""

    requests_per_second: NonNegativeRate | None = Field(
        None, description="Sustained request rate of the key."
    )
    burst: Index | None = Field(None, description="Requests at once above the rate.")
    live_episodes: Index | None = Field(
        None, description="Unfinished episodes of the key's tenant."
    )
    metadata_bytes: Index | None = Field(
        None, description="Bytes of metadata held by the tenant's unfinished episodes."
    )
    group_size: Index | None = Field(None, description="Largest `n` of one create request.")
    batch_steps: Index | None = Field(None, description="Most steps in one batch request.")


class CreateKeyRequest(_Request):
    tenant: str = Field(
        pattern=TENANT_PATTERN,
        description="The tenant the key acts for (its episodes and runs): lower-case "
        "letters, digits and `_.-`, up to 63 characters.",
    )
    role: KeyRole
    name: Text | None = Field(
        None, min_length=1, max_length=200, description="A label for people: who holds it."
    )
    quotas: QuotaOverrides | None = Field(
        None, description="Overrides of the role's default quotas."
    )


class KeyInfo(BaseModel):
    """An API key as the service keeps it: never the key itself, nor its hash."""

    id: str = Field(
        description="The key's public id (`key_…`): what logs and metrics name, and what "
        "revoking takes."
    )
    tenant: str
    role: KeyRole
    name: str | None
    quotas: dict[str, float | int | None] = Field(
        description="The key's overrides of its role's default quotas (null: no limit); "
        "a quota not named here is the role's."
    )
    created_at: datetime
    revoked_at: datetime | None = Field(description="When it was revoked; null while it works.")


class CreatedKey(KeyInfo):
    """A new key, with the key itself: shown this once, the service keeps only its hash."""

    key: str = Field(description="The key, for `Authorization: Bearer <key>`.")


class KeysResponse(BaseModel):
    keys: list[KeyInfo] = Field(description="Oldest first.")
