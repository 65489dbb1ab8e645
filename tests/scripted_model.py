"""A model that is a script: an OpenAI-compatible chat endpoint whose replies are a
function of the conversation, so that ``vf-eval`` and a Wander client given the same
observations send the same replies. Served by uvicorn (``tests.scripted_model:app``)
from the venv that has verifiers.

- hot-cold (tests/vf_tasksets/hot_cold.py): halving, from "1 to N" and each answer's
  "higher" or "lower";
- marble-v1 (the published taskset): the level's known solution, found by its prompt
  among the first tasks of the taskset (``MARBLE_TASKS``) at its default config;
- ledger (tests/vf_tasksets/ledger.py, a tool taskset): one ``ledger_balance`` call per
  account named, one at a time (other tool results do not count), then the name of
  the largest balance;
- sql (Wander's tool environment): ``list_tables``, then the query that answers its
  two counting questions (examples 0 and 1 of a split), then the query's result as the
  answer; any other question gets ``describe_table`` calls until its turns run out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import cache
from typing import Any

from wander.client.models import AssistantMessage, Message
from wander.client.policy_server import create_policy_app

MARBLE_TASKS = 8
RANGE = re.compile(r"from 1 to (\d+)")
ACCOUNTS = re.compile(r"holds the most: ([a-z, ]+)\?")
BALANCE_TOOL = "ledger_balance"


def reply(messages: list[dict[str, Any]]) -> str:
    """The script's reply to a conversation."""
    said = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]
    solution = _marble_solutions().get(said[0]) if said else None
    if solution is not None:
        return f"```json\n{json.dumps(solution)}\n```"
    top = RANGE.search(said[0]) if said else None
    low, high = 1, int(top.group(1)) if top else 100
    guesses = [str(m.get("content") or "") for m in messages if m.get("role") == "assistant"]
    for guess, answer in zip(guesses, said[1:], strict=False):
        number = int(guess)
        low, high = (number + 1, high) if "higher" in answer else (low, number - 1)
    return str((low + high) // 2)


@cache
def _marble_solutions() -> dict[str, list[dict[str, Any]]]:
    try:
        from marble_v1 import MarbleTaskset  # pyright: ignore[reportMissingImports]
    except ImportError:
        return {}
    from marble_v1.taskset import MarbleConfig  # pyright: ignore[reportMissingImports]

    tasks = MarbleTaskset(MarbleConfig(id="marble-v1")).take(MARBLE_TASKS)
    return {str(task.data.prompt): task.data.solution for task in tasks}


def ledger_reply(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The script's reply in a ledger task: the next account's balance asked of the tool,
    or, all of them known, the richest account's name."""
    asked = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]
    found = next(filter(None, map(ACCOUNTS.search, asked)), None)
    accounts = found.group(1).split(", ") if found else []
    said = [str(m.get("content")) for m in messages if m.get("role") == "tool"]
    balances = [int(text) for text in said if text.isdigit()]  # not the errors
    if len(balances) < len(accounts):
        arguments = json.dumps({"account": accounts[len(balances)]})
        call = {"id": f"call-{len(balances)}", "type": "function",
                "function": {"name": BALANCE_TOOL, "arguments": arguments}}  # fmt: skip
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    richest = max(zip(balances, accounts, strict=True))[1] if accounts else "nobody"
    return {"role": "assistant", "content": richest}


SQL_QUESTIONS = (
    (re.compile(r"How many customers are from (\w+)\?"),
     "SELECT COUNT(*) FROM customers WHERE country = '{}'"),
    (re.compile(r"How many orders were placed in (2024-\d\d)"),
     "SELECT COUNT(*) FROM orders WHERE substr(order_date, 1, 7) = '{}'"),
)  # fmt: skip


def sql_reply(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The script's reply in an sql episode: a look at the tables, the question's query,
    then the last line of the query's result as the answer; a question it has no query
    for gets ``describe_table`` calls until the episode's turns run out."""
    results = [str(m.get("content")) for m in messages if m.get("role") == "tool"]
    question = " ".join(str(m.get("content")) for m in messages if m.get("role") == "user")
    query = next(
        (sql.format(found.group(1)) for pattern, sql in SQL_QUESTIONS
         if (found := pattern.search(question))),
        None,
    )  # fmt: skip
    if not results:
        call = {"name": "list_tables", "arguments": "{}"}
    elif query is None:
        call = {"name": "describe_table", "arguments": json.dumps({"table": "products"})}
    elif len(results) == 1:
        call = {"name": "run_sql", "arguments": json.dumps({"query": query})}
    else:
        return {"role": "assistant", "content": f"<answer>{results[-1].splitlines()[-1]}</answer>"}
    tool_call = {"id": f"call-{len(results)}", "type": "function", "function": call}
    return {"role": "assistant", "content": None, "tool_calls": [tool_call]}


class Scripted:
    """The script as a Wander policy, for ``create_policy_app`` (which streams, as the
    harness programs of Verifiers ask)."""

    async def act(self, messages: Sequence[Message], tools: Any = None) -> AssistantMessage:
        said = [m.model_dump(mode="json", exclude_none=True) for m in messages]
        offered = {tool.get("function", {}).get("name") for tool in tools or []}
        if BALANCE_TOOL in offered:
            return AssistantMessage.model_validate(ledger_reply(said))
        if "run_sql" in offered:
            return AssistantMessage.model_validate(sql_reply(said))
        return AssistantMessage(content=reply(said))


app = create_policy_app(Scripted(), "scripted")
