"""One OpenEnv session: a Wander episode driven through the engine, in OpenEnv's shapes.

A WebSocket connection holds one ``Session`` for its life; an HTTP request makes one for
itself. The session only remembers which episode it plays and the turn it expects:
the episode lives in the store, so a session that ends (a dropped socket, a replica that
dies) loses nothing, and another session on any replica attaches to the same episode.
The engine owns everything else (turns, seeds, atomic steps, archiving); the turn the
session sends with each step is what keeps a resent step from applying twice.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from wander.client.models import CreateEpisodesRequest
from wander.service.api.openenv.actions import ListTools, Reply, parse_action
from wander.service.api.openenv.wire import OpenEnvResetRequest, field_errors
from wander.service.engine import Engine
from wander.service.envs.sdk import Environment
from wander.service.errors import EpisodeNotFound, InvalidInput, WanderError
from wander.service.tenancy import Principal

Payload = dict[str, Any]
"""An OpenEnv answer, ``{observation, reward, done, metadata}``, ready for JSON."""

WANDER_ID_PREFIX = "ep_"
"""Reset's ``episode_id`` with this prefix must name a live episode: a client reattaching
to one that expired is told so, rather than given a fresh game under the old name."""
LABEL_KEY = "openenv_episode_id"


class NoEpisode(WanderError):
    """A step or a state before the session has an episode."""

    def __init__(self) -> None:
        super().__init__(
            "no episode yet: send a reset first, or connect with ?episode_id=ID "
            "to continue an episode"
        )


class Session:
    """The episode an OpenEnv client plays, and the turn it expects next."""

    def __init__(self, engine: Engine, env: Environment[Any], principal: Principal) -> None:
        self.engine = engine
        self.env = env
        self.principal = principal
        """Who plays: its tenant owns the episodes it creates, and it sees only those."""
        self.episode_id: str | None = None
        self.turn: int | None = None
        """Sent with each step: None (HTTP without ``turn``) steps whatever turn it is."""
        self.done = False
        self.played: list[str] = []
        """The episodes this session created or played, in order: what its request's
        audit line names (OpenEnv's paths do not: the episode is in the body, or new)."""

    async def follow(self, episode_id: str, turn: int | None) -> None:
        """Step ``episode_id`` at ``turn`` or, without one, at whatever turn it is (an
        HTTP request); checked first to be an episode of this environment."""
        await self._record(episode_id)
        self._play(episode_id)
        self.turn = turn

    async def attach(self, episode_id: str, turn: int | None = None) -> Payload:
        """Continue ``episode_id``: its whole transcript, the prompt to answer next. With
        ``turn`` (the last turn the client saw) the session resends from there: a step
        it resends that was already applied returns its recorded result."""
        return self._attached(await self._record(episode_id), turn)

    async def reset(self, data: dict[str, Any]) -> Payload:
        """A new episode (OpenEnv's reset), or a reattach when ``episode_id`` names one."""
        try:
            request = OpenEnvResetRequest.model_validate(data)
        except ValidationError as exc:
            raise InvalidInput("the reset is invalid", field_errors(exc)) from None
        label: str | None = request.episode_id
        if label is not None:
            record = await self._existing(label)
            if record is not None:
                others = sorted(request.model_fields_set - {"episode_id"})
                if others:
                    raise InvalidInput(
                        "reattaching to an episode takes no other field",
                        [{"loc": [name], "msg": "not allowed with a live episode_id",
                          "type": "extra_forbidden"} for name in others],
                    )  # fmt: skip
                return self._attached(record, None)
        fields = request.model_dump(exclude={"episode_id"}, exclude_unset=True)
        if label is not None:
            fields["metadata"] = {**(fields.get("metadata") or {}), LABEL_KEY: label}
        request = CreateEpisodesRequest(env=self.env.name, **fields)
        [episode] = await self.engine.create(request, self.principal)
        self._play(episode["id"])
        self.turn, self.done = 0, episode["done"]
        return answer(episode["observation"], episode["info"], self._metadata(), None, self.done)

    async def step(self, data: dict[str, Any]) -> Payload:
        """One action: a step of the episode, or (``list_tools``) the tools."""
        return await self.act(parse_action(data, bool(self.env.tools)))

    async def act(self, action: ListTools | Reply) -> Payload:
        if isinstance(action, ListTools):
            return self.list_tools()
        return await self.apply(action)

    async def apply(self, action: Reply) -> Payload:
        episode_id = self._episode()
        result = await self.engine.step(episode_id, action.message, self.turn, self.principal)
        self.turn, self.done = result["turn"], result["done"]
        messages = result["observation"]
        extra = {}
        if action.tool_name is not None:
            extra = {"tool_name": action.tool_name, "result": _tool_result(messages)}
        metadata = {"episode_id": episode_id, "turn": result["turn"]}
        return answer(messages, result["info"], metadata, result["reward"], self.done, extra)

    def list_tools(self) -> Payload:
        """The environment's tools as OpenEnv's ``Tool``\\ s (none for a game without)."""
        tools = [
            {"name": spec["name"], "description": spec["description"],
             "input_schema": spec["inputSchema"]}
            for spec in mcp_tools(self.env)
        ]  # fmt: skip
        metadata = self._metadata()
        return {"observation": {"tools": tools, "metadata": metadata},
                "reward": None, "done": self.done, "metadata": metadata}  # fmt: skip

    async def state(self, episode_id: str | None = None) -> dict[str, Any]:
        """OpenEnv's State (``episode_id``, ``step_count``) and the identity of the
        session's episode (or of ``episode_id``)."""
        record = await self._record(self._episode() if episode_id is None else episode_id)
        return {
            "episode_id": record["id"],
            "step_count": record["turn"],
            **{key: record[key] for key in ("env", "split", "example", "seed", "group", "run")},
            "status": record["status"],
            "done": record["done"],
            "total": record["score"]["total"],
            "info": record["state"],
        }

    # Internals

    def _episode(self) -> str:
        if self.episode_id is None:
            raise NoEpisode()
        return self.episode_id

    def _play(self, episode_id: str) -> None:
        self.episode_id = episode_id
        if not self.played or self.played[-1] != episode_id:
            self.played.append(episode_id)

    def _metadata(self) -> dict[str, Any]:
        return {"episode_id": self.episode_id, "turn": self.turn}

    async def _record(self, episode_id: str) -> dict[str, Any]:
        record = await self.engine.episode(episode_id, self.principal)
        if record["env"] != self.env.name:
            raise WanderError(
                f"episode {episode_id} is a {record['env']!r} episode: continue it at "
                f"/openenv/{record['env']}, not /openenv/{self.env.name}"
            )
        return record

    async def _existing(self, label: str) -> dict[str, Any] | None:
        """The live episode ``label`` names, or None when it is only a label."""
        try:
            return await self._record(label)
        except EpisodeNotFound:
            if label.startswith(WANDER_ID_PREFIX):
                raise
            return None

    def _attached(self, record: dict[str, Any], turn: int | None) -> Payload:
        self._play(record["id"])
        self.done = record["done"]
        self.turn = record["turn"] if turn is None else turn
        messages = record["messages"]
        return answer(
            messages, record["state"], self._metadata(), None, self.done,
            prompt=prompt_text(_since_last_reply(messages)),
        )  # fmt: skip


def answer(
    messages: list[dict[str, Any]],
    info: dict[str, Any],
    metadata: dict[str, Any],
    reward: float | None,
    done: bool,
    extra: dict[str, Any] | None = None,
    *,
    prompt: str | None = None,
) -> Payload:
    """OpenEnv's wire shape of an observation (``serialize_observation``): the metadata
    both inside the observation and next to it."""
    observation = {
        "prompt": prompt_text(messages) if prompt is None else prompt,
        "messages": messages,
        "info": info,
        "metadata": metadata,
        **(extra or {}),
    }
    return {"observation": observation, "reward": reward, "done": done, "metadata": metadata}


def prompt_text(messages: list[dict[str, Any]]) -> str:
    """What a client that shows text should show the model: the contents of the messages
    that are not the model's own, joined by blank lines. At reset that is the system
    prompt and the first user message, so the model learns the rules too."""
    return "\n\n".join(
        message["content"]
        for message in messages
        if message.get("role") != "assistant" and message.get("content")
    )


def mcp_tools(env: Environment[Any]) -> list[dict[str, Any]]:
    """The environment's OpenAI tool schemas as MCP tools (``name``, ``description``,
    ``inputSchema``)."""
    return [
        {
            "name": tool["function"]["name"],
            "description": tool["function"].get("description", ""),
            "inputSchema": tool["function"].get("parameters", {"type": "object"}),
        }
        for tool in env.tools or []
    ]


def _since_last_reply(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "assistant":
            return messages[index + 1 :]
    return messages


def _tool_result(messages: list[dict[str, Any]]) -> str:
    """A call_tool's answer: the tool message's content (one call, one tool message)."""
    return "\n\n".join(m.get("content") or "" for m in messages if m.get("role") == "tool")
