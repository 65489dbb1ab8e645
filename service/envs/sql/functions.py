"""The SQL functions a query may call: an allow-list, checked by the authorizer.

SQLite's authorizer is asked once per function a statement names (``SQLITE_FUNCTION``,
with the function's canonical lower-case name) while the statement is prepared, so a
refused function never runs. Allowed: the core scalar, aggregate, window, date/time
and math functions, everything a question about the shop database could need.

Refused, and why:

- ``randomblob``, ``zeroblob``: they make large values from a short query, and their
  cost cannot be interrupted. SQLite checks for an interrupt (``Connection.interrupt``
  or the progress handler) only where its program jumps back, at the end of a loop, so
  one row of many ``length(randomblob(999999))`` runs for seconds past the deadline,
  whatever the handler's granularity. No question needs random bytes.
- ``random``: no question needs it, and it would make the transcript of the same
  actions differ between runs.
- ``load_extension``: loading code (already off in Python's sqlite3, refused here too).
- ``fts3_tokenizer``, ``fts5*``, the ``rtree*`` checks, FTS's ``snippet``/``match``...:
  extension internals; ``fts3_tokenizer('simple')`` returns a raw pointer.
- ``sqlite_*``, ``changes``, ``last_insert_rowid``, ``total_changes``: the library's
  build and the connection's bookkeeping, nothing about the data.
- ``json*``, ``->``, ``->>``, ``subtype``: the database holds no JSON.
"""

from __future__ import annotations

SCALAR = frozenset({
    "abs", "char", "coalesce", "concat", "concat_ws", "format", "glob", "hex", "ifnull",
    "iif", "instr", "length", "like", "likelihood", "likely", "lower", "ltrim", "max",
    "min", "nullif", "octet_length", "printf", "quote", "replace", "round", "rtrim", "sign",
    "soundex", "substr", "substring", "trim", "typeof", "unhex", "unicode", "unlikely",
    "upper",
})  # fmt: skip
"""``concat``, ``concat_ws``, ``octet_length`` and ``unhex`` exist from SQLite 3.44 on."""

AGGREGATE = frozenset({
    "avg", "count", "group_concat", "max", "min", "string_agg", "sum", "total",
    "cume_dist", "dense_rank", "first_value", "lag", "last_value", "lead", "nth_value",
    "ntile", "percent_rank", "rank", "row_number",
})  # fmt: skip
"""Aggregates, and the window functions (``string_agg``: SQLite 3.44 on)."""

DATE_TIME = frozenset({
    "current_date", "current_time", "current_timestamp", "date", "datetime", "julianday",
    "strftime", "time", "timediff", "unixepoch",
})  # fmt: skip
"""``timediff``: SQLite 3.43 on."""

MATH = frozenset({
    "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "ceil", "ceiling", "cos",
    "cosh", "degrees", "exp", "floor", "ln", "log", "log10", "log2", "mod", "pi", "pow",
    "power", "radians", "sin", "sinh", "sqrt", "tan", "tanh", "trunc",
})  # fmt: skip

ALLOWED = SCALAR | AGGREGATE | DATE_TIME | MATH
