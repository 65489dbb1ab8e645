"""Wander's scorers of the reasoning-gym datasets read with sympy's ``parse_expr``, against
the datasets' own ``score_answer``, which evaluates the answer.

The differential tests give both scorers the same answers and require the same score:
the right answer, the ways a model rewrites it, wrong and malformed ones. Every one is
safe to hand to ``parse_expr`` (no code, no huge powers). The adversarial tests give ours
answers that are code, or that would make sympy compute for ever: ours must score them as
unreadable, fast, and compile nothing; reasoning-gym's own rewards some of them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import reasoning_gym
import sympy
from sympy.parsing.sympy_parser import parse_expr

from tests.helpers import compiles_nothing
from wander.service.envs.rg_scoring.expression_scorers import SCORERS
from wander.service.envs.rg_scoring.expressions import (
    MAX_CHARS,
    MAX_DEPTH,
    MAX_DIGITS,
    MAX_TOKENS,
    ExpressionError,
    NotRational,
    evaluate_rational,
    evaluate_sympy,
    expression,
    number,
    parse,
)

SIZE = 200
UNINTEGRATED = {"intermediate_integration": 40}
"""More items, for those whose own answer holds an ``Integral`` (24 of the first 200),
which are not compared (``_unintegrated``): at least ``SIZE`` items are."""
UNREADABLE = {
    "puzzle24": 0.01,
    "countdown": 0.01,
    "polynomial_multiplication": 0.0,
    "simple_integration": 0.0,
    "intermediate_integration": 0.0,
}
"""Each dataset's score of an answer that ``parse_expr`` cannot read."""
OUTCOMES = {
    "puzzle24": {0.01, 1.0},
    "countdown": {0.01, 0.05, 1.0},
    "polynomial_multiplication": {0.0, 1.0},
    "simple_integration": {0.0, 1.0},
    "intermediate_integration": {0.0, 1.0},
}
"""Every score each of reasoning-gym's scorers gives."""


@functools.cache
def _generator(name: str) -> Any:
    """The dataset (default config): it makes an item when one is read."""
    return reasoning_gym.create_dataset(name, seed=7, size=SIZE + UNINTEGRATED.get(name, 0))


@functools.cache
def _item(name: str, index: int) -> dict[str, Any]:
    return dict(_generator(name)[index])


def _dataset(name: str) -> tuple[Any, Iterator[dict[str, Any]]]:
    """The dataset and its items, each made once, when first read: an item of some
    datasets takes 0.1 s, and a test that reads only the first few stops there."""
    dataset = _generator(name)
    return dataset, (_item(name, index) for index in range(len(dataset)))


def _bumped(answer: str) -> str:
    """The answer with its first number one larger (or plus one, without a number)."""
    first = re.search(r"\d+", answer)
    if first is None:
        return f"{answer} + 1"
    return f"{answer[: first.start()]}{int(first.group()) + 1}{answer[first.end() :]}"


GARBAGE = [None, "", "   ", "garbage text", "x^2", "2x", "(1+2", "1+2)", "1/0", "0/0", "x"]


def _number_answers(item: dict[str, Any]) -> list[str | None]:
    """puzzle24's and countdown's corpus: rewritings of the answer, and others."""
    answer, numbers = item["answer"], item["metadata"]["numbers"]
    return [
        answer,
        f"({answer})",
        f"  {answer}\n",
        answer.replace(" ", ""),
        answer.replace("*", " * "),
        _bumped(answer),
        " + ".join(map(str, numbers)),
        "*".join(map(str, reversed(numbers))),
        f"{answer} + {numbers[0]} - {numbers[0]}",  # a number used twice
        f"-({answer})",
        f"+({answer})/1",
        f"({answer})*1.0",
        f"{answer} + 0.5",
        f"({answer})/0",
        f"({answer})*0/0",
        f"{answer} + 1/(1/0)",
        f"({answer})/({numbers[0]} - {numbers[0]})",
        answer.replace("*", "* *", 1),
        answer.replace("*", "^", 1),
        answer.replace("-", "^", 1),
        f"({answer}\n)",
        f"{answer}\n+ 1",
        f"# the answer\n{answer}",
        f"{answer}  # done",
        f"{answer} = 24",
        f"{answer} + x",
        f"{answer}!",
        *GARBAGE,
        *[
            "24",
            "4*6*1*1",
            "4!*1*1*1",
            "(3)!*(2+1+1)",
            "3!!*8*1*1",
            "2.5*8+4",
            "2.5*9.6*1*1",
            "49/2*1*1",
            "1 + 2 + 3 + 4",
            "2^3*3*1*1",
            "sqrt(576)",
            "sqrt(9)*(1+2+5)",
            "(1+2+3+3)**(3/2)",
            "1e3",
            "24.0",
            "007*3",
            "1_0*2+4",
            "2 * * 3 * 3*1",
            "(1+2)(3+4)",
            "-(-24)",
            "10*2+3+1",
            "(10 - 4)*(3 + 1)",
        ],
    ]


def _polynomial_answers(item: dict[str, Any]) -> list[str | None]:
    """polynomial_multiplication's corpus."""
    answer = item["answer"]
    terms = [str(term) for term in parse_expr(answer).as_ordered_terms()]  # its own text
    return [
        answer,
        f"({answer})",
        f" {answer} ",
        answer.replace(" ", ""),
        " + ".join(f"({term})" for term in reversed(terms)),
        re.sub(r"(\d+)\*([a-z]\w*(?:\*\*\d+)?)", r"\2*\1", answer),  # x**2*3 for 3*x**2
        _bumped(answer),
        f"{answer} + 1",
        f"-({answer})",
        f"{answer} - x + x",
        f"{answer} + 0",
        f"{answer} + 0.0",
        f"1.0*({answer})",
        item["metadata"]["polynomial_expr"],  # factored: not the same expression
        answer.replace("**", "^"),
        re.sub(r"(\d)\*", r"\1", answer),
        f"{answer}/0",
        answer.replace("x", "y"),
        f"{answer} + Integral(0, x)",
        *GARBAGE,
        "(x+1)(x-1)",
        "sin(x)",
    ]


def _integration_answers(item: dict[str, Any]) -> list[str | None]:
    """The integration datasets' corpus, the answers sympy checks fast first."""
    answer = item["answer"]
    body = answer.removesuffix(" + C")
    variable, integrand = item["metadata"]["variable"], item["metadata"]["integrand"]
    return [
        answer,
        body,
        f"{body} + 7",
        None,
        "x^2",
        f"{body} + K",
        f"{body} + 2*C",
        f"C + ({body})",
        answer.replace(" ", ""),
        answer.replace("exp(", "E**("),
        answer.replace("log(", "ln("),
        re.sub(r"/(\d+)", r"*(1/\1)", answer),
        answer.replace("/2", "*0.5"),
        _bumped(answer),
        integrand,  # the derivative, not the integral
        f"-({answer})",
        answer.replace("**", "^"),
        re.sub(r"(\d)\*", r"\1", answer),
        f"{answer}/0",
        answer.replace(variable, "t"),
        *GARBAGE,
        "C",
        "exp(exp(exp(exp(100))))",
    ]


CORPUS: dict[str, Callable[[dict[str, Any]], list[str | None]]] = {
    "puzzle24": _number_answers,
    "countdown": _number_answers,
    "polynomial_multiplication": _polynomial_answers,
    "simple_integration": _integration_answers,
    "intermediate_integration": _integration_answers,
}
FEW = 6
"""sympy's simplify is slow to give up on a wrong answer (25 s on one trigonometric
integral): every item of the integration datasets gets the first ``FEW`` answers of the
corpus, and some items get all of it."""
WHOLE_CORPUS_ITEMS = 50
"""The items of the number datasets (puzzle24, countdown) that get the whole corpus (~60
answers, a second per 15 items on two cores); the others get the first ``FEW``."""


def _whole_corpus(name: str, index: int, item: dict[str, Any]) -> bool:
    """Whether the item gets the whole corpus."""
    if name == "simple_integration":
        return index < 6
    if name == "intermediate_integration":
        return index < 10 and item["metadata"]["problem_type"] != "trigonometric"
    return index < WHOLE_CORPUS_ITEMS


@pytest.mark.parametrize("name", list(SCORERS))
def test_scores_are_reasoning_gyms(name: str) -> None:
    dataset, items = _dataset(name)
    scorer, compared, seen, items_compared = SCORERS[name], 0, set(), 0
    for index, item in enumerate(items):
        items_compared += "Integral" not in item["answer"]
        answers = CORPUS[name](item)
        answers = answers if _whole_corpus(name, index, item) else answers[:FEW]
        for answer in answers:
            if _refused_deliberately(name, answer, item):
                assert scorer(dataset, answer, item) == UNREADABLE[name], answer
                continue
            theirs = dataset.score_answer(answer, item)
            with compiles_nothing():
                ours = scorer(dataset, answer, item)
            assert ours == theirs, (name, index, answer, ours, theirs)
            seen.add(theirs)
            compared += 1
    assert seen == OUTCOMES[name]
    assert compared >= SIZE * FEW and items_compared >= SIZE


def _refused_deliberately(name: str, answer: str | None, item: dict[str, Any]) -> bool:
    """Answers reasoning-gym rewards without the task, and Wander does not: an
    ``Integral`` (``_unintegrated``), and a 24 made of other numbers than the puzzle's
    (reasoning-gym checks only that there are four, within the config's range)."""
    if answer is None:
        return False
    if name == "puzzle24":
        used = sorted(int(digits) for digits in re.findall(r"\b\d+\b", answer))
        return len(used) == 4 and used != sorted(item["metadata"]["numbers"])
    return "Integral" in answer


def _unintegrated(item: dict[str, Any]) -> str:
    """The integrand under ``Integral``: full marks from reasoning-gym, without integrating."""
    return f"Integral({item['metadata']['integrand']}, {item['metadata']['variable']})"


DIFFERENCES: dict[str, list[Callable[[dict[str, Any]], str]]] = {
    "puzzle24": [lambda item: "E*(1+2+3+3)", lambda item: "7*7//2*1", lambda item: "6*4*1*1"],
    "countdown": [lambda item: f"({item['answer']})*E/E", lambda item: "8 // 2"],
    "polynomial_multiplication": [lambda item: f"{item['answer']} + 0x0"],  # hexadecimal
    "simple_integration": [lambda item: f"{item['answer']} + log(x, x)", _unintegrated],
    "intermediate_integration": [lambda item: f"{item['answer']} + gamma(2)", _unintegrated],
}  # log(x, x) and gamma(2) are 1
"""Answers that reasoning-gym reads (most of them it rewards) and that are outside the
grammar here: a value through a constant or a root in the number games, an operator, a
function or a literal this parser does not read; deliberately, ``Integral`` and a 24
of other numbers than the puzzle's (``_refused_deliberately``). None is code; ours scores
each as unreadable."""


@pytest.mark.parametrize("name", list(SCORERS))
def test_answers_outside_the_grammar_are_unreadable(name: str) -> None:
    dataset, items = _dataset(name)
    item = next(item for item in items if item["metadata"].get("variable", "x") == "x")
    for write in DIFFERENCES[name]:
        answer = write(item)
        assert dataset.score_answer(answer, item) != UNREADABLE[name], answer
        assert SCORERS[name](dataset, answer, item) == UNREADABLE[name], answer


ADVERSARIAL = [
    "oracle_answer",
    "__import__('os').system('id')",
    "(lambda: 24)()",
    "x.__class__",
    "24 if 1 else 0",
    "[24][0]",
    "sum([24])",
    "9**9**9**9",
    "2**100000",
    "(" * 10_000 + "24" + ")" * 10_000,
    "24 + " * 1_000_000 + "24",  # 5 MB
    "1e999999",
    "9" * 100_000,
    "9" * (MAX_DIGITS + 1),
    "exp(exp(exp(exp(100))))",
    "exp(exp(100))*1*2*3*4",
    "E**E**E**5",
    "(((2**1000)**1000)**1000)**1000",
    "1000!!!",
    "1001!*1*2*3",
    "10.0**1000**1000",
    "-" * 5_000 + "24",
    "x" + "+x" * 4_000,
    "__import__",
    "S(24)",
    "N(24)",
    "Integer(24)",
    "sympify('24')",
    "parse_expr('24')",
    "eval('24')",
    "ord('\\x18')*1*1*1*1",
    "'24'",
    "24 ; 1",
    "24, 1",
]


@pytest.mark.parametrize("name", list(SCORERS))
def test_adversarial_answers_are_unreadable(name: str) -> None:
    dataset, items = _dataset(name)
    first = next(items)
    for answer in ADVERSARIAL:  # each refused before any work (else pytest's timeout)
        with compiles_nothing():
            score = SCORERS[name](dataset, answer, first)
        assert score == UNREADABLE[name], (answer[:80], score)


def _frames(back: int) -> str:
    """Code that reads the scorer's ``entry`` from the frame ``back`` calls up."""
    return "__import__('sys')._getframe()" + ".f_back" * back + ".f_locals['entry']"


HACKS: dict[str, Callable[[dict[str, Any], int], str]] = {
    "puzzle24": lambda item, back: "ord('\\x18')*1*1*1*1",  # four numbers, and 24
    "countdown": lambda item, back: (
        f"{_frames(back)}['metadata']['target'] + "
        f"({'+'.join(map(str, item['metadata']['numbers']))})*S.Zero"
    ),
    "polynomial_multiplication": lambda item, back: f"S({_frames(back)}['answer'])",
    "simple_integration": lambda item, back: (
        f"Integral(S({_frames(back)}['metadata']['integrand']), x)"
    ),
    "intermediate_integration": lambda item, back: (
        f"Integral(S({_frames(back)}['metadata']['integrand']), x)"
    ),
}


@pytest.mark.parametrize("name", list(SCORERS))
def test_reasoning_gym_rewards_code_and_ours_does_not(name: str) -> None:
    dataset, items = _dataset(name)
    item = next(item for item in items if item["metadata"].get("variable", "x") == "x")
    hacks = [HACKS[name](item, back) for back in range(6)]
    assert max(dataset.score_answer(hack, item) for hack in hacks) == 1.0
    with compiles_nothing():
        assert {SCORERS[name](dataset, hack, item) for hack in hacks} == {UNREADABLE[name]}


TEXTS = [
    "2+3*4",
    "-2**2",
    "2**3**2",
    "2**-1",
    "-2**-2",
    "2*-3",
    "2--3",
    "+-+2",
    "x/2",
    "2/x",
    "1/3 + 1/6",
    "7/2*2",
    "(1+2)*(3-4)/5",
    "2.5*9.6",
    "2.5*8+4",
    "0.1 + 0.2",
    "0.1234567890123456789",
    "1.50",
    "00.5",
    "1e3",
    "12e3",
    "1.5E-2",
    "10e-1",
    ".5",
    "5.",
    "0.0",
    "0e0",
    "1e-400",
    "1_000 + 1_0.5",
    "1/0",
    "0/0",
    "1/(1/0)",
    "0**-1",
    "0**0",
    "2^3",
    "2+3^4",
    "-3^5",
    "x^x",
    "x^2",
    "(1/2)^2",
    "3!",
    "3!!",
    "-3!",
    "2**3!",
    "3!**2",
    "(1+2)!",
    "x!",
    "sin(x)!",
    "2.5!",
    "(-1)!",
    "2 * * 3",
    "x * * 2",
    "2 *\\\n* 3",
    "(2 *\n* 3)",
    "(2 * *\n 3)",
    "2** *3",
    "2***3",
    "2 // 3",
    "2 / / 3",
    "4**(1/2)",
    "2**(1/2)",
    "(-8)**(1/3)",
    "8**(2/3)",
    "2**0.5",
    "4**0.5",
    "(-1)**0.5",
    "sqrt(4)",
    "sqrt(x)**2",
    "E**x",
    "exp(x)*sin(x)",
    "log(x) + ln(x)",
    "asin(3*x) + acos(x) + atan(x)",
    "sinh(x) + cosh(x) + tanh(x)",
    "Abs(-x) + abs(-2)",
    "pi*x + I",
    "factorial(4)",
    "Integral(x**3*cos(3*x), x)",
    "sin(x,)",
    "sin()",
    "sin(x, y)",
    "sin",
    "f(x)",
    "x(2)",
    "(x)(2)",
    "2(x)",
    "2x",
    "x 2",
    "x2 + x_1 + Cy + alpha",
    "N",
    "S",
    "beta",
    "gamma(x)",
    "oo",
    "_x",
    "007",
    "08",
    "00",
    "0x10",
    "2j",
    "3 !",
    "3!=4",
    "3! !",
    "!3",
    "3!!!",
    "2\n+3",
    "(2\n+3)",
    "(2\r\n+3)",
    "2 # c\n+ 3",
    "(2 # c\n+ 3)",
    "24 # c",
    "x\n#c",
    "#c\n24",
    "#c\n  24",
    "\\\n24",
    "2*\\\n3",
    "24\\",
    "2\f+3",
    "2\v+3",
    "2\xa0+3",
    "2\r+3",
    "  24  ",
    "",
    "#",
    "()",
    "(2,3)",
    "[2]",
    "x.y",
    "x == 2",
    "2 % 3",
    "'24'",
    "lambda x: x",
    "True",
    "not x",
    "x if x else 1",
]


@pytest.mark.parametrize("text", TEXTS)
def test_expressions_are_parse_exprs(text: str) -> None:
    """The same sympy object as ``parse_expr`` (``srepr``: types, Float precisions), or
    a refusal where ``parse_expr`` fails or makes something outside the grammar."""
    for names in ({}, {"x": sympy.Symbol("x"), "C": sympy.Symbol("C")}):
        try:
            theirs: Any = parse_expr(text, local_dict=dict(names))
        except Exception:
            theirs = None
        try:
            ours = expression(text, names)
        except Exception:
            assert not isinstance(theirs, sympy.Basic) or text in REFUSED, (text, theirs)
            continue
        assert sympy.srepr(ours) == sympy.srepr(theirs), (text, ours, theirs)


REFUSED = {
    "2 // 3",
    "2 / / 3",
    "2 % 3",
    "0x10",
    "2j",
    "oo",
    "_x",
    "f(x)",
    "x(2)",
    "gamma(x)",
    "Integral(x**3*cos(3*x), x)",
    "lambda x: x",
    "x if x else 1",
}
"""Texts ``parse_expr`` reads into sympy objects that ``expression`` refuses: names
defined otherwise (``N``, ``oo``, ``True``), calls of other functions, literals outside
the grammar."""


@pytest.mark.parametrize("text", [t for t in TEXTS if "x" not in t.replace("0x", "")])
def test_numbers_are_parse_exprs(text: str) -> None:
    """``int`` and ``float`` of ``number`` are those of ``parse_expr``, or ``number``
    refuses: where ``parse_expr`` fails, or its value is not a sympy number."""
    for convert in (int, float):
        try:
            theirs: Any = convert(parse_expr(text))
        except Exception:
            theirs = None
        try:
            ours: Any = convert(number(text))
        except ExpressionError:
            ours = None
        except (TypeError, ValueError):  # int(nan), float(zoo): parse_expr's value too
            ours = "raised"
        if theirs is None:
            assert ours in (None, "raised"), (text, ours)
        elif ours is not None:
            assert ours == theirs or (theirs != theirs and ours != ours), (text, ours, theirs)
        else:
            assert text in REFUSED or not isinstance(parse_expr(text), sympy.Number), text


def test_rational_values_are_sympys() -> None:
    """Where ``evaluate_rational`` answers, sympy's value is that very rational."""
    answered = 0
    for text in TEXTS:
        try:
            tree = parse(text)
            value = evaluate_rational(tree)
        except (ExpressionError, NotRational):
            continue
        assert evaluate_sympy(tree) == sympy.Rational(value.numerator, value.denominator)
        answered += 1
    assert answered > 20


@pytest.mark.parametrize(
    "text",
    [
        "9**9**9",
        "2**1001",
        "(2**1000)**1000",
        "10**1000*10**1000*10**1000*10**1000*10**1000",
        "x**1000*x",
        "(x**500)**3",
        "1001!",
        "1e401",
        "9" * (MAX_DIGITS + 1),
        "(" * (MAX_DEPTH + 1) + "1" + ")" * (MAX_DEPTH + 1),
        "-" * (MAX_DEPTH + 1) + "1",
        "2**" * (MAX_DEPTH + 1) + "1",
        "1+" * MAX_TOKENS + "1",
        " " * MAX_CHARS + "1",
        "x" * 65,
    ],
)
def test_caps_refuse_before_computing(text: str) -> None:
    for read in (number, expression):
        with pytest.raises(ExpressionError):
            read(text)


def test_caps_admit_what_the_datasets_need() -> None:
    assert expression("(x + 1)**1000") == (sympy.Symbol("x") + 1) ** 1000
    assert number("2**1000*3") == 3 * 2**1000
    assert number("1000!") == sympy.factorial(1000)
    assert expression("(" * MAX_DEPTH + "x" + ")" * MAX_DEPTH) == sympy.Symbol("x")
