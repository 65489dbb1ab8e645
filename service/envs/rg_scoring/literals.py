"""Scorers for the reasoning-gym datasets whose own scorer calls ``eval`` on the answer.

``spiral_matrix``, ``string_insertion``, ``binary_matrix`` and ``n_queens`` give partial
credit to an answer that ``eval`` turns into the right list: the model's text ran as code
in the service, and ``oracle_answer`` (the scorer's own variable) earned that credit. Here
the answer is never evaluated, compiled or handed to ``ast``: a small recursive-descent
parser reads Python literals only, the subset of ``ast.literal_eval`` that can ever earn
credit in these four scorers:

- lists and tuples, nested (``(x)`` is ``x``; ``1, 2`` is a tuple, as ``eval`` reads it);
- integers: decimal, ``0x``/``0o``/``0b``, ``_`` between digits, one ``+``/``-`` sign;
- strings: ``'``/``"``/triple quotes, ``r``/``u`` prefixes, every escape Python defines,
  adjacent strings joined;
- the whitespace, newlines and ``#`` comments ``eval`` accepts around them.

Anything else does not parse and gets the dataset's "unreadable" score: names,
attributes, calls, operators, comprehensions, f-strings, and also floats, complex numbers,
``True``/``False``/``None``, ``...`` and unknown escapes such as ``'\\d'`` (none of which
can ever earn credit in these scorers), bytes, sets, dicts and backslash line
continuations (which could, only through quirks such as ``b'\\x01'`` iterating as ints).
Caps bound the work: ``MAX_CHARS`` characters, ``MAX_DEPTH`` nested brackets,
``MAX_VALUES`` values, and Python's own limit on the digits of a decimal integer.
Every other answer gets exactly the score reasoning-gym's ``score_answer`` gives it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Any, TypeAlias

MAX_CHARS = 100_000
"""Longest answer read: the largest bounded matrix (100 x 100) written out is ~60,000."""
MAX_DEPTH = 32
"""Deepest nesting of brackets read: the answers need 2 (a matrix)."""
MAX_VALUES = 20_000
"""Most values (containers included) read: a 100 x 100 matrix has 10,101."""

Value: TypeAlias = int | str | list["Value"] | tuple["Value", ...]

# Whitespace as Python's tokenizer sees it: eval() drops leading spaces and tabs; blank
# and comment-only lines are skipped; the expression's first line must not be indented
# (a form feed resets the column); a newline ends it outside brackets; a last line of
# only spaces (no newline after it) is an indentation error.
_LEAD = re.compile(r"[ \t]*(?:[ \t\f]*(?:#[^\n]*)?\n)*+(?:[ \t]*\f)*+")
_TAIL = re.compile(r"(?:\n[ \t\f]*+(?:#[^\n]*+)?(?=\n))*+(?:\n(?:[ \t]*\f)*+|\n[ \t\f]*#.*)?\Z")
_GAP = {False: r"[ \t\f]*+(?:#[^\n]*+)?", True: r"(?:[ \t\f\n]|#[^\n]*+)*+"}
"""Between tokens: whitespace and a comment; inside brackets (True), newlines too."""
_SKIP = {nested: re.compile(gap) for nested, gap in _GAP.items()}
_COMMA = {nested: re.compile(f"{gap}(?:(,){gap})?") for nested, gap in _GAP.items()}
_QUOTED = (  # one group per kind of quote: the body, up to the closing quote
    r"'''((?:[^'\\]|\\.|'(?!''))*+)'''",
    r'"""((?:[^"\\]|\\.|"(?!""))*+)"""',
    r"'(?!'')((?:[^'\\\n]|\\.)*+)'",  # not ''' nor """: those open a triple quote
    r'"(?!"")((?:[^"\\\n]|\\.)*+)"',
)
_STRING = {
    nested: re.compile(f"([rRuU]?)(?:{'|'.join(_QUOTED)}){gap}", re.S)
    for nested, gap in _GAP.items()
}
_REFUSED = re.compile("[\0\ud800-\udfff]")  # NUL, lone surrogates
_INT = re.compile(
    r"0[xX](?:_?[0-9a-fA-F])++|0[oO](?:_?[0-7])++|0[bB](?:_?[01])++|[0-9](?:_?[0-9])*+"
)
_ESCAPE = re.compile(
    r"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|N\{([^}]*)\}|(.))",
    re.S,
)
_SIMPLE = dict(zip("abfnrtv", "\a\b\f\n\r\t\v", strict=True)) | {c: c for c in "\\'\""} | {"\n": ""}
"""Escapes of one character; a backslash-newline continues the string."""


class LiteralError(ValueError):
    """The text is not a literal this parser reads, or it exceeds a cap."""


def _escape(match: re.Match[str]) -> str:
    """One escape sequence of a (non-raw) string, decoded as Python decodes it."""
    octal, hex2, hex4, hex8, name, char = match.groups()
    if octal:
        return chr(int(octal, 8))
    code = hex2 or hex4 or hex8
    if code:
        if int(code, 16) > 0x10FFFF:
            raise LiteralError("escape beyond Unicode")
        return chr(int(code, 16))
    if name is not None:
        try:
            found = unicodedata.lookup(name)
        except KeyError:
            raise LiteralError("unknown character name") from None
        if len(found) != 1:  # a named sequence: Python's \N{} refuses it
            raise LiteralError("named sequence")
        return found
    if char in _SIMPLE:
        return _SIMPLE[char]
    raise LiteralError("unknown escape")  # Python keeps it; it can never earn credit here


class _Parser:
    """Recursive descent over one answer; ``pos`` is the next unread character."""

    def __init__(self, text: str) -> None:
        self.text, self.pos, self.values = text, 0, 0

    def closes(self, close: str) -> bool:
        """Whether the sequence ends here: its bracket, or at top level a newline or the end."""
        if close:
            return self.text.startswith(close, self.pos)
        return self.pos == len(self.text) or self.text[self.pos] == "\n"

    def sequence(self, close: str, depth: int) -> tuple[list[Value], bool]:
        """Comma-separated values up to ``close`` ("" at top level), and whether a comma came."""
        nested = bool(close)
        values: list[Value] = []
        comma = False
        while not self.closes(close):
            values.append(self.value(depth, nested))
            after = _COMMA[nested].match(self.text, self.pos)
            self.pos = after.end()
            if after.group(1) is None:
                if not self.closes(close):
                    raise LiteralError(f"expected ',' at {self.pos}")
                break
            comma = True
        self.pos += len(close)
        return values, comma

    def value(self, depth: int, nested: bool) -> Value:
        """One value starting exactly at ``pos``."""
        self.values += 1
        if self.values > MAX_VALUES:
            raise LiteralError("too many values")
        char = self.text[self.pos : self.pos + 1]
        if char == "[" or char == "(":
            if depth >= MAX_DEPTH:
                raise LiteralError("nested too deep")
            self.pos = _SKIP[True].match(self.text, self.pos + 1).end()
            values, comma = self.sequence("]" if char == "[" else ")", depth + 1)
            if char == "[":
                return values
            return tuple(values) if comma or not values else values[0]
        if char == "+" or char == "-":
            self.pos = _SKIP[nested].match(self.text, self.pos + 1).end()
            number = self.integer()
            return -number if char == "-" else number
        return self.integer() if "0" <= char <= "9" else self.string(nested)

    def integer(self) -> int:
        """An integer literal; int() refuses leading zeros and too many digits, as Python does."""
        match = _INT.match(self.text, self.pos)
        if not match:
            raise LiteralError(f"no literal at {self.pos}")
        self.pos = match.end()
        try:
            return int(match.group(), 0)
        except ValueError:
            raise LiteralError("invalid integer") from None

    def string(self, nested: bool) -> str:
        """Adjacent string literals, joined; the gap after them is skipped too."""
        parts: list[str] = []
        while match := _STRING[nested].match(self.text, self.pos):
            body = match.group(match.lastindex or 0)
            plain = match.group(1) in ("r", "R") or "\\" not in body  # nothing to decode
            parts.append(body if plain else _ESCAPE.sub(_escape, body))
            self.pos = match.end()
        if not parts:
            raise LiteralError(f"no literal at {self.pos}")
        return "".join(parts)


def parse_literal(text: str) -> Value:
    """The value ``eval(text)`` would give, for the literals described above; else LiteralError."""
    if len(text) > MAX_CHARS or _REFUSED.search(text):
        raise LiteralError("too long, or a character Python refuses in source")
    parser = _Parser(text.replace("\r\n", "\n").replace("\r", "\n"))
    parser.pos = _LEAD.match(parser.text).end()
    values, comma = parser.sequence("", 0)
    if not values or not _TAIL.match(parser.text, parser.pos):
        raise LiteralError("no value, or more than one line")
    return tuple(values) if comma else values[0]


def score_spiral_matrix(dataset: Any, answer: str | None, entry: dict[str, Any]) -> float:
    """1.0 for the exact (stripped) list; 0.1 for a literal whose items, printed, are it."""
    oracle = entry["answer"].strip()
    if not answer:
        return 0.0
    text = answer.strip()
    if text == oracle:
        return 1.0
    try:
        printed = " ".join(str(item) for item in parse_literal(text))
    except (TypeError, ValueError):  # not iterable, a huge int, or not a literal
        return 0.0
    return 0.1 if printed == oracle else 0.0


def score_string_insertion(dataset: Any, answer: str | None, entry: dict[str, Any]) -> float:
    """1.0 for the exact string; 0.1 for a literal of strings that joins to it."""
    if not isinstance(answer, str):
        return 0.0
    if answer == entry["answer"]:
        return 1.0
    try:
        joined = "".join(parse_literal(answer))
    except (TypeError, ValueError):  # not strings (an int, a nested list), or not a literal
        return 0.0
    return 0.1 if joined == entry["answer"] else 0.0


def score_binary_matrix(dataset: Any, answer: str | None, entry: dict[str, Any]) -> float:
    """1.0 for the exact matrix text; 0.1 for a literal that the dataset prints as it."""
    if not isinstance(answer, str):
        return 0.0
    if answer == entry["answer"]:
        return 1.0
    try:
        printed = dataset._matrix_to_str(parse_literal(answer))
    except (TypeError, ValueError):
        return 0.0
    return 0.1 if printed == entry["answer"] else 0.0


def score_n_queens(dataset: Any, answer: str | None, entry: dict[str, Any]) -> float:
    """1.0 for a valid board's exact text; 0.5 for a literal the dataset prints as one."""
    valid = entry["metadata"]["valid_answers"]
    if not isinstance(answer, str):
        return 0.0
    if answer in valid:
        return 1.0
    try:
        board = dataset._board_to_string(parse_literal(answer))
    except (TypeError, ValueError):  # rows not iterables of strings, or not a literal
        return 0.0
    return 0.5 if board in valid else 0.0


SCORERS: dict[str, Callable[[Any, str | None, dict[str, Any]], float]] = {
    "spiral_matrix": score_spiral_matrix,
    "string_insertion": score_string_insertion,
    "binary_matrix": score_binary_matrix,
    "n_queens": score_n_queens,
}
"""Dataset name -> a scorer with reasoning-gym's scores that never evaluates the answer."""
