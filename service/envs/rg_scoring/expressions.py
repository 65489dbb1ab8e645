"""Arithmetic and algebra read by hand, for the reasoning-gym scorers built on ``parse_expr``.

``puzzle24``, ``countdown``, ``polynomial_multiplication``, ``simple_integration`` and
``intermediate_integration`` read the answer with sympy's ``parse_expr``, which rewrites
the text into Python and ``eval``s it: ``__import__('sys')._getframe(3).f_locals`` in an
answer runs in the service and reads the scorer's own variables (the reference answer,
the target) to forge its reward. Here the answer is never evaluated, compiled or handed
to ``ast`` or ``sympify``: a tokenizer and a precedence-climbing parser make a small
immutable tree, which two interpreters walk:

- ``evaluate_rational``: exact arithmetic on ``Fraction``, for the number games. sympy's
  Integer and Rational arithmetic is exact too, so the value is the same number; where
  sympy's value is not a rational reached by exact steps (a decimal is a binary
  ``Float``, a zero divisor makes ``zoo`` or ``nan``, a fractional power may be a root, a
  name or a function is symbolic) it raises ``NotRational`` and ``number`` builds sympy
  numbers instead, every value on the way a sympy number: ``int(exp(exp(100)))`` never
  returns, so a constant, an irrational root or a symbol is refused there;
- ``evaluate_sympy``: sympy objects made from the tree with the Python operators that the
  ``eval`` of ``parse_expr``'s output applies (``Integer``/``Float`` from the parsed
  digits, ``Symbol``, ``+ - * / ** ^``, a fixed table of functions), so the object is
  the one ``parse_expr`` builds.

The grammar is what ``parse_expr`` reads with its default transformations, in Python's
precedence, from lowest to highest:

- ``^``: Python's XOR, as ``parse_expr`` leaves it (``2^3`` is 1; ``x^2`` raises);
- ``+ -``, then ``* /`` (left-associative), then unary ``+ -``;
- ``**``: right-associative, binding tighter than a sign on its left (``-x**2`` is
  ``-(x**2)``), its exponent possibly signed (``2**-1``); ``* *`` with blanks between is
  ``**``, as ``parse_expr`` glues operators back together;
- postfix ``!`` and ``!!`` (``factorial``, ``factorial2``), right after a number, a name
  or ``)``;
- operands: integers (no leading zeros; ``_`` between digits), decimals and exponents
  (``2.5``, ``.5``, ``5.``, ``1e3``: sympy Floats of the precision ``Float(text)``
  gives), names, calls (``sin(x)``, ``exp(x)``) and parentheses.

A name is the scorer's own (the integration variable, ``C``), else ``pi``, ``E``, ``I``
or a function of ``FUNCTIONS``, else a ``Symbol`` as ``parse_expr`` makes it, unless
sympy or Python's builtins define it otherwise (``N``, ``S``, ``gamma``, ``sum``,
``__import__``) or it starts with ``_``: those are refused. Blanks, ``#`` comments,
backslash continuations and newlines inside parentheses are read as Python reads them;
a newline outside them ends the expression. Everything else is refused: implicit
multiplication (``2x``, ``(x+1)(x-1)``: a syntax error to ``parse_expr`` as well),
``//``, ``%``, comparisons, attributes, subscripts, strings, lambdas, other calls,
hexadecimal and complex literals.

Caps bound the work before it is done: ``MAX_CHARS`` characters, ``MAX_TOKENS`` tokens,
``MAX_DEPTH`` nested parentheses, signs and exponents, ``MAX_DIGITS`` digits in a
number, a decimal exponent within ``MAX_DECIMAL_EXPONENT``, a power's exponent within
``MAX_EXPONENT`` and its numeric result (estimated first) within ``MAX_BITS``, as every
other number made, and ``MAX_FACTORIAL``. ``9**9**9`` is refused, never computed. Text
outside the grammar or the caps raises ``ExpressionError``.
"""

from __future__ import annotations

import builtins
import keyword
import math
import operator
import re
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, TypeAlias

import sympy
from mpmath.libmp import dps_to_prec

MAX_CHARS = 50_000
"""Longest text read: the hardest polynomial config in one variable writes ~6,000 (its
cross-variable products reach millions: past any cap, and minutes of sympy's time)."""
MAX_TOKENS = 2_000
"""Most tokens read: ~400 in those answers. sympy's sums cost the square of their terms,
which this bounds."""
MAX_DEPTH = 64
"""Deepest nesting of parentheses, call arguments, signs and exponents (answers need 5)."""
MAX_DIGITS = 1_000
"""Most digits in a number."""
MAX_DECIMAL_EXPONENT = 400
"""Largest power of ten of a decimal, as mpmath scales it: past it ``Float(text)`` rounds
another way (mpmath's own limit), and such numbers are never answers."""
MAX_EXPONENT = 1_000
"""Largest magnitude of a numeric exponent (polynomial answers reach 100)."""
MAX_BITS = 16_384
"""Largest number made, in bits of its numerator or denominator or of its binary
exponent (a Float): 1,000! has 8,530."""
MAX_FACTORIAL = 1_000
"""Largest magnitude of a number whose factorial is taken."""
MAX_NAME = 64
"""Longest name (a variable of ``polynomial_multiplication`` has at most 64 characters)."""


class ExpressionError(ValueError):
    """The text is outside the grammar or a cap."""


class NotRational(Exception):
    """``evaluate_rational``'s signal: sympy's value here is not an exact rational."""


@dataclass(frozen=True, slots=True)
class Number:
    """A numeric literal: its exact value, and the binary precision of the sympy Float it
    makes (None for an integer literal, which makes an Integer)."""

    value: Fraction
    precision: int | None


@dataclass(frozen=True, slots=True)
class Name:
    name: str


@dataclass(frozen=True, slots=True)
class Call:
    function: str
    arguments: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Unary:
    operator: str
    operand: Node


@dataclass(frozen=True, slots=True)
class Chain:
    """Left-associative operators of one precedence: ``first op x op y ...``, evaluated
    pairwise from the left as Python does, in a loop however long it is."""

    first: Node
    rest: tuple[tuple[str, Node], ...]


@dataclass(frozen=True, slots=True)
class Power:
    base: Node
    exponent: Node


@dataclass(frozen=True, slots=True)
class Factorial:
    operand: Node
    double: bool


Node: TypeAlias = Number | Name | Call | Unary | Chain | Power | Factorial
Token: TypeAlias = str | Number | Name

_DIGITS = r"[0-9](?:_?[0-9])*"
_NUMBER = re.compile(rf"(?:({_DIGITS})(?:\.({_DIGITS})?)?|\.({_DIGITS}))(?:[eE]([+-]?{_DIGITS}))?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_GAP = r"(?:[ \t\f]|\\\r?\n)*"
_STARS = re.compile(rf"\*(?:{_GAP}\*)*")
_SLASHES = re.compile(rf"/(?:{_GAP}/)*")
_BANGS = re.compile(r"!+")
_CONTINUATION = re.compile(r"\\\r?\n")
_COMMENT = re.compile(r"#[^\r\n]*")  # a lone carriage return is refused
_LEVELS = (("^",), ("+", "-"), ("*", "/"))
"""The binary operators by precedence, lowest first (``**`` is right-associative)."""


def parse(text: str) -> Node:
    """The tree of ``text``; ExpressionError if it is outside the grammar or a cap."""
    if not isinstance(text, str):
        raise ExpressionError("not a text")
    if len(text) > MAX_CHARS:
        raise ExpressionError(f"longer than {MAX_CHARS} characters")
    return _Parser(_tokenize(text.strip())).parse()


def _tokenize(text: str) -> list[Token]:
    """The tokens of ``text`` (already stripped, as ``parse_expr`` strips it)."""
    tokens: list[Token] = []
    depth = 0
    ended = False  # a newline outside parentheses closed the expression
    line = 0  # where the first token's line starts (-1: anywhere): it may not be indented
    end = -1  # where the last token ended: a "!" must follow it directly
    position = 0
    while position < len(text):
        char = text[position]
        if char in " \t\f":
            position += 1
            continue
        if char == "#":
            position = _COMMENT.match(text, position).end()  # type: ignore[union-attr]
            continue
        if char == "\n" or text.startswith("\r\n", position):
            ended = ended or (depth == 0 and bool(tokens))
            position = text.index("\n", position) + 1
            line = position if not tokens else line
            continue
        if ended:
            raise ExpressionError("text after the end of the expression")
        if not tokens and line not in (-1, position):
            raise ExpressionError("an indented first line")  # after comment lines
        if char == "\\":
            continuation = _CONTINUATION.match(text, position)
            if continuation is None:
                raise ExpressionError("a backslash that does not end a line")
            position = continuation.end()
            line = -1 if not tokens else line  # the next line's indent does not count
            continue
        token, stop = _token(text, position, tokens[-1] if end == position else None)
        if token == "(":
            depth += 1
        elif token == ")":
            depth -= 1
            if depth < 0:
                raise ExpressionError("unbalanced parentheses")
        tokens.append(token)
        if len(tokens) > MAX_TOKENS:
            raise ExpressionError(f"more than {MAX_TOKENS} tokens")
        position = end = stop
    if depth:
        raise ExpressionError("unbalanced parentheses")
    if not tokens:
        raise ExpressionError("no expression")
    return tokens


def _token(text: str, position: int, touching: Token | None) -> tuple[Token, int]:
    """The token at ``position`` and where it ends; ``touching``: the token that ends
    right there, if one does."""
    char = text[position]
    if char == "!":
        stop = _BANGS.match(text, position).end()  # type: ignore[union-attr]
        after_operand = isinstance(touching, Number | Name) or touching == ")"
        if not after_operand or stop - position > 2 or text.startswith("=", stop):
            raise ExpressionError("a '!' that is not a factorial")
        return text[position:stop], stop
    if char in "*/":
        run = (_STARS if char == "*" else _SLASHES).match(text, position)
        count = run.group().count(char)  # type: ignore[union-attr]
        if count > (2 if char == "*" else 1):
            raise ExpressionError(f"unsupported operator {char * count!r}")
        return char * count, run.end()  # type: ignore[union-attr]
    if char in "+-^(),":
        return char, position + 1
    number = _NUMBER.match(text, position)
    if number is not None:
        return _number(number), number.end()
    name = _NAME.match(text, position)
    if name is not None:
        if len(name.group()) > MAX_NAME:
            raise ExpressionError(f"a name longer than {MAX_NAME} characters")
        return Name(name.group()), name.end()
    raise ExpressionError(f"unexpected character {char!r}")


def _number(match: re.Match[str]) -> Number:
    """A literal as ``parse_expr`` reads it: ``Integer(text)`` without a point or an
    exponent, else ``Float(text)``, whose precision is the digits' count (15 at least)."""
    whole, after_point, point_first, exponent = match.groups()
    whole = (whole or "").replace("_", "")
    fraction = (after_point or point_first or "").replace("_", "")
    if len(whole) + len(fraction) > MAX_DIGITS or len(exponent or "") > 8:
        raise ExpressionError(f"a number of more than {MAX_DIGITS} digits")
    if "." not in match.group() and exponent is None:
        if whole.startswith("0") and whole.strip("0"):
            raise ExpressionError("leading zeros in an integer")  # Python refuses 007
        return Number(Fraction(int(whole)), None)
    significant = fraction.rstrip("0")  # mpmath scales by these digits only
    power_of_ten = int(exponent or "0") - len(significant)
    if abs(power_of_ten) > MAX_DECIMAL_EXPONENT:
        raise ExpressionError("a decimal exponent out of range")
    value = int(whole + significant or "0") * Fraction(10) ** power_of_ten
    digits = len(str(int(whole + fraction or "0")))  # Decimal(text)'s digits
    if "." not in match.group() and value.denominator == 1:
        digits = max(digits, len(str(value.numerator)))  # 12e3 keeps all of 12000's
    return Number(value, dps_to_prec(max(15, digits)))


class _Parser:
    """Precedence climbing over the tokens; ``MAX_DEPTH`` bounds its recursion."""

    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.position = 0
        self.depth = 0

    def parse(self) -> Node:
        node = self.binary(0)
        if self.position != len(self.tokens):
            raise ExpressionError(f"unexpected {self.tokens[self.position]!r}")
        return node

    def peek(self) -> Token | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self) -> Token:
        token = self.peek()
        if token is None:
            raise ExpressionError("the expression ends too soon")
        self.position += 1
        return token

    def expect(self, token: str) -> None:
        if self.take() != token:
            raise ExpressionError(f"expected {token!r}")

    def nested(self, parse: Callable[[], Node]) -> Node:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ExpressionError(f"nested deeper than {MAX_DEPTH}")
        node = parse()
        self.depth -= 1
        return node

    def binary(self, level: int) -> Node:
        """The operators of ``_LEVELS[level]`` and above."""
        if level == len(_LEVELS):
            return self.operand()
        first = self.binary(level + 1)
        rest = []
        while self.peek() in _LEVELS[level]:
            rest.append((str(self.take()), self.binary(level + 1)))
        return Chain(first, tuple(rest)) if rest else first

    def operand(self) -> Node:
        """Signs, then a primary with its factorial and its power."""
        if self.peek() in ("+", "-"):
            sign = str(self.take())
            return Unary(sign, self.nested(self.operand))
        node = self.primary()
        if self.peek() in ("!", "!!"):
            node = Factorial(node, self.take() == "!!")
        if self.peek() == "**":
            self.take()
            return Power(node, self.nested(self.operand))
        return node

    def primary(self) -> Node:
        token = self.take()
        if isinstance(token, Number):
            return token
        if isinstance(token, Name):
            if self.peek() != "(":
                return token
            self.take()
            arguments = [self.nested(lambda: self.binary(0))]
            while self.peek() == ",":
                self.take()
                if self.peek() == ")":
                    break  # a trailing comma, as Python allows
                arguments.append(self.nested(lambda: self.binary(0)))
            self.expect(")")
            return Call(token.name, tuple(arguments))
        if token == "(":
            node = self.nested(lambda: self.binary(0))
            self.expect(")")
            return node
        raise ExpressionError(f"unexpected {token!r}")


def _check_bits(bits: int) -> None:
    if bits > MAX_BITS:
        raise ExpressionError(f"a number of more than {MAX_BITS} bits")


def _check_power(base_bits: int, exponent_size: Any) -> None:
    """Refuse a power before computing it: ``exponent_size`` is the exponent's magnitude
    (a Fraction or a sympy number), ``base_bits`` the base's size (0 if not a number)."""
    if exponent_size > MAX_EXPONENT or base_bits * exponent_size > MAX_BITS:
        raise ExpressionError("a power too large")


def _fraction_bits(value: Fraction) -> int:
    return max(value.numerator.bit_length(), value.denominator.bit_length())


def evaluate_rational(node: Node) -> Fraction:
    """The exact value of the tree, as sympy computes it where it is a rational number;
    NotRational where sympy's value is not a rational reached by exact steps."""
    match node:
        case Number(value=value, precision=None):
            return value
        case Unary(operator=sign, operand=operand):
            value = evaluate_rational(operand)
            return -value if sign == "-" else value
        case Chain(first=first, rest=rest):
            value = evaluate_rational(first)
            for symbol, item in rest:
                value = _rational_operation(symbol, value, evaluate_rational(item))
            return value
        case Power(base=base, exponent=exponent):
            return _rational_power(evaluate_rational(base), evaluate_rational(exponent))
        case Factorial(operand=operand, double=double):
            return _rational_factorial(evaluate_rational(operand), double)
    raise NotRational  # a decimal, a name or a call


def _rational_operation(symbol: str, left: Fraction, right: Fraction) -> Fraction:
    if symbol == "^":
        if left.denominator != 1 or right.denominator != 1:
            raise NotRational  # sympy raises TypeError: only Integers have XOR
        result = Fraction(left.numerator ^ right.numerator)
    elif symbol == "/":
        if not right:
            raise NotRational  # zoo or nan
        result = left / right
    else:
        result = left + right if symbol == "+" else left - right if symbol == "-" else left * right
    _check_bits(_fraction_bits(result))
    return result


def _rational_power(base: Fraction, exponent: Fraction) -> Fraction:
    if exponent.denominator != 1 or (not base and exponent < 0):
        raise NotRational  # a root, or zoo
    _check_power(_fraction_bits(base), abs(exponent))
    result = base ** int(exponent)
    _check_bits(_fraction_bits(result))
    return result


def _rational_factorial(value: Fraction, double: bool) -> Fraction:
    if value.denominator != 1 or value < 0:
        raise NotRational  # gamma of a fraction; zoo
    if value > MAX_FACTORIAL:
        raise ExpressionError("a factorial too large")
    n = value.numerator
    return Fraction(math.prod(range(n, 0, -2)) if double else math.factorial(n))


def _factorial(value: sympy.Basic, double: bool = False) -> sympy.Basic:
    """sympy's ``factorial`` (``factorial2``), refused for a number past ``MAX_FACTORIAL``."""
    if isinstance(value, sympy.Rational | sympy.Float) and abs(value) > MAX_FACTORIAL:
        raise ExpressionError("a factorial too large")
    return sympy.factorial2(value) if double else sympy.factorial(value)


_SYMPY_FUNCTIONS = (
    *("sin", "cos", "tan", "cot", "sec", "csc", "asin", "acos", "atan", "acot"),
    *("sinh", "cosh", "tanh", "coth", "asinh", "acosh", "atanh"),
    *("exp", "log", "ln", "sqrt", "Abs"),
)
FUNCTIONS: dict[str, tuple[Callable[..., Any], int]] = {
    **{name: (getattr(sympy, name), 1) for name in _SYMPY_FUNCTIONS},
    "abs": (abs, 1),  # Python's builtin, which makes sympy's Abs
    "factorial": (_factorial, 1),
}
"""The functions a text may call, by name: the callable and its number of arguments.
Not ``Integral``: ``Integral(<the integrand>, x)`` differentiates back to the integrand,
so reasoning-gym gives it full marks on every integration item without integrating
anything (a reward without the task); a twelfth of intermediate_integration's own
answers hold one, and those items are solved by a closed form or not at all."""
CONSTANTS: dict[str, sympy.Basic] = {"pi": sympy.pi, "E": sympy.E, "I": sympy.I}
_OPERATIONS: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "^": operator.xor,
}


def _reserved() -> frozenset[str]:
    """The names ``parse_expr`` does not make a Symbol of: Python's keywords and builtin
    functions, and what ``from sympy import *`` binds to a class, a callable or a sympy
    object (``N``, ``S``, ``Q``, ``gamma``, ``oo``...)."""
    kept = (sympy.Basic, type, type(sympy.Q))
    exported = {
        name
        for name in sympy.__all__
        if isinstance(getattr(sympy, name), kept) or callable(getattr(sympy, name))
    }
    functions = {n for n, v in vars(builtins).items() if isinstance(v, types.BuiltinFunctionType)}
    return frozenset(exported | functions | set(keyword.kwlist))


_RESERVED = _reserved()


def evaluate_sympy(
    node: Node, names: Mapping[str, sympy.Basic] | None = None, *, numbers_only: bool = False
) -> sympy.Basic:
    """The sympy object ``parse_expr`` makes of the tree, with ``names`` as its
    ``local_dict``. ``numbers_only``: every value made must be a sympy number (or
    ``zoo``), else ExpressionError: it keeps ``int``/``float`` of the result cheap."""
    return _SympyBuilder(names or {}, numbers_only).build(node)


class _SympyBuilder:
    def __init__(self, names: Mapping[str, sympy.Basic], numbers_only: bool) -> None:
        self.names = names
        self.numbers_only = numbers_only

    def build(self, node: Node) -> sympy.Basic:
        match node:
            case Number(value=value, precision=None):
                result = sympy.Integer(value.numerator)
            case Number(value=value, precision=precision):
                exact = sympy.Rational(value.numerator, value.denominator)
                result = sympy.Float(exact, precision=precision)
            case Name(name=name):
                result = self.value(name)
            case Call(function=function, arguments=arguments):
                result = self.call(function, [self.build(argument) for argument in arguments])
            case Unary(operator=sign, operand=operand):
                value = self.build(operand)
                result = -value if sign == "-" else +value
            case Chain(first=first, rest=rest):
                result = self.build(first)
                for symbol, item in rest:
                    result = self.checked(_OPERATIONS[symbol](result, self.build(item)))
                return result
            case Power(base=base, exponent=exponent):
                base_value, exponent_value = self.build(base), self.build(exponent)
                if isinstance(exponent_value, sympy.Rational | sympy.Float):
                    _check_power(_number_bits(base_value), abs(exponent_value))
                result = base_value**exponent_value
            case Factorial(operand=operand, double=double):
                result = _factorial(self.build(operand), double)
        return self.checked(result)

    def value(self, name: str) -> sympy.Basic:
        if name in self.names:
            return self.names[name]
        if name in CONSTANTS:
            return CONSTANTS[name]
        if name in FUNCTIONS or name in _RESERVED or name.startswith("_"):
            raise ExpressionError(f"{name!r} is not a value this parser reads")
        return sympy.Symbol(name)

    def call(self, function: str, arguments: list[sympy.Basic]) -> sympy.Basic:
        if function in self.names or function not in FUNCTIONS:
            raise ExpressionError(f"{function!r} is not a function this parser calls")
        apply, arity = FUNCTIONS[function]
        if len(arguments) != arity:
            raise ExpressionError(f"{function} takes {arity} argument(s)")
        return apply(*arguments)

    def checked(self, value: Any) -> sympy.Basic:
        """``value``, if its numbers (its own and its direct arguments') and numeric
        exponents are within the caps."""
        if self.numbers_only and not isinstance(value, sympy.Number) and value is not sympy.zoo:
            raise ExpressionError("not a number")
        for part in (value, *getattr(value, "args", ())):
            _check_bits(_number_bits(part))
            if isinstance(part, sympy.Pow) and isinstance(part.exp, sympy.Rational | sympy.Float):
                _check_power(0, abs(part.exp))
        return value  # type: ignore[no-any-return]


def _number_bits(value: Any) -> int:
    """The size of a sympy Rational (its numerator or denominator) or Float (its binary
    exponent); 0 for anything else."""
    if isinstance(value, sympy.Rational):
        return max(value.p.bit_length(), value.q.bit_length())
    if isinstance(value, sympy.Float):
        _, mantissa, exponent, bit_count = value._mpf_
        return abs(exponent + bit_count) if mantissa else 0
    return 0


def number(text: str) -> sympy.Basic:
    """The sympy number ``parse_expr(text)`` makes, for ``int()`` and ``float()``;
    ExpressionError where the text is outside the grammar or a cap, or a value on the
    way is not a number (a symbol, ``sqrt(2)``, ``pi``)."""
    tree = parse(text)
    try:
        value = evaluate_rational(tree)
    except NotRational:
        return evaluate_sympy(tree, numbers_only=True)
    return sympy.Rational(value.numerator, value.denominator)


def expression(text: str, names: Mapping[str, sympy.Basic] | None = None) -> sympy.Basic:
    """The sympy object ``parse_expr(text, local_dict=names)`` makes; ExpressionError
    where the text is outside the grammar or a cap."""
    return evaluate_sympy(parse(text), names)
