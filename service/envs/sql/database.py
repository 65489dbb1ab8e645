"""Each episode's shop database, generated from its seed, and a sandbox to query it.

The database is derived data (the same seed always gives the same bytes), so it
is rebuilt or taken from a small cache rather than kept in the episode's state.
Queries run on a private in-memory copy behind an authorizer that allows
reading only, with a time limit, a row limit and a size limit: hostile SQL can
neither write, attach files, change pragmas nor hang the service.
"""

from __future__ import annotations

import random
import sqlite3
import time
from functools import lru_cache
from typing import Any

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
ROW_LIMIT = 50
CELL_CHARS = 200
MAX_VALUE_BYTES = 1_000_000
READ_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
                sqlite3.SQLITE_RECURSIVE}  # fmt: skip


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


def _authorize(action: int, *_: Any) -> int:
    return sqlite3.SQLITE_OK if action in READ_ACTIONS else sqlite3.SQLITE_DENY


def open_readonly(seed: int) -> sqlite3.Connection:
    """A private copy of the episode's database that only reads."""
    connection = sqlite3.connect(":memory:", check_same_thread=False)
    connection.deserialize(database_bytes(seed))
    connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    connection.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    connection.set_authorizer(_authorize)
    return connection


def run_query(
    seed: int, sql: str, params: tuple[Any, ...] = ()
) -> tuple[list[str], list[tuple[Any, ...]], bool]:
    """Columns, at most ``ROW_LIMIT`` rows, and whether rows were left out."""
    connection = open_readonly(seed)
    deadline = time.monotonic() + TIME_LIMIT_SECONDS
    connection.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        cursor = connection.execute(sql, params)
        rows = cursor.fetchmany(ROW_LIMIT + 1)
        columns = [column[0] for column in cursor.description or []]
    except sqlite3.Error as exc:
        message = str(exc)
        if message == "interrupted":
            message = f"the query ran over {TIME_LIMIT_SECONDS:g} s and was stopped"
        elif "not authorized" in message:
            message = "not authorized: the database is read-only (SELECT only)"
        raise QueryError(message) from None
    except (ValueError, OverflowError, MemoryError) as exc:
        raise QueryError(str(exc)) from None
    finally:
        connection.close()
    return columns, rows[:ROW_LIMIT], len(rows) > ROW_LIMIT


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


def tables(seed: int) -> list[str]:
    query = "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
    return [row[0] for row in run_query(seed, query)[1]]


def describe(seed: int, table: str) -> str:
    """The ``CREATE TABLE`` statement of ``table``."""
    query = "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?"
    _, rows, _ = run_query(seed, query, (table,))
    if not rows:
        raise QueryError(f"no table named {table!r}; call list_tables")
    return str(rows[0][0])
