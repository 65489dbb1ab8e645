"""Questions about a shop database, each with the reference query that answers it."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from wander.service.envs.sql.database import CATEGORIES, COUNTRIES, run_query


@dataclass(frozen=True)
class Question:
    text: str
    sql: str
    params: tuple[Any, ...] = ()


def candidates(rng: random.Random) -> list[Question]:
    country = rng.choice(COUNTRIES)
    category = rng.choice(sorted(CATEGORIES))
    month = rng.randint(1, 12)
    customer_id = rng.randint(1, 18)
    return [
        Question(
            f"How many customers are from {country}?",
            "SELECT COUNT(*) FROM customers WHERE country = ?",
            (country,),
        ),
        Question(
            f"How many orders were placed in 2024-{month:02d} (any status)?",
            "SELECT COUNT(*) FROM orders WHERE substr(order_date, 1, 7) = ?",
            (f"2024-{month:02d}",),
        ),
        Question(
            f"What is the average price of the products in the category '{category}', "
            "rounded to 2 decimals?",
            "SELECT ROUND(AVG(price), 2) FROM products WHERE category = ?",
            (category,),
        ),
        Question(
            f"What is the total value (quantity times unit price) of the items in "
            f"delivered orders of customer {customer_id}, rounded to 2 decimals?",
            "SELECT ROUND(COALESCE(SUM(i.quantity * i.unit_price), 0), 2) FROM order_items i "
            "JOIN orders o ON o.id = i.order_id WHERE o.customer_id = ? AND o.status = 'delivered'",
            (customer_id,),
        ),
        Question(  # "which ... most" queries return the top two, so that ties can be refused
            "Which product (give its name) sold the most units across all orders that were "
            "not cancelled?",
            "SELECT p.name, SUM(i.quantity) AS units FROM order_items i JOIN products p "
            "ON p.id = i.product_id JOIN orders o ON o.id = i.order_id "
            "WHERE o.status != 'cancelled' GROUP BY p.id ORDER BY units DESC LIMIT 2",
        ),
        Question(
            "Which customer (give their full name) has placed the most orders?",
            "SELECT c.name, COUNT(*) AS n FROM orders o JOIN customers c ON c.id = o.customer_id "
            "GROUP BY c.id ORDER BY n DESC LIMIT 2",
        ),
    ]


def pick(seed: int, index: int) -> tuple[Question, str]:
    """Question ``index`` mod the templates, on the database of ``seed``, and its answer.

    A "which ... most" question with a tie at the top moves on to the next template,
    so every answer is unique.
    """
    rng = random.Random(seed)
    options = candidates(rng)
    for offset in range(len(options)):
        question = options[(index + offset) % len(options)]
        _, rows, _ = run_query(seed, question.sql, question.params)
        if len(rows) == 2 and rows[0][1] == rows[1][1]:
            continue  # a tie: no unique answer
        return question, normalize(rows[0][0])
    raise AssertionError("unreachable: the count questions never tie")


def normalize(value: Any) -> str:
    """How answers compare: numbers as numbers (2 decimals), text case- and space-blind."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{float(value):.2f}"
    text = " ".join(str(value).split()).strip().strip(".").lower()
    try:
        return f"{float(text.replace(',', '')):.2f}"
    except ValueError:
        return text
