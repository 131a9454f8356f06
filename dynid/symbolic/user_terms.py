"""Safe expression parsing: user terms (``--terms``) and stored term libraries.

Every expression that becomes a library term (typed by a user, read from a model file, or built by
a library) goes through ``parse_safe``: the text is first checked with Python's ``ast`` module
against a small whitelist (numbers, names from the whitelist, + - * / **, unary signs, calls of
whitelisted one-argument functions) and only then handed to ``sympy.parse_expr``, which evaluates
transformed code with ``eval``. So nothing outside the whitelist ever executes.

Coordinates: states are ``x0..x{d-1}``, inputs ``u0..u{m-1}``, fitted constants ``c0, c1, ...``.
sympy is imported inside functions only.
"""

from __future__ import annotations

import ast
import keyword
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from dynid.errors import DataError, UsageError

if TYPE_CHECKING:
    import sympy

#: Allowed function names -> sympy attribute. All take exactly one argument.
FUNCTIONS = {
    "sin": "sin",
    "cos": "cos",
    "tan": "tan",
    "sinh": "sinh",
    "cosh": "cosh",
    "tanh": "tanh",
    "atan": "atan",
    "exp": "exp",
    "log": "log",
    "sqrt": "sqrt",
    "Abs": "Abs",
    "abs": "Abs",
    "sign": "sign",
}
#: Allowed named numbers (sympy prints exp(1) as E, so stored expressions may contain it).
NAMED_NUMBERS = {"pi": "pi", "E": "E"}
MAX_LENGTH = 2000
#: Exponents must be plain numbers of at most this magnitude, and powers nest at most
#: MAX_POW_DEPTH deep: otherwise "9**9**9**9" would make sympy compute a gigantic integer.
MAX_EXPONENT = 16
MAX_POW_DEPTH = 3

_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)


def coordinate_names(n_states: int, n_inputs: int, constants: Iterable[str] = ()) -> list[str]:
    """``["x0", ..., "x{d-1}", "u0", ..., "u{m-1}", *constants]``."""
    return [
        *(f"x{i}" for i in range(n_states)),
        *(f"u{j}" for j in range(n_inputs)),
        *constants,
    ]


def parse_safe(
    text: str,
    symbols: Mapping[str, str],
    *,
    context: str = "--terms",
    error: type[Exception] = UsageError,
    require_variable: bool = True,
) -> sympy.Expr:
    """One expression as a sympy expression, after whitelist validation.

    symbols: allowed variable names -> the sympy symbol name each stands for (e.g. {"temp": "x0"}).
    Raises ``error`` (one sentence starting with ``context``) for anything outside the whitelist,
    a constant-only expression (when ``require_variable``), or a non-finite/complex result.
    """
    if len(text) > MAX_LENGTH:
        raise error(f"{context}: expression is longer than {MAX_LENGTH} characters")
    text = text.strip()
    tree = _parse_ast(text, context, error)
    if isinstance(tree.body, ast.Tuple):
        raise error(f"{context}: expected one expression, got several in {text!r}")
    _check(tree.body, text, symbols, context, error)
    return _to_sympy(text, symbols, context, error, require_variable)


def parse_coordinate_expression(
    text: str,
    n_states: int,
    n_inputs: int,
    constants: Iterable[str] = (),
    *,
    error: type[Exception] = DataError,
) -> sympy.Expr:
    """A term expression over coordinates x0.., u0.. and the given constant names, as sympy.

    Constant expressions such as "1" are allowed here (a library's constant term).
    """
    names = coordinate_names(n_states, n_inputs, constants)
    return parse_safe(
        text, {n: n for n in names}, context="term", error=error, require_variable=False
    )


def parse_user_terms(text: str, variables: Sequence[str], inputs: Sequence[str] = ()) -> list[str]:
    """Comma-separated user expressions -> canonical sympy strings in x0../u0.. coordinates.

    Expressions refer to states/inputs by their data names when these are identifiers (and not a
    function name, ``pi`` or ``E``), otherwise by coordinate (x{i} for variable i, u{j} for input
    j); a coordinate name that is also another column's data name means that column. Example:
    ``parse_user_terms("sin(x-y), x/(1+x**2)", ["x", "y"], [])`` -> ``["sin(x0 - x1)",
    "x0/(x0**2 + 1)"]``. Duplicates are dropped, order kept. Raises UsageError.
    """
    if len(text) > MAX_LENGTH:
        raise UsageError(f"--terms: the text is longer than {MAX_LENGTH} characters")
    text = " ".join(text.split())  # one line, so that newlines between terms parse
    symbols, unnamed = _user_symbols(variables, inputs)
    try:
        tree = _parse_ast(text, "--terms", UsageError)
    except UsageError as exc:
        raise UsageError(f"{exc}{_coordinate_hint(unnamed)}") from None
    nodes = tree.body.elts if isinstance(tree.body, ast.Tuple) else [tree.body]
    if not nodes:
        raise UsageError("--terms: no expression given")
    result: list[str] = []
    for node in nodes:
        source = ast.get_source_segment(text, node) or ""
        _check(node, source, symbols, "--terms", UsageError, unnamed)
        expression = str(_to_sympy(source, symbols, "--terms", UsageError, True))
        if expression not in result:
            result.append(expression)
    return result


def _user_symbols(
    variables: Sequence[str], inputs: Sequence[str]
) -> tuple[dict[str, str], dict[str, str]]:
    """(usable name -> coordinate, unusable data name -> coordinate) for user expressions."""
    coordinates = coordinate_names(len(variables), len(inputs))
    symbols: dict[str, str] = {}
    unnamed: dict[str, str] = {}
    for name, coordinate in zip([*variables, *inputs], coordinates, strict=True):
        if _usable_name(name) and name not in symbols:
            symbols[name] = coordinate
        elif name != coordinate:
            unnamed[name] = coordinate
    for coordinate in coordinates:  # data names win over coordinate names
        symbols.setdefault(coordinate, coordinate)
    return symbols, unnamed


def _usable_name(name: str) -> bool:
    return (
        name.isidentifier()
        and not keyword.iskeyword(name)
        and "__" not in name
        and name not in FUNCTIONS
        and name not in NAMED_NUMBERS
    )


def _parse_ast(text: str, context: str, error: type[Exception]) -> ast.Expression:
    # "__" never appears in a valid term; refusing it up front is a second line of defence.
    if "__" in text:
        raise error(f"{context}: '__' is not allowed in {text!r}")
    try:
        return ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        raise error(f"{context}: cannot parse {text!r} as an expression") from None


def _check(
    node: ast.AST,
    source: str,
    symbols: Mapping[str, str],
    context: str,
    error: type[Exception],
    unnamed: Mapping[str, str] | None = None,
    pow_depth: int = 0,
) -> None:
    """Raise ``error`` unless ``node`` is built only from whitelisted parts (see module doc)."""

    def check(child: ast.AST, depth: int = pow_depth) -> None:
        _check(child, source, symbols, context, error, unnamed, depth)

    if isinstance(node, ast.Constant):
        if type(node.value) not in (int, float):  # bool is an int subclass: excluded by type()
            raise error(f"{context}: only numbers are allowed as literals in {source!r}")
    elif isinstance(node, ast.Name):
        if node.id in FUNCTIONS and node.id not in symbols:
            raise error(f"{context}: {node.id} must be called with one argument in {source!r}")
        if node.id not in symbols and node.id not in NAMED_NUMBERS:
            raise error(_unknown_name(node.id, source, symbols, context, unnamed))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        check(node.operand)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, _OPERATORS):
        if isinstance(node.op, ast.Pow):
            if pow_depth + 1 > MAX_POW_DEPTH:
                raise error(f"{context}: powers nest too deeply in {source!r}")
            exponent = _number(node.right)
            if exponent is None or abs(exponent) > MAX_EXPONENT:
                raise error(
                    f"{context}: exponents must be numbers between -{MAX_EXPONENT} and "
                    f"{MAX_EXPONENT} in {source!r}; write exp(y*log(x)) for x**y"
                )
            check(node.left, pow_depth + 1)
        else:
            check(node.left)
            check(node.right)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id not in FUNCTIONS:
            raise error(_unknown_name(node.func.id, source, symbols, context, unnamed))
        if len(node.args) != 1 or node.keywords:
            raise error(f"{context}: {node.func.id}() takes exactly one argument in {source!r}")
        check(node.args[0])
    else:
        what = type(node).__name__
        raise error(f"{context}: {what} is not allowed in {source!r}; use numbers, names, "
                    "+ - * / ** and the functions " + ", ".join(FUNCTIONS))


def _number(node: ast.AST) -> float | None:
    """The value of a numeric-literal expression (numbers, signs, + - * /), else None."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        value = _number(node.operand)
        return None if value is None else (value if isinstance(node.op, ast.UAdd) else -value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        left, right = _number(node.left), _number(node.right)
        if left is None or right is None or (isinstance(node.op, ast.Div) and right == 0):
            return None
        operations = {ast.Add: float.__add__, ast.Sub: float.__sub__,
                      ast.Mult: float.__mul__, ast.Div: float.__truediv__}
        return operations[type(node.op)](left, right)
    return None


def _unknown_name(
    name: str,
    source: str,
    symbols: Mapping[str, str],
    context: str,
    unnamed: Mapping[str, str] | None,
) -> str:
    allowed = ", ".join([*symbols, *NAMED_NUMBERS, *FUNCTIONS])
    message = f"{context}: unknown name {name!r} in {source!r}; allowed: {allowed}"
    return message + _coordinate_hint(unnamed)


def _coordinate_hint(unnamed: Mapping[str, str] | None) -> str:
    if not unnamed:
        return ""
    hints = ", ".join(f"{column!r} is {coordinate}" for column, coordinate in unnamed.items())
    return f" (columns whose names are not usable here go by coordinate: {hints})"


def _to_sympy(
    source: str,
    symbols: Mapping[str, str],
    context: str,
    error: type[Exception],
    require_variable: bool,
) -> sympy.Expr:
    """Evaluate already-validated ``source`` with sympy in a namespace of whitelisted names only."""
    import sympy
    from sympy.parsing.sympy_parser import auto_number, parse_expr

    local_dict: dict[str, object] = {name: getattr(sympy, attr) for name, attr in FUNCTIONS.items()}
    local_dict.update({name: getattr(sympy, attr) for name, attr in NAMED_NUMBERS.items()})
    local_dict.update({name: sympy.Symbol(symbol, real=True) for name, symbol in symbols.items()})
    # An explicit empty __builtins__ stops eval from inserting the real builtins; auto_number
    # turns literals into Integer/Float so that 1/2 stays exact.
    global_dict = {"__builtins__": {}, "Integer": sympy.Integer, "Float": sympy.Float}
    try:
        expression = parse_expr(
            source, local_dict=local_dict, global_dict=global_dict,
            transformations=(auto_number,), evaluate=True,
        )
    except Exception as exc:  # noqa: BLE001 - any sympy failure is a bad expression
        raise error(f"{context}: cannot evaluate {source!r}: {exc}") from None
    # Symbols were created real (so sqrt(x**2) etc. simplify sensibly); store plain ones.
    expression = expression.xreplace({s: sympy.Symbol(s.name) for s in expression.free_symbols})
    if not isinstance(expression, sympy.Expr) or expression.has(
        sympy.I, sympy.zoo, sympy.oo, sympy.nan
    ):
        raise error(f"{context}: {source!r} is not a finite real expression")
    if require_variable and not expression.free_symbols:
        raise error(f"{context}: {source!r} uses no variable; a term must depend on the data")
    return expression
