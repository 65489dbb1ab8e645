"""No model text is ever evaluated: the shipped code calls nothing that runs text, and
every reasoning-gym dataset Wander lists scores answers without compiling a thing.

The audit of the wrapped package is run, not read: every listed dataset scores its own
correct answers and a corpus of hostile ones under ``envs.guard`` (which refuses and
counts every compilation of text), once through reasoning-gym's own scorers, to find
those that evaluate, and once through Wander's environment, which must compile nothing.
reasoning-gym is pinned (pyproject.toml, ``rg`` extra): an upgrade fails
``test_the_audited_version_is_the_installed_one`` until this audit is read again.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.metadata
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from wander.service.envs import guard
from wander.service.envs.rg import ReasoningGymEnv, RGConfig, environments
from wander.service.envs.rg_scoring import SCORERS

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ("service", "wander", "client", "trainer", "migrations")
EVALUATING_NAMES = {"eval", "exec", "compile", "literal_eval", "parse_expr", "sympify"}
EVALUATING_ATTRIBUTES = {"literal_eval", "parse_expr", "sympify"}
"""Calls that run or parse text as code: the built-ins by name, the parsers as attributes
(``re.compile`` and torch's ``model.eval()`` are neither)."""
AUDITED_VERSION = "0.1.25"
EVALUATING_DATASETS = {
    # eval() of the answer
    "binary_matrix", "n_queens", "spiral_matrix", "string_insertion",
    # sympy's parse_expr of the answer
    "countdown", "intermediate_integration", "polynomial_multiplication", "puzzle24",
    "simple_integration",
    # eval() of the dataset's own text, at every score (the guard cannot tell it apart)
    "bitwise_arithmetic", "number_sorting",
}  # fmt: skip
"""The datasets whose reasoning-gym scorer compiled text in the audit of
``AUDITED_VERSION``: exactly those Wander scores with its own parsers."""
UNEARNED = {"game_of_life_halting"}
"""Datasets whose reasoning-gym scorer rewards answers that do not do the task
(``rg_scoring/unearned.py``; ``test_no_constant_answer_scores_every_item``)."""
HOSTILE = [
    "oracle_answer",
    "oracle_answer.split()",
    "__import__('os').getpid()",
    "(lambda: 1)()",
    "[x for x in 'abc']",
    "9**9**9",
    "1+1",
    "[1, 2]",
    "x**2 + C",
    "",
    "hello",
]


def calls(path: Path) -> Iterator[tuple[int, str]]:
    """(line, name) of each call of an evaluating name in ``path``."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        function = node.func
        if isinstance(function, ast.Name) and function.id in EVALUATING_NAMES:
            yield node.lineno, function.id
        elif isinstance(function, ast.Attribute) and function.attr in EVALUATING_ATTRIBUTES:
            yield node.lineno, function.attr
        elif (
            isinstance(function, ast.Attribute)
            and function.attr == "parse"
            and isinstance(function.value, ast.Name)
            and function.value.id == "ast"
        ):
            yield node.lineno, "ast.parse"


def test_no_shipped_code_evaluates_text() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line} {name}()"
        for folder in SHIPPED
        for path in sorted((ROOT / folder).rglob("*.py"))
        for line, name in calls(path)
    ]
    assert found == []


def test_the_scan_finds_what_it_looks_for(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import ast, re, sympy\n"
        "eval(a)\nexec(b)\ncompile(c, 'f', 'eval')\nast.literal_eval(d)\nast.parse(e)\n"
        "sympy.parse_expr(f)\nsympy.sympify(g)\nre.compile(h)\n"
    )
    assert [name for _, name in calls(sample)] == [
        "eval", "exec", "compile", "literal_eval", "ast.parse", "parse_expr", "sympify",
    ]  # fmt: skip


def test_the_audited_version_is_the_installed_one() -> None:
    """Upgrading reasoning-gym: run this module, update ``EVALUATING_DATASETS`` (and
    ``rg_scoring``) from what it finds, then the pin and this version."""
    assert importlib.metadata.version("reasoning-gym") == AUDITED_VERSION


@cache
def listed() -> dict[str, ReasoningGymEnv]:
    return {env.dataset: env for env in environments()}


def answers(item: dict[str, Any]) -> list[str | None]:
    return [str(item["answer"]), None, *HOSTILE]


def refusals_scoring(score: Callable[..., Any], *arguments: Any) -> int:
    """The guard's refusals while ``score(*arguments)`` runs (its exceptions are a
    score's own: a scorer that raises compiled nothing)."""
    before = guard.refusals()
    with contextlib.suppress(guard.EvaluationRefused, Exception), guard.untrusted():
        score(*arguments)
    return guard.refusals() - before


def test_the_audit_finds_exactly_the_datasets_that_evaluate() -> None:
    """reasoning-gym's own scorers, on each listed dataset's first examples."""
    found = set()
    for name, env in listed().items():
        generator = env.generator(RGConfig(train_size=3), "train")
        for index in range(3):
            item = env.entry(RGConfig(train_size=3), "train", index)
            for answer in answers(item):
                if refusals_scoring(generator.score_answer, answer, item):
                    found.add(name)
    assert found == EVALUATING_DATASETS
    assert set(SCORERS) == EVALUATING_DATASETS | UNEARNED


@pytest.mark.parametrize("dataset", sorted(EVALUATING_DATASETS))
def test_wanders_scoring_compiles_nothing(dataset: str) -> None:
    """The environment's step and score, as a worker runs them, on the same answers."""
    env = listed()[dataset]
    config = env.Config(train_size=5)
    for index in range(5):
        item = env.entry(config, "train", index)
        for answer in answers(item):
            state = {"split": "train", "index": index, "question": "", "answer": answer}
            assert refusals_scoring(env.score, config, state) == 0, (index, answer)
        right = {"split": "train", "index": index, "question": "", "answer": str(item["answer"])}
        assert env.score(config, right).components["correct"] == 1.0


CONSTANTS = ["0", "1", "True", "False", "x"]


def test_no_constant_answer_scores_every_item() -> None:
    """game_of_life_halting gave 1.0 to any non-empty answer (``bool("False")`` is
    true). Through Wander, no fixed answer scores on (nearly) every item of any listed
    dataset, unless it is every item's answer."""
    config = RGConfig(train_size=6)
    found = []
    for name, env in listed().items():
        items = [env.entry(config, "train", index) for index in range(6)]
        for answer in CONSTANTS:
            if all(str(item["answer"]).strip() == answer for item in items):
                continue
            states = [{"split": "train", "index": i, "question": "", "answer": answer}
                      for i in range(6)]  # fmt: skip
            scores = [env.judge(config, state)[0] for state in states]
            if sum(score >= 0.5 for score in scores) == len(scores):
                found.append((name, answer))
    assert found == []


def test_game_of_life_halting_wants_the_right_answer() -> None:
    env, config = listed()["game_of_life_halting"], RGConfig(train_size=6)
    for index in range(6):
        right = env.entry(config, "train", index)["answer"]
        wrong = {"True": "False", "False": "True"}[right]
        for answer, score in ((right, 1.0), (f" '{right.lower()}' ", 1.0), (wrong, 0.0)):
            state = {"split": "train", "index": index, "question": "", "answer": answer}
            assert env.judge(config, state)[0] == score, (index, answer)


def test_the_standard_library_may_parse_what_is_never_an_argument() -> None:
    """Under the guard, ``inspect.signature`` of a built-in parses the signature CPython
    gives it (pydantic asks for ``list``'s whenever a field's default is made by it), and
    a traceback is formatted from its source lines; text itself is still refused,
    through ``ast.parse`` as through ``eval``."""
    import inspect
    import traceback

    before = guard.refusals()
    with guard.untrusted():
        assert str(inspect.signature(divmod)) == "(x, y, /)"
        try:
            {}["missing"]
        except KeyError as exc:
            assert "missing" in "".join(traceback.format_exception(exc))
        for run in (lambda: ast.parse("1 + 1"), lambda: eval("1 + 1")):
            with pytest.raises(guard.EvaluationRefused):
                run()
    assert guard.refusals() - before == 2
