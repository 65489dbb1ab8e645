"""``sql`` (tool-calling, stateful): answer a question about a shop database with SQL tools."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import Field

from wander.sdk import (
    Environment,
    GeneratedExamples,
    Message,
    Reset,
    Score,
    SizedConfig,
    State,
    Transition,
    TurnRandom,
)
from wander.service.envs.sql.budget import StepBudget
from wander.service.envs.sql.database import (
    Deadline,
    QueryError,
    describe,
    format_result,
    run_query,
    tables,
)
from wander.service.envs.sql.questions import normalize, pick

SYSTEM_PROMPT = (
    "You answer questions about a small shop's SQLite database (customers, products, "
    "orders, order items). Use the tools to look at the tables and run read-only SQL "
    "queries. When you know the answer, reply without calling a tool, with the answer "
    "alone inside <answer>...</answer> (a number, or a name)."
)
ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
EFFICIENT_CALLS = 4
"""Tool calls a correct answer may take at full efficiency; more scale it down."""


def _tool(name: str, description: str, **properties: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {
                    key: {"type": "string", "description": text} for key, text in properties.items()
                },
                "required": list(properties),
                "additionalProperties": False,
            },
        },
    }


TOOLS = [
    _tool("list_tables", "List the tables of the shop database."),
    _tool("describe_table", "Show the CREATE TABLE statement of a table.", table="Table name."),
    _tool(
        "run_sql",
        "Run one read-only SQLite query (SELECT) and see up to 50 rows of its result.",
        query="The SQL query.",
    ),
]


class SqlConfig(SizedConfig):
    max_turns: int = Field(
        12, ge=1, le=100, description="Model messages allowed; then the episode ends unanswered."
    )


def call_tool(seed: int, name: str, arguments: dict[str, Any], deadline: Deadline) -> str:
    """Run one tool call, its queries stopped at ``deadline``; raises QueryError with a
    message for the model."""
    if name == "list_tables":
        return "\n".join(tables(seed, deadline))
    if name == "describe_table":
        return describe(seed, str(arguments.get("table", "")), deadline)
    if name == "run_sql":
        query = str(arguments.get("query", ""))
        return format_result(*run_query(seed, query, deadline=deadline))
    raise QueryError(f"unknown tool {name!r}; the tools are list_tables, describe_table, run_sql")


def answer_call(state: State, function: dict[str, Any], budget: StepBudget) -> str:
    """The reply to one call that may run: its result, or its error (counted in ``state``)."""
    try:
        arguments = json.loads(function.get("arguments") or "{}")
        if not isinstance(arguments, dict):
            raise QueryError("the arguments must be a JSON object")
        return call_tool(state["db_seed"], function.get("name", ""), arguments, budget.deadline())
    except (QueryError, json.JSONDecodeError) as exc:
        state["sql_errors"] += 1
        return f"Error: {exc}"


class Sql(Environment[SqlConfig]):
    name = "sql"
    version = "1.1.0"
    description = (
        "Tool use with state: each episode has its own generated shop database; the model "
        "explores it with list_tables, describe_table and run_sql, then answers a question."
    )
    kind = "tool"
    Config = SqlConfig
    reward_weights = {"correct": 1.0, "format": 0.1, "efficiency": 0.1}
    tools = TOOLS
    pure_parsing = True  # its own checks: JSON arguments, a budgeted read-only SQL engine

    def examples(self, config: SqlConfig, split: str) -> GeneratedExamples[int]:
        """Examples are indices: each episode's database and question come from its seed."""
        size = config.split_size(split)
        return GeneratedExamples(size, lambda i: i)

    def reset(self, config: SqlConfig, example: int, seed: int) -> Reset:
        question, expected = pick(seed, example)
        state: State = {
            "db_seed": seed,
            "question": question.text,
            "expected": expected,
            "turns": 0,
            "tool_calls": 0,
            "sql_errors": 0,
            "refused_calls": 0,
            "answer": None,
            "formatted": False,
            "max_turns": config.max_turns,
        }
        messages = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": question.text},
        ]
        return Reset(state, messages)

    def step(self, config: SqlConfig, state: State, action: Message, rng: TurnRandom) -> Transition:
        state = {**state, "turns": state["turns"] + 1}
        calls = action.get("tool_calls") or []
        if not calls:
            content = action.get("content") or ""
            found = ANSWER.findall(content)
            state["answer"] = (found[-1] if found else content).strip()
            state["formatted"] = bool(found)
            return Transition(state, [], True)
        budget = StepBudget()
        replies = []
        for call in calls:
            state["tool_calls"] += 1
            refusal = budget.admit()
            if refusal is None:
                content = budget.reply(answer_call(state, call.get("function", {}), budget))
            else:
                state["refused_calls"] = state.get("refused_calls", 0) + 1
                content = f"Error: {refusal}"
            replies.append({"role": "tool", "tool_call_id": call.get("id", ""), "content": content})
        if state["turns"] >= state["max_turns"]:
            ending = f"The limit of {state['max_turns']} turns was reached without an answer."
            return Transition(state, [*replies, {"role": "user", "content": ending}], True)
        return Transition(state, replies, False)

    def score(self, config: SqlConfig, state: State) -> Score:
        answered = state["answer"] is not None
        correct = answered and normalize(state["answer"]) == state["expected"]
        calls = state["tool_calls"]
        components = {
            "correct": 1.0 if correct else 0.0,
            "format": 1.0 if state["formatted"] else 0.0,
            "efficiency": min(1.0, EFFICIENT_CALLS / calls)
            if correct and calls
            else float(correct),
        }
        metrics = {
            "correct": correct,
            "answered": answered,
            "tool_calls": calls,
            "sql_errors": state["sql_errors"],
            "refused_calls": state.get("refused_calls", 0),
            "turns": state["turns"],
        }
        return Score(components, metrics)

    def public_state(self, state: State) -> dict[str, Any]:
        hidden = {"expected", "db_seed"}
        return {key: value for key, value in state.items() if key not in hidden}
