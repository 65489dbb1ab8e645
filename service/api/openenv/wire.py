"""The OpenEnv wire models of Wander's OpenEnv surface (OpenEnv 0.10's shapes).

OpenEnv's own server builds one action, observation and state class per environment;
Wander publishes the same three models for every environment (plus their tool variants
for tool environments), so that any OpenEnv client, Verifiers' ``OpenEnvTaskset`` among
them, can drive any Wander environment. They describe the wire and document it
(``/schema``, the OpenAPI document); the payloads themselves are built as plain dicts
on the hot path (``session``).

The action has exactly one required field, ``content``: Verifiers then sends the
model's raw reply as that field. Its title is Wander's own: with a generic title
("Action", "CallToolAction") Verifiers would first ask for tools.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from wander.client.models import CreateEpisodesRequest, Index, Message, Text, ToolCall


class WanderAction(BaseModel):
    """The model's reply to the environment."""

    model_config = ConfigDict(extra="forbid", title="WanderAction")

    content: str = Field(description="The model's whole reply, as text.")


class WanderToolAction(WanderAction):
    """The model's reply to the environment, which may call the environment's tools."""

    model_config = ConfigDict(extra="forbid", title="WanderAction")

    tool_calls: list[ToolCall] | None = Field(
        None,
        description="The tool calls of the reply, in OpenAI's format.",
    )


class WanderObservation(BaseModel):
    """What reset and step answer, inside `observation`; the same `metadata` is also at
    the top level of the answer, next to `reward` and `done`."""

    model_config = ConfigDict(title="WanderObservation")

    prompt: str = Field(
        description="What to show the model next, as plain text: the contents of the new "
        "messages that are not the model's own, joined by blank lines (at reset: the "
        "system prompt and the first user message)."
    )
    messages: list[Message] = Field(
        description="The environment's new messages in the OpenAI chat shape (after a "
        "reattach: the whole transcript)."
    )
    info: dict[str, Any] = Field(description="The environment's public state.")
    metadata: dict[str, Any] = Field(
        description="`episode_id` (the Wander episode, for REST and for reattaching) and "
        "`turn` (steps applied so far)."
    )


class McpTool(BaseModel):
    """A tool as OpenEnv's ``Tool`` describes it."""

    name: str
    description: str
    input_schema: dict[str, Any]


class WanderToolObservation(WanderObservation):
    """What reset and step answer in a tool environment, which also answers tool actions."""

    model_config = ConfigDict(title="WanderObservation")

    tools: list[McpTool] | None = Field(
        None, description="The answer to a list_tools action (then nothing else is set)."
    )
    tool_name: str | None = Field(None, description="The tool a call_tool action called.")
    result: str | None = Field(None, description="What that tool answered.")


class WanderState(BaseModel):
    """OpenEnv's State (`episode_id`, `step_count`) and the episode's identity."""

    model_config = ConfigDict(extra="allow", title="WanderState")

    episode_id: str = Field(description="The Wander episode's id.")
    step_count: int = Field(description="Steps applied so far (the episode's turn).")
    env: str
    split: str
    example: int
    seed: int
    group: str
    run: str | None
    status: Literal["active", "done", "aborted"]
    done: bool
    total: float = Field(description="The running score (final once done).")
    info: dict[str, Any] = Field(description="The environment's public state.")


_CREATION_FIELDS = ("seed", "example", "split", "config", "run", "metadata")

OpenEnvResetRequest = create_model(
    "OpenEnvResetRequest",
    __config__=ConfigDict(extra="forbid"),
    __doc__="OpenEnv's reset (`seed`, `episode_id`) with Wander's creation fields.",
    episode_id=(
        Text | None,
        Field(
            None,
            max_length=255,
            description="A live Wander episode's id: reattach to it (then no other field). "
            "Any other text is a label, kept in the new episode's metadata as "
            "`openenv_episode_id`; an unknown `ep_…` id is 404 `episode_not_found`.",
        ),
    ),
    **{  # the one definition of these fields is the creation request's
        name: (field.annotation, field)
        for name, field in CreateEpisodesRequest.model_fields.items()
        if name in _CREATION_FIELDS
    },
)
"""``POST /reset``'s body and the WS reset frame's ``data``."""


class OpenEnvStepRequest(BaseModel):
    """``POST /step``: OpenEnv's StepRequest, plus the stored episode to step."""

    model_config = ConfigDict(extra="forbid")

    action: dict[str, Any] = Field(
        description="A `WanderAction` (see `/schema`), or a tool action."
    )
    episode_id: Text = Field(
        max_length=200,
        description="The episode to step (`metadata.episode_id` of the reset). Required: "
        "OpenEnv's stateless /step, a fresh environment per call, has no meaning for "
        "stored episodes.",
    )
    turn: Index | None = Field(
        None, description="Steps already applied: makes a retry safe (applied at most once)."
    )
    timeout_s: float | None = Field(
        None, gt=0, description="Accepted for OpenEnv's sake; the service's own deadlines apply."
    )
    request_id: str | None = Field(None, max_length=255, description="Accepted, not used.")


class OpenEnvAnswer(BaseModel):
    """OpenEnv's ResetResponse and StepResponse."""

    observation: dict[str, Any] = Field(description="A `WanderObservation`.")
    reward: float | None = Field(
        description="The step's reward, the change of the running score (null at reset "
        "and for list_tools): an episode's rewards add up to its score."
    )
    done: bool
    metadata: dict[str, Any] | None = Field(description="`episode_id` and `turn`.")


class HealthAnswer(BaseModel):
    status: Literal["healthy"] = "healthy"


class EnvironmentMetadata(BaseModel):
    """OpenEnv's EnvironmentMetadata."""

    name: str
    description: str
    readme_content: str | None = None
    version: str | None = None
    author: str | None = None
    documentation_url: str | None = None


class SchemaAnswer(BaseModel):
    """OpenEnv's SchemaResponse: JSON schemas of the action, the observation and the state."""

    action: dict[str, Any]
    observation: dict[str, Any]
    state: dict[str, Any]
    reset_observation: dict[str, Any]


def schemas(tool_env: bool) -> SchemaAnswer:
    """``GET /schema`` of an environment (with or without tools)."""
    action = WanderToolAction if tool_env else WanderAction
    observation = (WanderToolObservation if tool_env else WanderObservation).model_json_schema()
    return SchemaAnswer(
        action=action.model_json_schema(),
        observation=observation,
        state=WanderState.model_json_schema(),
        reset_observation=observation,
    )


# WebSocket frames from the client (OpenEnv's WSResetMessage ... WSMCPMessage): validated
# as OpenEnv validates them, so that a bad frame gets the same VALIDATION_ERROR.


class _Frame(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ResetFrame(_Frame):
    type: Literal["reset"]
    data: dict[str, Any] = Field(default_factory=dict)


class StepFrame(_Frame):
    type: Literal["step"]
    data: dict[str, Any]


class StateFrame(_Frame):
    type: Literal["state"]


class CloseFrame(_Frame):
    type: Literal["close"]


class McpFrame(_Frame):
    type: Literal["mcp"]
    data: dict[str, Any]


class JsonRpcRequest(BaseModel):
    """A JSON-RPC 2.0 request (MCP's ``tools/list`` and ``tools/call``)."""

    model_config = ConfigDict(extra="forbid")

    jsonrpc: Literal["2.0"]
    method: str
    params: dict[str, Any] = Field(default_factory=dict)
    id: str | int | None = None


def field_errors(exc: ValidationError) -> list[dict[str, Any]]:
    """pydantic's errors as the API's field errors: ``loc``, ``msg``, ``type``."""
    return [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
