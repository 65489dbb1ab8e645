"""Wander's literal scorers against reasoning-gym's own, which ``eval`` the answer.

The differential tests give both scorers the same answers and require the same score:
the right answer, the ways a model writes it as a Python literal, wrong and malformed
ones, and random mutations of them. Every one is safe to ``eval`` (literals, and names
that exist nowhere). The adversarial test gives ours only answers that are code, which
reasoning-gym would run: ours must score them as unreadable, fast, and compile nothing.
"""

from __future__ import annotations

import contextlib
import functools
import json
import random
from collections.abc import Callable
from typing import Any

import pytest
import reasoning_gym

from tests.helpers import compiles_nothing
from wander.service.envs import guard
from wander.service.envs.rg_scoring.literals import (
    MAX_CHARS,
    MAX_DEPTH,
    MAX_VALUES,
    SCORERS,
    LiteralError,
    parse_literal,
)

SIZE = 200
PARTIAL = {"spiral_matrix": 0.1, "string_insertion": 0.1, "binary_matrix": 0.1, "n_queens": 0.5}
HACKS = {  # answers naming reasoning-gym's local variables, which its scorers reward
    "spiral_matrix": "oracle_answer.split()",
    "string_insertion": "oracle_answer",
    "binary_matrix": '[r.split() for r in oracle_answer.split("\\n")]',
    "n_queens": '[r.split() for r in valid_solutions[0].split("\\n")]',
}
GENERIC: list[str | None] = [
    None, "", " ", "\n", "garbage text", "I think it is [1, 2]", "5", "-1", "+0", "[]",
    "()", "[[]]", "[1, 2", "[1, 2]]", "(1, 2", "'abc'", '"abc"', "[1.0, 2]", "[True, None]",
    "...", "0x10", "007", "1_000", "[1,,2]", "(,)", "[1]\x00", "\ufeff[1]", "[1]\xa0",
    "'a\rb'", "[[1, 2], [3]]", "{1, 2}", "b'ab'", "None", "no_such_name", "1 2 3", "[1 2 3]",
    "'open", "[1][0]", "[" * 40 + "]" * 40, "[" + "9" * 5000 + "]", "'\\N{NO SUCH NAME}'",
    "'\\x4'", "'''a''b'",
]  # fmt: skip
pytestmark = pytest.mark.filterwarnings(  # eval() warns about invalid escapes and such
    "ignore::DeprecationWarning", "ignore::SyntaxWarning"
)
MUTATION_CHARS = "[](),'\" \n\t\f#0123456789xQAE_.r"
"""What mutations insert: no operators, braces, bytes prefixes or backslashes, so that
eval() reads nothing that the parser leaves out on purpose."""


@functools.cache
def dataset(name: str) -> Any:
    return reasoning_gym.create_dataset(name, seed=20240607, size=SIZE)


@functools.cache
def entries(name: str) -> list[dict[str, Any]]:
    return [dataset(name)[index] for index in range(SIZE)]


def rg_score(name: str, answer: str | None, entry: dict[str, Any]) -> float:
    return dataset(name).score_answer(answer, entry)


def listed(items: list[Any], item: Callable[[Any], str] = repr) -> str:
    return "[" + ", ".join(map(item, items)) + "]"


def one_a_line(items: list[Any]) -> str:
    """A list literal laid out one item a line, as a model may write it."""
    return "[\n" + "".join(f"    {item!r},\n" for item in items) + "]"


def spiral_answers(entry: dict[str, Any]) -> list[str]:
    oracle = entry["answer"]
    digits = oracle.split()
    ints = [int(digit) for digit in digits]
    signed = listed(ints, lambda value: "-0" if value == 0 else f"+{value}")
    return [
        oracle, f" {oracle}\n", oracle.replace(" ", "  "), repr(ints), str(ints).replace(" ", ""),
        repr(tuple(ints)), ", ".join(digits), ",".join(digits) + ",", repr(digits),
        json.dumps(digits), one_a_line(ints), repr([*ints[:-1], (ints[-1] + 1) % 10]),
        repr(ints[::-1]), repr(ints[:-1]), repr([ints[:2], ints[2:]]), repr(oracle),
        repr(entry["metadata"]["matrix"]), repr("".join(digits)), repr([oracle]),
        listed(ints, hex), signed, repr(ints)[:-1], repr(ints) + "]",
        repr([float(value) for value in ints]), f"# spiral order\n{ints!r}  # done",
        f"\n  {ints!r}", f"{ints!r}\n  ", repr([ints[0], *digits[1:]]),
        listed([digits[0], "007", *digits[2:]], str), listed(digits, "{}_0".format),
    ]  # fmt: skip


def string_insertion_answers(entry: dict[str, Any]) -> list[str]:
    text = entry["answer"]
    chars = list(text)
    wrong = [*chars[:-1], "A" if chars[-1] != "A" else "B"]
    return [
        text, text + "\n", " " + text, text.lower(), repr(chars), json.dumps(chars),
        repr(tuple(chars)), ", ".join(map(repr, chars)), repr(text), json.dumps(text),
        f"'''{text}'''", f"r'{text}'", f'U"{text}"', f"'{text[:3]}' \"{text[3:]}\"",
        repr([text[:3], text[3:]]), repr([text]), f"({text!r})", f"({text!r},)",
        one_a_line(chars), "'" + "".join(f"\\x{ord(char):02x}" for char in text) + "'",
        "'" + "".join(f"\\{ord(char):o}" for char in text) + "'",
        "'" + "".join(f"\\N{{LATIN CAPITAL LETTER {char}}}" for char in text) + "'",
        "'" + "".join(f"\\u{ord(char):04x}" for char in text) + "'",
        f"'{text[:2]}\\\n{text[2:]}'", repr(wrong), repr(chars[:-1]), repr([*chars[:-1], 1]),
        repr([chars]), repr(chars)[:-1], listed(chars, str), f"\n{chars!r}\n",
        f"\n  {chars!r}", f"{chars!r}\n  ", f"{chars!r}  # the answer", f"\t{chars!r}",
        f"#\n{chars!r}", repr(chars).replace(", ", ",\n"), repr(text).replace("'", "'''"),
    ]  # fmt: skip


def binary_matrix_answers(entry: dict[str, Any]) -> list[str]:
    rows = [[int(cell) for cell in line.split()] for line in entry["answer"].split("\n")]
    wrong = [row[:] for row in rows]
    wrong[-1][-1] += 1
    columns = [list(column) for column in zip(*rows, strict=True)]
    return [
        entry["answer"], entry["answer"] + "\n", entry["answer"].replace("\n", " "), repr(rows),
        json.dumps(rows), repr(tuple(map(tuple, rows))),
        repr([list(map(str, row)) for row in rows]),
        repr(["".join(map(str, row)) for row in rows]),
        repr([" ".join(map(str, row)) for row in rows]), ", ".join(map(repr, rows)),
        repr(wrong), repr(columns), repr([cell for row in rows for cell in row]), repr([rows]),
        repr(rows)[:-1], one_a_line(rows), f"\n{rows!r}", f"\n  {rows!r}", f"{rows!r}\n  ",
        f"# distances\n{rows!r} # done", repr(entry["metadata"]["matrix"]),
        repr(entry["answer"]), listed(rows, lambda row: listed(row, hex)),
        listed(rows, lambda row: listed(row, lambda cell: "-0" if cell == 0 else str(cell))),
        repr([list(map(float, row)) for row in rows]), repr([[row] for row in rows]),
    ]  # fmt: skip


def n_queens_answers(entry: dict[str, Any]) -> list[str]:
    valid = entry["metadata"]["valid_answers"]
    rows = [line.split() for line in valid[0].split("\n")]
    moved = [row[:] for row in rows]
    moved[0] = moved[0][1:] + moved[0][:1]
    joined = ["".join(row) for row in rows]
    return [
        valid[0], valid[-1], valid[0] + "\n", valid[0].replace(" ", ""), repr(rows),
        json.dumps(rows), repr(tuple(map(tuple, rows))), repr(joined), json.dumps(joined),
        ", ".join(map(repr, joined)), repr([" ".join(row) for row in rows]),
        ", ".join(map(repr, rows)), repr(moved), repr(entry["metadata"]["puzzle"]),
        repr([[cell.lower() for cell in row] for row in rows]),
        repr([list(column) for column in zip(*rows, strict=True)]), repr(rows[:-1]),
        repr([rows]), repr(rows)[:-1], one_a_line(joined), f"\n{rows!r}", f"\n {rows!r}",
        repr("\n".join(joined)), repr(rows).replace("'Q'", "'\\x51'"),
        repr(rows).replace("'Q'", "'\\N{LATIN CAPITAL LETTER Q}'"),
        repr([[int(cell == "Q") for cell in row] for row in rows]),
        repr(joined).replace("'", '"""'),
        listed(rows, lambda row: listed(row, str)).replace("_", "X"),
    ]  # fmt: skip


ANSWERS: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "spiral_matrix": spiral_answers,
    "string_insertion": string_insertion_answers,
    "binary_matrix": binary_matrix_answers,
    "n_queens": n_queens_answers,
}


def mutate(text: str, rng: random.Random) -> str:
    """``text`` with one to three characters deleted, inserted or replaced."""
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(text) + 1)
        kind = rng.randrange(3)
        new = "" if kind == 0 else rng.choice(MUTATION_CHARS)
        text = text[:at] + new + text[at + (kind != 1) :]
    return text


def mutants(answers: list[str], count: int, rng: random.Random) -> list[str]:
    """Mutations of answers without signs (a mutation could make them an operator)."""
    bases = [answer for answer in answers if "+" not in answer and "-" not in answer]
    return [mutate(rng.choice(bases), rng) for _ in range(count)]


@pytest.mark.parametrize("name", sorted(SCORERS))
def test_same_scores_as_reasoning_gym(name: str) -> None:
    ours = SCORERS[name]
    rng = random.Random(name)
    seen: set[float] = set()
    checked = 0
    for index, entry in enumerate(entries(name)):
        answers: list[str | None] = [*ANSWERS[name](entry)]
        answers += mutants(ANSWERS[name](entry), 5, rng) + (GENERIC if index % 20 == 0 else [])
        for answer in answers:
            expected = rg_score(name, answer, entry)
            assert ours(dataset(name), answer, entry) == expected, (answer, entry["answer"])
            seen.add(expected)
            checked += 1
    assert seen == {1.0, PARTIAL[name], 0.0}
    assert checked >= SIZE * 33


@pytest.mark.parametrize("name", sorted(SCORERS))
def test_parsed_values_are_evals(name: str) -> None:
    """Whatever the parser reads, eval() reads as the same value, types included."""
    rng = random.Random(f"values-{name}")
    parsed = 0
    for entry in entries(name)[:25]:
        answers = ANSWERS[name](entry)
        for answer in answers + mutants(answers, 25, rng):
            try:
                value = parse_literal(answer)
            except LiteralError:
                continue
            assert repr(eval(answer, {"__builtins__": {}}, {})) == repr(value), answer
            parsed += 1
    assert parsed > 500


def nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("\n[1]\n", [1]), ("#c\n(1,\n 2)  # d\n\n", (1, 2)), ("\f[1]", [1]), ("1,", (1,)),
        ("(1)", 1), ("()", ()), ("0_0", 0), ("0X_F", 15), ("0o17", 15), ("-0b1", -1),
        ("- 1", -1), ("'a' r'\\d' u'b'", "a\\db"), ("'''a\nb'''", "a\nb"), ("'a\\\r\nb'", "ab"),
        ("'\\101\\x41\\u0041\\U00000041\\N{LATIN CAPITAL LETTER A}\\t\\0'", "AAAAA\t\0"),
        ("[" * MAX_DEPTH + "]" * MAX_DEPTH, nested(MAX_DEPTH)),
        ("[" + "1," * (MAX_VALUES - 1) + "]", [1] * (MAX_VALUES - 1)),
    ],
)  # fmt: skip
def test_parses_literals(text: str, value: Any) -> None:
    assert repr(parse_literal(text)) == repr(value)


@pytest.mark.parametrize(
    "text",
    [
        "\n [1]", " \f [1]", "[1]\n  ", "1,\n2", "'a'\n'b'", "'''a''b'", "007", "0b", "1__0",
        "--1", "- (1)", "'\\d'", "'\\x4'", "'\\N{LATIN CAPITAL LETTER A WITH MACRON AND GRAVE}'",
        "'\\U00110000'", "'\ud800'", "[1]\x00", "[1]\xa0", "'a\rb'", "1.5", "1j", "True", "None",
        "...", "b'a'", "f'a'", "rb'a'", "ur'a'", "{1}", "{}", "[1][0]", "[1,,2]", "(,)", "1 2",
        "[r]", "[1\\\n]", "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1),
        "[" + "1," * MAX_VALUES + "]", " " * MAX_CHARS + "1", "1" * 4301,
    ],
)  # fmt: skip
def test_refuses_the_rest(text: str) -> None:
    with pytest.raises(LiteralError):
        parse_literal(text)


def test_deliberate_differences() -> None:
    """Literals left out on purpose: reasoning-gym credits these quirks, Wander does not."""
    quirks = {
        "spiral_matrix": lambda entry: repr(bytes(map(int, entry["answer"].split()))),
        "binary_matrix": lambda entry: listed(
            [bytes(map(int, line.split())) for line in entry["answer"].split("\n")]
        ),
        "string_insertion": lambda entry: repr(list(entry["answer"])).replace(", ", ",\\\n"),
        "n_queens": lambda entry: (
            "\\\n" + repr(entry["metadata"]["valid_answers"][0].replace(" ", "").split("\n"))
        ),
    }
    for name, quirk in quirks.items():
        entry = entries(name)[0]
        assert rg_score(name, quirk(entry), entry) > SCORERS[name](
            dataset(name), quirk(entry), entry
        )


CODE = [
    "oracle_answer", "oracle_answer.split()", "list(oracle_answer)", "valid_solutions[0]",
    "__import__('os').system('id')", "[x for x in 'abc']", "'a' + 'b'", "[1]*3",
    "(lambda: 1)()", "9**9**9", "[*'abc']", "f'{1}'", "eval('1')", "entry['answer']",
    "self._matrix_to_str", "1 if 1 else 2", "'abc'[::-1]", "[1, 2][0]", "-(1)",
    "[" * 10_000 + "]" * 10_000, "(" * 10_000 + ")" * 10_000, "1" * 100_000,
    "[" + "1" * 99_000 + "]", "[" + "'A', " * 1_000_000 + "]", *HACKS.values(),
]  # fmt: skip


def test_code_is_never_run() -> None:
    before = guard.refusals()
    with contextlib.suppress(guard.EvaluationRefused), guard.untrusted():
        rg_score("string_insertion", "oracle_answer", entries("string_insertion")[0])
    assert guard.refusals() > before  # the guard sees reasoning-gym's eval
    for name, ours in SCORERS.items():
        for entry in entries(name)[:3]:
            rewarded = rg_score(name, HACKS[name], entry)  # the hack reasoning-gym rewards
            assert rewarded == PARTIAL[name]
            assert ours(dataset(name), HACKS[name], entry) == 0.0 < rewarded
            with compiles_nothing():
                scores = [ours(dataset(name), answer, entry) for answer in CODE]
            assert [code[:40] for code, score in zip(CODE, scores, strict=True) if score] == []
