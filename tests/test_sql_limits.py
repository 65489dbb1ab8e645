"""The sql environment's limits hold for a whole step: one time budget for
all of a step's tool calls, at most 8 calls run, replies bounded in bytes, query text
bounded, and only allow-listed SQL functions. Everything over a limit is an ``Error:``
tool reply to the model, never an ``env_timeout``: the attacks that used to run for
seconds, or return megabytes, are here."""

from __future__ import annotations

import sqlite3
from typing import Any

import httpx
import pytest

from tests.helpers import IN_THE_SHARED_LOOP, create, step, tool_call, tools
from wander.sdk import TurnRandom
from wander.service.envs.sql import Sql, SqlConfig
from wander.service.envs.sql.budget import MAX_CALLS, REPLY_BYTES, STEP_REPLY_BYTES
from wander.service.envs.sql.database import MAX_QUERY_CHARS, database_bytes

SHARED_SERVICE = True

ENV, CONFIG, SEED = Sql(), SqlConfig(), 1234
ENDLESS = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
"""A query that never ends on its own: only its deadline stops it."""
RANDOMBLOB = "length(randomblob(999999))"
WIDE = "SELECT " + ", ".join([f"printf('%.*c', 200, 'x') AS c{i}" for i in range(60)])
WIDE += " FROM order_items"
"""60 columns of 200 characters on every row: ~600 KB of text for 50 rows."""


def run(*queries: str) -> tuple[list[str], dict[str, Any]]:
    """One step of ``run_sql`` calls, straight on the environment: the replies' contents,
    in order, and the metrics after it."""
    state, _ = ENV.reset(CONFIG, 0, SEED)
    calls = [tool_call("run_sql", f"c{i}", query=query) for i, query in enumerate(queries)]
    state, messages, done, _ = ENV.step(CONFIG, state, tools(*calls), TurnRandom(SEED))
    assert not done and [m["tool_call_id"] for m in messages] == [c["id"] for c in calls]
    return [m["content"] for m in messages], dict(ENV.score(CONFIG, state).metrics)


async def sql_step(api: httpx.AsyncClient, *calls: dict[str, Any]) -> list[str]:
    """One step over HTTP, through the service's worker processes; the replies' contents."""
    [episode] = await create(api, env="sql", example=0)
    response = await step(api, episode["id"], tools(*calls), 0)
    assert response.status_code == 200, response.text  # never env_timeout
    return [message["content"] for message in response.json()["observation"]]


# time


@IN_THE_SHARED_LOOP
async def test_the_tool_calls_of_a_step_share_one_time_budget(api: httpx.AsyncClient) -> None:
    """Used to be 1 s per query: ten slow calls, a 10 s step (70.6 s measured)."""
    calls = [tool_call("list_tables", "t")]
    calls += [tool_call("run_sql", f"s{i}", query=ENDLESS) for i in range(4)]
    replies = await sql_step(api, *calls)
    assert replies[0].split("\n") == ["customers", "order_items", "orders", "products"]
    assert replies[1] == "Error: the query ran over 1 s and was stopped"
    assert replies[2] == "Error: the query was stopped: the tool calls of this step ran over 2 s"
    assert replies[3:] == ["Error: not run: the tool calls of this step used up their 2 s"] * 2


@IN_THE_SHARED_LOOP
async def test_the_randomblob_attack_is_refused_within_the_budget(api: httpx.AsyncClient) -> None:
    """2,300 ``length(randomblob(999999))`` in one 62 KB query used to run 9.8 s; SQLite
    cannot interrupt them (``functions.py``), so the query is refused before it runs."""
    attack = "SELECT " + ", ".join([RANDOMBLOB] * 2300)
    fitting = "SELECT " + " + ".join([RANDOMBLOB] * 70)
    assert len(fitting) <= MAX_QUERY_CHARS < len(attack)
    replies = await sql_step(
        api, *[tool_call("run_sql", f"r{i}", query=fitting) for i in range(10)]
    )
    refused = "Error: not authorized: the function randomblob() is not available"
    assert all(reply.startswith(refused) for reply in replies[:MAX_CALLS]), replies
    assert (
        replies[MAX_CALLS:]
        == [f"Error: not run: at most {MAX_CALLS} tool calls are run per step"] * 2
    )
    [too_long] = await sql_step(api, tool_call("run_sql", "a", query=attack))
    assert too_long == (
        f"Error: the query is {len(attack)} characters long; at most {MAX_QUERY_CHARS} are accepted"
    )


@IN_THE_SHARED_LOOP
async def test_the_slowest_rows_allowed_still_end_within_the_budget(
    api: httpx.AsyncClient,
) -> None:
    """SQLite checks its deadline between rows, never inside a function call, and a
    two-argument ``trim`` takes the product of its arguments' lengths: values are bounded
    (4 KiB) so that rows of such calls end soon after the deadline. (40 calls a row, as
    here, take ~0.2 s; the query text fits 90 at most, see ``database.py``.)"""
    rows = "n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n)"
    a = "s(a) AS (SELECT printf('%.*c', 3700, 'a'))"
    c = "t(c) AS (SELECT replace(hex(printf('%.*c', 165, 'x')), '7', 'b') || 'a')"
    packed = f"WITH RECURSIVE {rows}, {a}, {c} SELECT sum("
    packed += "+".join(["(ltrim(a, c) IS NULL)"] * 40) + ") FROM n, s, t"
    assert len(packed) <= MAX_QUERY_CHARS
    replies = await sql_step(api, *[tool_call("run_sql", f"q{i}", query=packed) for i in range(8)])
    assert replies[:2] == [
        "Error: the query ran over 1 s and was stopped",
        "Error: the query was stopped: the tool calls of this step ran over 2 s",
    ]
    assert replies[2:] == ["Error: not run: the tool calls of this step used up their 2 s"] * 6


# calls


def test_at_most_8_tool_calls_run_per_step() -> None:
    replies, metrics = run(*["SELECT COUNT(*) FROM orders"] * 11)
    count = replies[0]
    assert count.startswith("COUNT(*)\n") and replies[:MAX_CALLS] == [count] * MAX_CALLS
    refusal = f"Error: not run: at most {MAX_CALLS} tool calls are run per step"
    assert replies[MAX_CALLS:] == [refusal] * 3
    assert metrics["tool_calls"] == 11 and metrics["refused_calls"] == 3
    assert metrics["sql_errors"] == 0


# bytes


def test_a_reply_is_cut_at_8_kb_and_a_step_at_32_kb() -> None:
    """A 2 KB query used to return 50 rows of every column in full: 20 MB in one reply."""
    replies, metrics = run(*[WIDE] * 6)
    cut = f"\n[cut: a tool reply holds at most {REPLY_BYTES} bytes; ask for less]"
    shown = STEP_REPLY_BYTES // REPLY_BYTES
    for reply in replies[:shown]:
        assert len(reply.encode()) == REPLY_BYTES and reply.endswith(cut)
        assert reply.startswith("c0 | c1 | c2")
    assert sum(len(reply.encode()) for reply in replies[:shown]) == STEP_REPLY_BYTES
    refusal = f"Error: not run: the replies of this step reached {STEP_REPLY_BYTES} bytes"
    assert replies[shown:] == [refusal] * (6 - shown)
    assert metrics["refused_calls"] == 6 - shown


def test_a_reply_cut_by_what_the_step_has_left_says_so() -> None:
    some = "SELECT printf('%.*c', 190, 'y') AS c FROM order_items LIMIT 25"  # ~4.8 KB
    replies, _ = run(WIDE, WIDE, WIDE, some, WIDE)
    assert replies[3].split("\n") == ["c"] + ["y" * 190] * 25
    assert len(replies[4].encode()) == STEP_REPLY_BYTES - sum(len(r.encode()) for r in replies[:4])
    assert replies[4].startswith("c0 | c1 | c2")
    assert replies[4].endswith(
        f"\n[cut: the replies of one step hold at most {STEP_REPLY_BYTES} bytes]"
    )


def test_short_replies_are_untouched() -> None:
    """What a question needs comes back as before: rows, in full."""
    replies, _ = run("SELECT name, country FROM customers ORDER BY id")
    plain = sqlite3.connect(":memory:")
    plain.deserialize(database_bytes(SEED))
    rows = plain.execute("SELECT name, country FROM customers ORDER BY id").fetchall()
    assert replies[0].split("\n") == ["name | country", *(f"{n} | {c}" for n, c in rows)]


def test_the_query_text_is_bounded() -> None:
    longest = "SELECT 1" + " " * (MAX_QUERY_CHARS - 8)
    replies, metrics = run(longest, longest + " ")
    assert replies[0] == "1\n1"
    assert replies[1] == (
        f"Error: the query is {MAX_QUERY_CHARS + 1} characters long; "
        f"at most {MAX_QUERY_CHARS} are accepted"
    )
    assert metrics["sql_errors"] == 1 and metrics["refused_calls"] == 0


def test_values_and_patterns_are_bounded() -> None:
    long_pattern = "SELECT name FROM products WHERE name LIKE '%' || printf('%.*c', 120, 'a')"
    replies, _ = run("SELECT length(hex(printf('%.*c', 3000, 'a')))", long_pattern)
    assert replies == [
        "Error: a value would be over 4096 bytes (string or blob too big)",
        "Error: LIKE or GLOB pattern too complex (at most 100 bytes)",
    ]


# functions


@pytest.mark.parametrize(
    "call",
    ["fts3_tokenizer('simple')", "load_extension('/tmp/x')", "randomblob(4)", "zeroblob(4)",
     "random()", "sqlite_version()", "json('{}')", "changes()"],
)  # fmt: skip
def test_functions_outside_the_allow_list_are_refused(call: str) -> None:
    """``fts3_tokenizer('simple')`` used to return a raw pointer of the process."""
    replies, metrics = run(f"SELECT {call}")
    name = call.split("(")[0]
    assert replies == [
        f"Error: not authorized: the function {name}() is not available "
        "(the core scalar, aggregate, date/time and math functions are)"
    ]
    assert metrics["sql_errors"] == 1


QUESTIONS_MAY_NEED = """
SELECT COUNT(*), count(DISTINCT country), ROUND(AVG(p.price), 2), sum(i.quantity),
       total(i.unit_price), max(p.price), min(p.name), group_concat(DISTINCT p.category),
       upper(min(c.name)), lower('ABC'), length('abc'), substr('2024-03-05', 1, 7),
       replace('a-b', '-', '+'), trim('  x '), instr('abc', 'c'), coalesce(NULL, 2),
       ifnull(NULL, 3), nullif(1, 1), iif(1 > 0, 'y', 'n'), abs(-4), typeof(1.5),
       printf('%.2f', 3.14159), strftime('%m', '2024-03-05'), date('2024-01-31', '+1 day'),
       julianday('2024-03-01') - julianday('2024-02-01'), sqrt(16), floor(2.7), pow(2, 10),
       max(o.order_date) LIKE '2024-%', 'Kit' GLOB 'K*'
FROM order_items i JOIN products p ON p.id = i.product_id JOIN orders o ON o.id = i.order_id
JOIN customers c ON c.id = o.customer_id
"""


def test_the_functions_a_question_needs_answer_as_in_sqlite() -> None:
    window = (
        "SELECT name, rank() OVER (ORDER BY price DESC), lag(price) OVER (ORDER BY id) "
        "FROM products"
    )
    replies, metrics = run(QUESTIONS_MAY_NEED, window)
    plain = sqlite3.connect(":memory:")
    plain.deserialize(database_bytes(SEED))
    for reply, query in zip(replies, [QUESTIONS_MAY_NEED, window], strict=True):
        rows = plain.execute(query).fetchall()
        cells = [["NULL" if value is None else str(value) for value in row] for row in rows]
        assert reply.split("\n")[1:] == [" | ".join(row) for row in cells]
    assert metrics["sql_errors"] == 0
