"""The rule that model text never runs as code, enforced where environments run.

Environments read answers with parsers of their own (``rg_scoring``): nothing derived
from an action may reach ``eval``, ``exec``, ``compile`` or a parser built on them
(``ast.parse``, ``sympy.parse_expr``). A static scan of the shipped code checks that
(``tests/test_no_evaluation.py``); this module checks it at run time, in the worker.

While an untrusted call runs (a step or a score: the calls that see an action), an audit
hook refuses every compilation and every execution of code that does not come from a
file: importing a module still works (its code has a file, and what it builds while it
is imported is its own), a library function known to compile its own templates works
(``GENERATORS``), ``eval`` of any text does not, whoever calls it. The refusal is
``EvaluationRefused``, a ``BaseException``, so that no ``except Exception`` of a scorer
turns it into a score: the call fails, and the service answers ``env_error`` naming it.

An environment that runs code of its own making while it prepares a task (reasoning-gym's
``codeio`` executes its dataset's programs to make an example) does so inside
``own_code()``: the exception is visible in the environment's source, and never wraps
the reading of an answer.
"""

from __future__ import annotations

import builtins
import sys
import sysconfig
from collections.abc import Iterator
from contextlib import contextmanager
from types import CodeType, FrameType
from typing import Any

_state = {"hooked": False, "untrusted": False, "own_code": False}
_refused = [0]
"""Refusals so far in this process, caught or not (a scorer's bare ``except:`` swallows
one and scores the answer 0; the audit counts them all)."""
BUILT_IN_EXCEPTIONS = frozenset(
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
)


class EvaluationRefused(BaseException):
    """Code was about to be compiled or run from text during an untrusted call."""


def _from_a_file(filename: object) -> bool:
    """Whether ``filename`` names a module's source (an import), not text made at run time
    (``<string>``, ``<unknown>``): frozen modules of the interpreter count as files."""
    if not isinstance(filename, str | bytes):
        return False
    name = filename.decode(errors="replace") if isinstance(filename, bytes) else filename
    return name.startswith("<frozen ") or (name.startswith("/") and name.endswith(".py"))


GENERATORS = {("sympy/polys/monomials.py", "_build")}
"""(file, function) of library code that compiles code of its own making, from a fixed
template and never from its arguments' text, while it computes: sympy builds its
polynomial arithmetic for each number of variables that way (``simplify`` of an
answer with three symbols makes ``monomial_mul`` for three)."""
PARSERS = {
    ("/inspect.py", "_signature_fromstr"),  # a built-in's signature, from its C text
    ("/inspect.py", "wrap_value"),  # a default value's name in that signature
    ("/traceback.py", "_extract_caret_anchors_from_line_segment"),  # a line of a source file
}
"""(file, function) of the standard library that parse text that is never an argument's:
the signature CPython gives a built-in (pydantic asks for ``list``'s whenever a field's
default is made by it), a source line of a traceback being formatted. Each calls
``ast.parse`` or ``eval`` itself, or is the caller of ``ast.parse``."""
IMPORTING = "<frozen importlib._bootstrap"
"""The import machinery's frames: a module imported during a call (sympy imports lazily)
may build classes with ``namedtuple`` or ``dataclass``, which compile their own code."""


def _allowed(caller: FrameType | None) -> bool:
    """Whether the compilation that ``caller`` asked for is a library's own: a generator
    of ``GENERATORS``, or anything an import runs."""
    if caller is not None:
        code = caller.f_code
        if any(code.co_filename.endswith(f) and code.co_name == n for f, n in GENERATORS):
            return True
        parser = caller.f_back if code.co_name == "parse" and _is(code, "/ast.py") else caller
        if parser is not None and any(
            _is(parser.f_code, f) and parser.f_code.co_name == n for f, n in PARSERS
        ):
            return True
    frame = caller
    while frame is not None:
        if frame.f_code.co_filename.startswith(IMPORTING):
            return True
        frame = frame.f_back
    return False


def _is(code: CodeType, suffix: str) -> bool:
    """Whether ``code`` is of the standard library's module file ending in ``suffix``."""
    return code.co_filename.endswith(suffix) and code.co_filename.startswith(_STDLIB)


_STDLIB = sysconfig.get_paths()["stdlib"]


def _audit(event: str, arguments: tuple[Any, ...]) -> None:
    if not _state["untrusted"] or _state["own_code"] or event not in ("compile", "exec"):
        return
    if _allowed(sys._getframe(1)):
        return
    if event == "compile" and not _from_a_file(arguments[1]):
        _refused[0] += 1
        raise EvaluationRefused(f"compile of {arguments[1]!r} during an untrusted call")
    if event == "exec" and not _from_a_file(getattr(arguments[0], "co_filename", None)):
        _refused[0] += 1
        raise EvaluationRefused("exec of code made at run time during an untrusted call")


def refusals() -> int:
    """How many times this process refused to compile or run text (``untrusted()``)."""
    return _refused[0]


def install() -> None:
    """Add the audit hook (once per process: audit hooks cannot be removed, so it stays,
    inert outside ``untrusted()``)."""
    if not _state["hooked"]:
        sys.addaudithook(_audit)
        _state["hooked"] = True


@contextmanager
def untrusted() -> Iterator[None]:
    """Refuse run-time code for the duration: the worker wraps each step and score."""
    install()
    _state["untrusted"] = True
    try:
        yield
    finally:
        _state["untrusted"] = False


@contextmanager
def own_code() -> Iterator[None]:
    """Allow the environment's own run-time code (a task generator's), never an answer's."""
    before = _state["own_code"]
    _state["own_code"] = True
    try:
        yield
    finally:
        _state["own_code"] = before


def reportable(name: object) -> str:
    """An exception's class name as an answer may carry it: a built-in one, or the guard's
    refusal; any other name was made by environment code, which model text may have
    written (a class named after the hidden answer), and reads ``Exception``."""
    if isinstance(name, str) and (name in BUILT_IN_EXCEPTIONS or name == "EvaluationRefused"):
        return name
    return "Exception"
