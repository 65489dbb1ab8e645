"""Each episode's shop database, generated from its seed, and a sandbox to query it.

The database is derived data (the same seed always gives the same bytes), so it
is rebuilt or taken from a small cache rather than kept in the episode's state.
Queries run on a private in-memory copy behind an authorizer that allows
reading only, and only the functions of ``functions.ALLOWED``, under a deadline,
a row limit and size limits: hostile SQL can neither write, attach files, change
pragmas, run extension code nor hang the service.
"""

from __future__ import annotations

import random
import sqlite3
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from wander.service.envs.sql.functions import ALLOWED

SCHEMA = """
CREATE TABLE customers (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT NOT NULL,
    signup_date TEXT NOT NULL
);
CREATE TABLE products (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL, category TEXT NOT NULL, price REAL NOT NULL
);
CREATE TABLE orders (
    id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
    order_date TEXT NOT NULL, status TEXT NOT NULL
);
CREATE TABLE order_items (
    id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL REFERENCES orders(id),
    product_id INTEGER NOT NULL REFERENCES products(id), quantity INTEGER NOT NULL,
    unit_price REAL NOT NULL
);
"""

FIRST = [
    "Ada",
    "Ben",
    "Chloe",
    "Dev",
    "Elena",
    "Farid",
    "Grace",
    "Hiro",
    "Ines",
    "Jon",
    "Kemi",
    "Luca",
    "Maya",
    "Nils",
    "Omar",
]
LAST = [
    "Okafor",
    "Silva",
    "Novak",
    "Tanaka",
    "Moreau",
    "Haddad",
    "Larsen",
    "Costa",
    "Weber",
    "Rossi",
    "Kim",
    "Patel",
]
COUNTRIES = ["Brazil", "Canada", "France", "Germany", "India", "Japan", "Kenya", "Spain"]
CATEGORIES = {
    "books": ["Atlas", "Cookbook", "Novel", "Poetry Reader", "Field Guide"],
    "garden": ["Trowel", "Seed Kit", "Watering Can", "Planter", "Pruner"],
    "kitchen": ["Kettle", "Skillet", "Whisk", "Teapot", "Knife Set"],
    "toys": ["Kite", "Puzzle", "Yo-yo", "Robot Kit", "Marbles"],
}
STATUSES = ["delivered", "delivered", "delivered", "shipped", "cancelled"]

TIME_LIMIT_SECONDS = 1.0
"""The longest one query runs; the step's budget (``budget.py``) may cut it shorter."""
PROGRESS_STEPS = 1_000
"""SQLite program steps between two looks at the deadline: more overshoot the deadline
on a loop over large values, fewer slow a join-heavy query down; 1,000 keeps both
small."""
ROW_LIMIT = 50
CELL_CHARS = 200
MAX_QUERY_CHARS = 2_048
"""The longest query text accepted: a question about the shop takes a few hundred. It
also bounds the work SQLite cannot interrupt (see ``MAX_VALUE_BYTES``), by bounding how
many function calls one row can hold."""
MAX_VALUE_BYTES = 4_096
"""The largest string or blob a query may make (``SQLITE_LIMIT_LENGTH``, 1 GB by default).
SQLite checks the deadline only between rows and loop turns, never inside a function
call, and some functions take time quadratic in their arguments (``LIKE``,
``replace``, ``instr``): with values of 1 MB, one call runs for seconds to minutes. At
4 KiB the slowest is a two-argument ``trim`` (its character set is bounded to a twelfth
of this limit), and a query of ``MAX_QUERY_CHARS`` packed with them stays under a
second in one row. The
shop's values are short: a ``group_concat`` of every ordered item's product name is
~3.6 KB."""
MAX_PATTERN_BYTES = 100
"""The longest ``LIKE``/``GLOB`` pattern (``SQLITE_LIMIT_LIKE_PATTERN_LENGTH``): a match
costs the value's length times the pattern's."""
MAX_COLUMNS = 100
"""The most columns of a result (``SQLITE_LIMIT_COLUMN``, 2,000 by default); with
``MAX_VALUE_BYTES``, it bounds the memory of the rows fetched."""
READ_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE}
LIMITS = {
    sqlite3.SQLITE_LIMIT_LENGTH: MAX_VALUE_BYTES,
    sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH: MAX_PATTERN_BYTES,
    sqlite3.SQLITE_LIMIT_COLUMN: MAX_COLUMNS,
    sqlite3.SQLITE_LIMIT_ATTACHED: 0,
}
ERRORS = {
    "string or blob too big": f"a value would be over {MAX_VALUE_BYTES} bytes "
    "(string or blob too big)",
    "LIKE or GLOB pattern too complex": "LIKE or GLOB pattern too complex "
    f"(at most {MAX_PATTERN_BYTES} bytes)",
}
"""SQLite's messages that say less than the model needs, and what it is told instead."""


def _populate(connection: sqlite3.Connection, rng: random.Random) -> None:
    connection.executescript(SCHEMA)
    names = rng.sample([f"{first} {last}" for first in FIRST for last in LAST], rng.randint(18, 30))
    customers = [
        (i, name, rng.choice(COUNTRIES), f"2023-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}")
        for i, name in enumerate(names, 1)
    ]  # fmt: skip
    products = []
    for category, items in CATEGORIES.items():
        for item in rng.sample(items, rng.randint(3, 5)):
            products.append((len(products) + 1, item, category, round(rng.uniform(3, 120), 2)))
    orders, order_items = [], []
    for order_id in range(1, rng.randint(60, 90)):
        date = f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        orders.append((order_id, rng.randint(1, len(customers)), date, rng.choice(STATUSES)))
        for product in rng.sample(products, rng.randint(1, 4)):
            quantity = rng.randint(1, 5)
            order_items.append((len(order_items) + 1, order_id, product[0], quantity, product[3]))
    connection.executemany("INSERT INTO customers VALUES (?, ?, ?, ?)", customers)
    connection.executemany("INSERT INTO products VALUES (?, ?, ?, ?)", products)
    connection.executemany("INSERT INTO orders VALUES (?, ?, ?, ?)", orders)
    connection.executemany("INSERT INTO order_items VALUES (?, ?, ?, ?, ?)", order_items)
    connection.commit()


@lru_cache(maxsize=256)
def database_bytes(seed: int) -> bytes:
    """The serialized shop database of ``seed`` (deterministic, cached)."""
    connection = sqlite3.connect(":memory:")
    _populate(connection, random.Random(seed))
    data = connection.serialize()
    connection.close()
    return data


class QueryError(Exception):
    """The query was refused, failed or was cut off; the message says why."""


@dataclass(frozen=True, slots=True)
class Deadline:
    """When a query is interrupted (on ``time.monotonic()``), and what the model is told."""

    at: float
    reason: str


def query_deadline() -> Deadline:
    """A query's own deadline, ``TIME_LIMIT_SECONDS`` from now."""
    reason = f"the query ran over {TIME_LIMIT_SECONDS:g} s and was stopped"
    return Deadline(time.monotonic() + TIME_LIMIT_SECONDS, reason)


class Authorizer:
    """Reading, and calling the allowed functions; nothing else. It remembers the
    function it refused, for the message (SQLite's own says only "not authorized")."""

    def __init__(self) -> None:
        self.refused: str | None = None

    def __call__(self, action: int, _table: str | None, name: str | None, *_: Any) -> int:
        if action == sqlite3.SQLITE_FUNCTION:
            if name in ALLOWED:
                return sqlite3.SQLITE_OK
            self.refused = name
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK if action in READ_ACTIONS else sqlite3.SQLITE_DENY


def open_readonly(seed: int, authorizer: Authorizer) -> sqlite3.Connection:
    """A private copy of the episode's database that only reads, within ``LIMITS``."""
    connection = sqlite3.connect(":memory:", check_same_thread=False)
    connection.deserialize(database_bytes(seed))
    for limit, value in LIMITS.items():
        connection.setlimit(limit, value)
    # Sorts and materialized subqueries past the page cache spill to temporary files,
    # which a worker may not write (RLIMIT_FSIZE 0: "disk I/O error"); memory is bounded
    # by the worker's RLIMIT_AS, and its growth by the deadline.
    connection.execute("PRAGMA temp_store = MEMORY")
    connection.set_authorizer(authorizer)
    return connection


def run_query(
    seed: int, sql: str, params: tuple[Any, ...] = (), deadline: Deadline | None = None
) -> tuple[list[str], list[tuple[Any, ...]], bool]:
    """Columns, at most ``ROW_LIMIT`` rows, and whether rows were left out; interrupted
    at ``deadline`` (by default the query's own, ``TIME_LIMIT_SECONDS``)."""
    if len(sql) > MAX_QUERY_CHARS:
        raise QueryError(
            f"the query is {len(sql)} characters long; at most {MAX_QUERY_CHARS} are accepted"
        )
    authorizer = Authorizer()
    connection = open_readonly(seed, authorizer)
    limit = deadline or query_deadline()
    connection.set_progress_handler(lambda: int(time.monotonic() > limit.at), PROGRESS_STEPS)
    try:
        cursor = connection.execute(sql, params)
        rows = cursor.fetchmany(ROW_LIMIT + 1)
        columns = [column[0] for column in cursor.description or []]
    except sqlite3.Error as exc:
        raise QueryError(_explain(str(exc), limit, authorizer)) from None
    except (ValueError, OverflowError, MemoryError) as exc:
        raise QueryError(str(exc)) from None
    finally:
        connection.close()
    return columns, rows[:ROW_LIMIT], len(rows) > ROW_LIMIT


def _explain(message: str, deadline: Deadline, authorizer: Authorizer) -> str:
    """What the model is told of SQLite's error ``message``."""
    if message == "interrupted":
        return deadline.reason
    if "not authorized" in message:
        if authorizer.refused is not None:
            return (
                f"not authorized: the function {authorizer.refused}() is not available "
                "(the core scalar, aggregate, date/time and math functions are)"
            )
        return "not authorized: the database is read-only (SELECT only)"
    return ERRORS.get(message, message)


def format_result(columns: list[str], rows: list[tuple[Any, ...]], truncated: bool) -> str:
    """A small text table, as a tool result."""

    def cell(value: Any) -> str:
        text = "NULL" if value is None else str(value)
        return text if len(text) <= CELL_CHARS else text[:CELL_CHARS] + "…"

    lines = [" | ".join(columns)] + [" | ".join(cell(v) for v in row) for row in rows]
    if not rows:
        lines.append("(no rows)")
    if truncated:
        lines.append(f"(only the first {ROW_LIMIT} rows are shown)")
    return "\n".join(lines)


def tables(seed: int, deadline: Deadline | None = None) -> list[str]:
    query = "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
    return [row[0] for row in run_query(seed, query, deadline=deadline)[1]]


def describe(seed: int, table: str, deadline: Deadline | None = None) -> str:
    """The ``CREATE TABLE`` statement of ``table``."""
    query = "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?"
    _, rows, _ = run_query(seed, query, (table,), deadline)
    if not rows:
        raise QueryError(f"no table named {table!r}; call list_tables")
    return str(rows[0][0])
