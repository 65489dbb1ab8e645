"""What the tool calls of one step may use together: calls, time and reply bytes.

Limits per query alone did not hold a step: ten 1-second queries made a 10-second
step, and a 4 KB query a 20 MB reply. A ``StepBudget`` is made for each step; every
call asks it first whether it may run (``admit``), runs its query under its
``deadline`` and has its reply cut to what is left (``reply``). A call that may not
run is answered with an error, like any failed call, so every tool call id still gets
its reply.

The step's time sits well inside the service's deadline for an environment call
(``WANDER_ENV_CALL_SECONDS``, 5 s by default): a step that spends its budget ends with
error replies the model can read, not with ``env_timeout``. A query overruns its
deadline only by work SQLite cannot interrupt, which ``database.py`` keeps near a
second at most.
"""

from __future__ import annotations

import time

from wander.service.envs.sql.database import Deadline, query_deadline

STEP_SECONDS = 2.0
"""Time for all the tool calls of one step together."""
MAX_CALLS = 8
"""Tool calls run per step; the model's further calls are answered with an error."""
REPLY_BYTES = 8_192
"""The most UTF-8 bytes of one tool reply."""
STEP_REPLY_BYTES = 32_768
"""The most UTF-8 bytes of all the tool replies of one step."""
MIN_REPLY_BYTES = 512
"""A call runs only while the step has this much room left for its reply."""


class StepBudget:
    """The calls, time and reply bytes left to one step's tool calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.ends = time.monotonic() + STEP_SECONDS
        self.reply_bytes = STEP_REPLY_BYTES

    def admit(self) -> str | None:
        """Count the next call; why it may not run, or None when it may."""
        self.calls += 1
        if self.calls > MAX_CALLS:
            return f"not run: at most {MAX_CALLS} tool calls are run per step"
        if time.monotonic() >= self.ends:
            return f"not run: the tool calls of this step used up their {STEP_SECONDS:g} s"
        if self.reply_bytes < MIN_REPLY_BYTES:
            return f"not run: the replies of this step reached {STEP_REPLY_BYTES} bytes"
        return None

    def deadline(self) -> Deadline:
        """The next query's deadline: its own, or the step's when that comes first."""
        own = query_deadline()
        if own.at <= self.ends:
            return own
        reason = f"the query was stopped: the tool calls of this step ran over {STEP_SECONDS:g} s"
        return Deadline(self.ends, reason)

    def reply(self, content: str) -> str:
        """``content`` cut, with a note saying so, to the bytes a reply may still hold."""
        data = content.encode()
        limit = min(REPLY_BYTES, self.reply_bytes)
        if len(data) > limit:
            if limit == REPLY_BYTES:
                note = f"\n[cut: a tool reply holds at most {REPLY_BYTES} bytes; ask for less]"
            else:
                note = f"\n[cut: the replies of one step hold at most {STEP_REPLY_BYTES} bytes]"
            data = data[: limit - len(note)]
            content = data.decode(errors="ignore") + note
            data = content.encode()
        self.reply_bytes -= len(data)
        return content
