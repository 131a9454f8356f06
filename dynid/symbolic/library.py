"""Candidate-term libraries for equation discovery, and the evaluated term set.

A library lists ``Term``s: sympy-parsable expressions in the states ``x0..x{d-1}``, the inputs
``u0..u{m-1}`` and constant symbols ``c0, c1, ...`` (unique within a library) with initial values
that ``refine.refine_constants`` may move. ``TermSet`` fixes such a list and evaluates it:
``termset.evaluate(x, u)`` is Theta, shape (n, p), column k = term k, in the units of the terms.

Libraries combine as in pysindy: ``a + b`` concatenates (duplicates removed, first occurrence kept,
constants renumbered), ``a * b`` takes all pairwise products. ``parse_library_spec("poly3+trig")``
reads the compact CLI form. sympy is imported inside functions only.
"""

from __future__ import annotations

import operator
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import reduce
from itertools import combinations, combinations_with_replacement, groupby
from typing import TYPE_CHECKING, Any

import numpy as np

from dynid.errors import DataError, UsageError
from dynid.symbolic.cache import CACHE
from dynid.symbolic.user_terms import coordinate_names, parse_coordinate_expression

if TYPE_CHECKING:
    import sympy

KINDS = ("polynomial", "trig", "rational", "exp", "log", "custom", "product")
RATIONAL_KINDS = ("michaelis_menten", "hill", "repression")
# Hill exponents of the "saturating" library part: cooperativity is usually 1-4; oscillators
# built on repression (Goodwin) need 8 or more.
SATURATING_EXPONENTS = (2, 3, 4, 6, 8, 10)
MAX_DEGREE = 10
CONSTANT_NAME = re.compile(r"\bc\d+\b")


@dataclass(frozen=True)
class Term:
    """One candidate term: ``expr`` over x0.., u0.., c0..; ``constants``: ((name, start), ...).

    ``family``: terms of one non-empty family are alternatives of which the pipeline keeps one
    per equation (``profile.FamilyProfile``), e.g. the activation shapes of one coordinate
    with different Hill exponents. ``bounds``: the range a constant is searched in.
    """

    expr: str
    constants: tuple[tuple[str, float], ...] = ()
    kind: str = "polynomial"
    family: str = ""
    bounds: tuple[tuple[str, float, float], ...] = ()  # (constant, low, high): where it is identifiable
    sharpness: int = 1  # d log(term) / d log(constant) at most, ~ the Hill exponent: grid resolution

    @property
    def constant_names(self) -> list[str]:
        return [name for name, _ in self.constants]

    def renumbered(self, start: int) -> Term:
        """This term with its constants renamed c{start}, c{start+1}, ... in their order."""
        return self.renamed({name: f"c{start + k}" for k, name in enumerate(self.constant_names)})

    def renamed(self, mapping: dict[str, str]) -> Term:
        """This term with constant names replaced by ``mapping`` (names not in it are kept)."""
        mapping = {n: mapping.get(n, n) for n in self.constant_names}
        if all(old == new for old, new in mapping.items()):
            return self
        # One regex pass renames all at once, so swaps (c0 <-> c1) cannot collide.
        expr = CONSTANT_NAME.sub(lambda m: mapping.get(m.group(0), m.group(0)), self.expr)
        return Term(
            expr,
            tuple((mapping[n], v) for n, v in self.constants),
            self.kind,
            self.family,
            tuple((mapping[n], lo, hi) for n, lo, hi in self.bounds),
            self.sharpness,
        )

    def sympy(self, n_states: int, n_inputs: int):
        """The term as a sympy expression, parsed by the whitelist parser."""
        return parse_coordinate_expression(self.expr, n_states, n_inputs, self.constant_names)


class Library(ABC):
    """A rule that lists candidate terms for d states and m inputs (optionally looking at data)."""

    @abstractmethod
    def terms(
        self,
        n_states: int,
        n_inputs: int,
        x: np.ndarray | None = None,
        u: np.ndarray | None = None,
    ) -> list[Term]:
        """The terms in canonical order; x (n, d) / u (n, m) let a library check ranges."""

    def __add__(self, other: Library) -> Library:
        if not isinstance(other, Library):
            return NotImplemented
        return SumLibrary((*_summands(self), *_summands(other)))

    def __mul__(self, other: Library) -> Library:
        if not isinstance(other, Library):
            return NotImplemented
        return ProductLibrary(self, other)


def _summands(library: Library) -> tuple[Library, ...]:
    """Keeps sums flat: (a + b) + c has the three parts a, b, c."""
    return library.parts if isinstance(library, SumLibrary) else (library,)


def _usage_check(condition: bool, message: str) -> None:
    if not condition:
        raise UsageError(message)


@dataclass(frozen=True)
class PolynomialLibrary(Library):
    """All monomials up to ``degree`` in pysindy's order: "1", "x0", "x1", "u0", "x0**2", ..."""

    degree: int = 2
    include_constant: bool = True
    include_inputs: bool = True

    def __post_init__(self) -> None:
        _usage_check(
            isinstance(self.degree, int) and 0 <= self.degree <= MAX_DEGREE,
            f"polynomial degree must be an integer from 0 to {MAX_DEGREE}, got {self.degree!r}",
        )

    def terms(self, n_states, n_inputs, x=None, u=None):
        names = coordinate_names(n_states, n_inputs if self.include_inputs else 0)
        first = 0 if self.include_constant else 1
        return [
            Term(_monomial([names[i] for i in combo]))
            for degree in range(first, self.degree + 1)
            for combo in combinations_with_replacement(range(len(names)), degree)
        ]


def _monomial(factors: list[str]) -> str:
    """["x0", "x0", "x1"] -> "x0**2*x1"; [] -> "1"."""
    parts = []
    for name, group in groupby(factors):
        power = len(list(group))
        parts.append(name if power == 1 else f"{name}**{power}")
    return "*".join(parts) or "1"


@dataclass(frozen=True)
class TrigLibrary(Library):
    """sin(k*v), cos(k*v) per frequency k and coordinate v (pysindy's Fourier order).

    With ``of_differences`` also sin(k*(x_i - x_j)), cos(...) for states i < j (coupled phase
    oscillators, Kuramoto models).
    """

    frequencies: tuple[float, ...] = (1,)
    of_differences: bool = False
    include_inputs: bool = True

    def __post_init__(self) -> None:
        frequencies = tuple(self.frequencies)
        _usage_check(
            bool(frequencies) and all(np.isfinite(k) and k > 0 for k in frequencies),
            f"trig frequencies must be positive numbers, got {frequencies!r}",
        )
        object.__setattr__(self, "frequencies", frequencies)

    def terms(self, n_states, n_inputs, x=None, u=None):
        names = coordinate_names(n_states, n_inputs if self.include_inputs else 0)
        arguments = [_scaled(k, v) for k in self.frequencies for v in names]
        if self.of_differences:
            arguments += [
                f"{_scaled(k, f'x{i}')} - {_scaled(k, f'x{j}')}"
                for k in self.frequencies
                for i, j in combinations(range(n_states), 2)
            ]
        return [Term(f"{f}({a})", kind="trig") for a in arguments for f in ("sin", "cos")]


def _scaled(k: float, name: str) -> str:
    return name if k == 1 else f"{k:g}*{name}"


@dataclass(frozen=True)
class RationalLibrary(Library):
    """Saturating shapes: activation v/(c + v) ("michaelis_menten") and v**n/(c**n + v**n)
    ("hill", n in ``hill_exponents``); repression c**n/(c**n + v**n) ("repression", n = 1 and
    ``hill_exponents``).

    The half-saturation constant c is estimated, not given: each shape is emitted once per value
    of a grid of ``n_constants`` initial c values (quantiles 1/(k+1)..k/(k+1) of the coordinate's
    data, 3 significant digits, positive), each with its own constant symbol, for refinement to
    move. Only coordinates whose data are all >= 0 (concentrations, populations) get terms;
    without data every coordinate does, with the grid 2**linspace(-1, 1, k) (0.5, 1, 2 for k=3).
    With ``families`` all shapes of one coordinate form one family ("saturating:v", see
    ``Term.family``), the activation and repression of one exponent sharing their constant (they
    sum to 1): the pipeline keeps one exponent per equation, at its best c, within ``bounds``.
    """

    kinds: tuple[str, ...] = ("michaelis_menten", "hill")
    hill_exponents: tuple[int, ...] = (2,)
    n_constants: int = 3
    include_inputs: bool = True
    families: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "kinds", tuple(self.kinds))
        object.__setattr__(self, "hill_exponents", tuple(self.hill_exponents))
        unknown = set(self.kinds) - set(RATIONAL_KINDS)
        _usage_check(not unknown, f"unknown rational kinds {sorted(unknown)}; "
                                  f"use {', '.join(RATIONAL_KINDS)}")
        _usage_check(
            all(isinstance(e, int) and 1 <= e <= MAX_DEGREE for e in self.hill_exponents),
            f"Hill exponents must be integers from 1 to {MAX_DEGREE}",
        )
        _usage_check(1 <= self.n_constants <= 20, "n_constants must be from 1 to 20")

    def _shapes(self) -> list[tuple[int, list[str]]]:
        """(Hill exponent, format strings with {v}, {c}) of the emitted shapes, in groups that
        share their constant: with families, activation and repression of one exponent; else
        one each."""
        activation, repression = [], []
        exponents = [1, *(e for e in self.hill_exponents if e > 1)]
        for n in exponents:
            power = "" if n == 1 else f"**{n}"
            wanted = "michaelis_menten" if n == 1 else "hill"
            activation.append(f"{{v}}{power}/({{c}}{power} + {{v}}{power})" if wanted in self.kinds else None)
            repression.append(f"{{c}}{power}/({{c}}{power} + {{v}}{power})" if "repression" in self.kinds else None)
        if self.families:
            groups = [(n, [s for s in pair if s]) for n, *pair in zip(exponents, activation, repression, strict=True)]
        else:
            groups = [(n, [s]) for n, s in [*zip(exponents, activation), *zip(exponents, repression)] if s]
        return [(n, group) for n, group in groups if group]

    def terms(self, n_states, n_inputs, x=None, u=None):
        grids = [
            (name, grid, _identifiable_range(values) if self.families else None)
            for name, values in _coordinate_data(n_states, n_inputs, x, u, self.include_inputs)
            if (grid := _constant_grid(values, self.n_constants))
        ]
        out: list[Term] = []
        n_symbols = 0
        for exponent, group in self._shapes():
            for name, grid, limits in grids:
                for value in grid:
                    symbol = f"c{n_symbols}"
                    n_symbols += 1
                    family = f"saturating:{name}" if self.families else ""
                    bounds = ((symbol, *limits),) if limits else ()
                    out += [Term(shape.format(v=name, c=symbol), ((symbol, value),), "rational", family,
                                 bounds, exponent) for shape in group]
        return out


def _identifiable_range(values: np.ndarray | None) -> tuple[float, float] | None:
    """Where a half-saturation constant of a coordinate can be told from the data: within a
    factor 2 of its 1-99 % quantile range. Far below, v**n/(c**n + v**n) is ~1 (a constant);
    far above, ~(v/c)**n (a monomial), and c only scales the coefficient."""
    if values is None or values.size == 0:
        return None
    low, high = np.quantile(values, [0.01, 0.99])
    positive = values[values > 0]
    if high <= 0 or positive.size == 0:
        return None
    low = max(low, positive.min())
    return float(low / 2), float(2 * high)


def _constant_grid(values: np.ndarray | None, count: int) -> list[float]:
    """Initial half-saturation constants for one coordinate; [] when its data go below 0."""
    if values is None:
        return [float(c) for c in 2.0 ** np.linspace(-1, 1, count)] if count > 1 else [1.0]
    if values.size == 0 or values.min() < 0 or values.max() <= 0:
        return []
    levels = np.arange(1, count + 1) / (count + 1)
    grid = np.quantile(values, levels)
    # Mostly-zero data give zero quantiles; fall back to fractions of the maximum.
    grid = np.where(grid > 1e-6 * values.max(), grid, levels * values.max())
    rounded = [float(f"{c:.3g}") for c in grid]
    return list(dict.fromkeys(rounded))


@dataclass(frozen=True)
class ExpLogLibrary(Library):
    """exp(v) where numerically safe, log(v) where v > 0 over the data (all exp terms first).

    exp(v) needs max|v| < ``max_abs`` (no overflow) and exp(max v - median v) <= ``max_ratio``
    (else a few samples dominate the column and its coefficient is meaningless). Without data both
    are emitted for every coordinate: the pipeline drops columns that evaluate to NaN/inf.
    ``times_argument``: v*exp(v) and v*log(v) instead (Gompertz growth r v log(K/v), Ricker-type
    terms), without the cross products u*log(v) of a full poly1*explog, whose many columns fit
    anything smooth.
    """

    include_inputs: bool = True
    max_abs: float = 20.0
    max_ratio: float = 1e6
    times_argument: bool = False

    def terms(self, n_states, n_inputs, x=None, u=None):
        data = _coordinate_data(n_states, n_inputs, x, u, self.include_inputs)
        exp = [name for name, v in data if self._exp_safe(v)]
        log = [name for name, v in data if v is None or _positive(v)]
        if self.times_argument:
            return [Term(f"{n}*exp({n})", kind="product") for n in exp] + [
                Term(f"{n}*log({n})", kind="product") for n in log
            ]
        return [Term(f"exp({n})", kind="exp") for n in exp] + [Term(f"log({n})", kind="log") for n in log]

    def _exp_safe(self, values: np.ndarray | None) -> bool:
        if values is None:
            return True
        return (
            values.size > 0
            and np.abs(values).max() < self.max_abs
            and values.max() - np.median(values) <= np.log(self.max_ratio)
        )


def _positive(values: np.ndarray) -> bool:
    return values.size > 0 and values.min() > 0


def _coordinate_data(
    n_states: int, n_inputs: int, x, u, include_inputs: bool
) -> list[tuple[str, np.ndarray | None]]:
    """(coordinate name, its finite samples or None when no data were given) per coordinate."""
    m = n_inputs if include_inputs else 0
    columns: list[np.ndarray | None] = []
    for data, k in ((x, n_states), (u, m)):
        if data is None:
            columns += [None] * k
            continue
        data = np.asarray(data, dtype=float).reshape(len(data), -1)
        columns += [data[np.isfinite(data[:, i]), i] for i in range(k)]
    return list(zip(coordinate_names(n_states, m), columns, strict=True))


@dataclass(frozen=True)
class CustomLibrary(Library):
    """Fixed expressions in coordinates (e.g. from ``user_terms.parse_user_terms``)."""

    exprs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "exprs", tuple(self.exprs))

    def terms(self, n_states, n_inputs, x=None, u=None):
        for expr in self.exprs:  # fails early if a term names a coordinate these data lack
            parse_coordinate_expression(expr, n_states, n_inputs, error=UsageError)
        return [Term(expr, kind="custom") for expr in self.exprs]


@dataclass(frozen=True)
class SumLibrary(Library):
    """The terms of ``parts`` in order, duplicates removed (made by ``a + b``)."""

    parts: tuple[Library, ...]

    def terms(self, n_states, n_inputs, x=None, u=None):
        listed = [
            t.renamed(_namespace(t, k))
            for k, part in enumerate(self.parts)
            for t in part.terms(n_states, n_inputs, x, u)
        ]
        return _compacted(_deduplicated(listed, n_states, n_inputs))


@dataclass(frozen=True)
class ProductLibrary(Library):
    """Every product a*b of a left and a right term, left-major (made by ``a * b``)."""

    left: Library
    right: Library

    def terms(self, n_states, n_inputs, x=None, u=None):
        # Each product has its own constants (x0*v/(c + v) and x1*v/(c + v) may differ), but
        # constants shared inside one factor stay shared in its products with the other factor.
        right = self.right.terms(n_states, n_inputs, x, u)
        products = [
            _product(a.renamed(_namespace(a, 2 * j)), b.renamed(_namespace(b, 2 * i + 1)), n_states, n_inputs)
            for i, a in enumerate(self.left.terms(n_states, n_inputs, x, u))
            for j, b in enumerate(right)
        ]
        return _compacted(_deduplicated(products, n_states, n_inputs))


# While combining, constant names of the k-th namespace (a summand; a factor within one product)
# are moved to c{(k + 1) * _NAMESPACE + number}, so that names of different namespaces never
# collide and names shared inside one (one constant in two terms) stay shared; ``_compacted``
# then renames them c0, c1, ...
_NAMESPACE = 1_000_000


def _namespace(term: Term, k: int) -> dict[str, str]:
    return {n: f"c{(k + 1) * _NAMESPACE + int(n[1:])}" for n in term.constant_names}


def _compacted(terms: list[Term]) -> list[Term]:
    """Constants renamed c0, c1, ... in order of first appearance (shared names stay shared)."""
    fresh: dict[str, str] = {}
    for term in terms:
        for name in term.constant_names:
            fresh.setdefault(name, f"c{len(fresh)}")
    return [term.renamed(fresh) for term in terms]


def _product(a: Term, b: Term, n_states: int, n_inputs: int) -> Term:
    if a.expr == "1":
        return b
    if b.expr == "1":
        return a
    product = a.sympy(n_states, n_inputs) * b.sympy(n_states, n_inputs)
    used = {s.name for s in product.free_symbols}
    constants = tuple(c for c in (*a.constants, *b.constants) if c[0] in used)
    # x1 times each member of a family is a family of its own ("x1*saturating:x0").
    family = f"{a.family or a.expr}*{b.family or b.expr}" if a.family or b.family else ""
    bounds = tuple(limits for limits in (*a.bounds, *b.bounds) if limits[0] in used)
    return Term(str(product), constants, "product", family, bounds, max(a.sharpness, b.sharpness))


def _deduplicated(terms: list[Term], n_states: int, n_inputs: int) -> list[Term]:
    """Drop terms equal (as sympy expressions, with equal constants) to an earlier one."""
    seen: set[tuple[str, tuple[float, ...]]] = set()
    kept: list[Term] = []
    for term in terms:
        local = term.renumbered(0)
        key = (str(local.sympy(n_states, n_inputs)), tuple(v for _, v in local.constants))
        if key not in seen:
            seen.add(key)
            kept.append(term)
    return kept


def parse_library_spec(text: str) -> Library:
    """A library from the CLI form: parts joined by "+" (sum) and "*" (product, binds tighter).

    Parts: poly<N> (polynomial of degree N; "poly" is poly2), trig, trigdiff (trig with
    differences x_i - x_j), rational (Michaelis-Menten and Hill-2 activation), saturating
    (activation and repression with Hill exponents 1-4, 6, 8, 10; exponent and constant profiled per
    equation), explog, xexplog (v*exp(v), v*log(v)). E.g. "poly3+trig+rational",
    "poly2*trig", "poly1+poly1*saturating".
    """
    summands = [
        reduce(operator.mul, [_library_part(p.strip().lower(), text) for p in s.split("*")])
        for s in text.split("+")
    ]
    return reduce(operator.add, summands)


def _library_part(part: str, text: str) -> Library:
    if match := re.fullmatch(r"poly(\d*)", part):
        return PolynomialLibrary(degree=int(match.group(1) or 2))
    parts = {
        "trig": TrigLibrary,
        "trigdiff": lambda: TrigLibrary(of_differences=True),
        # One initial constant (the data median) per shape and coordinate: a grid of near-duplicate
        # columns lets best subsets combine them into anything; the pipeline refines the constant.
        "rational": lambda: RationalLibrary(n_constants=1),
        # Activation and repression of every exponent, one family each per coordinate: the
        # pipeline profiles the exponent and the constant per equation (profile.py).
        "saturating": lambda: RationalLibrary(
            kinds=RATIONAL_KINDS, hill_exponents=SATURATING_EXPONENTS, n_constants=1, families=True
        ),
        "explog": ExpLogLibrary,
        "xexplog": lambda: ExpLogLibrary(times_argument=True),
    }
    if part not in parts:
        raise UsageError(
            f"library {text!r}: unknown part {part!r}; use poly<N>, trig, trigdiff, rational, "
            "saturating, explog, xexplog joined by + (sum) or * (product), e.g. 'poly3+trig'"
        )
    return parts[part]()


SPEC_FORMAT = "dynid.symbolic.termset/1"


@dataclass
class TermSet:
    """A fixed, evaluable list of terms for ``n_states`` states and ``n_inputs`` inputs.

    Each term is parsed by the whitelist parser and compiled once with ``sympy.lambdify`` (numpy),
    lazily, on first use. Evaluation is vectorised over samples. Values that are not finite
    (division by zero, overflow, log of a negative) are left as NaN/inf, without warnings: the
    pipeline drops such columns.
    """

    terms: list[Term]
    n_states: int
    n_inputs: int = 0
    _cache: dict[tuple[str, int], sympy.Expr] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.terms = list(self.terms)
        if self.n_states < 1 or self.n_inputs < 0:
            raise ValueError(f"bad dimensions: {self.n_states} states, {self.n_inputs} inputs")
        initial: dict[str, float] = {}
        for term in self.terms:
            if term.kind not in KINDS:
                raise ValueError(f"term {term.expr!r} has unknown kind {term.kind!r}")
            for name, value in term.constants:
                if not CONSTANT_NAME.fullmatch(name) or not np.isfinite(value):
                    raise ValueError(f"term {term.expr!r}: bad constant {name}={value!r}")
                if initial.setdefault(name, float(value)) != float(value):
                    raise ValueError(f"constant {name} has two initial values")
        self._initial = initial

    @classmethod
    def build(cls, library: Library, n_states: int, n_inputs: int = 0, x=None, u=None) -> TermSet:
        """The terms ``library`` lists for these dimensions (and data x (n, d), u (n, m))."""
        return cls(library.terms(n_states, n_inputs, x, u), n_states, n_inputs)

    @property
    def names(self) -> list[str]:
        return [t.expr for t in self.terms]

    @property
    def constants(self) -> dict[str, float]:
        """Initial values of all constant symbols."""
        return dict(self._initial)

    def __len__(self) -> int:
        return len(self.terms)

    def symbolic(self, index: int) -> sympy.Expr:
        """Term ``index`` as a sympy expression (cached)."""
        key = ("sympy", index)
        if key not in self._cache:
            term = self.terms[index]
            self._cache[key] = parse_coordinate_expression(
                term.expr, self.n_states, self.n_inputs, term.constant_names
            )
        return self._cache[key]

    def expression(self, index: int, constants: dict[str, float] | None = None) -> str:
        """Term ``index`` with its constants replaced by their values, e.g. "x0/(x0 + 0.7)"."""
        import sympy

        values = {**self._initial, **(constants or {})}
        names = self.terms[index].constant_names
        substitution = {sympy.Symbol(c): sympy.Float(values[c]) for c in names}
        return str(self.symbolic(index).subs(substitution))

    def evaluate(self, x, u=None, constants=None, columns=None) -> np.ndarray:
        """Theta (n, p): term k evaluated on x (n, d) [or (n,) when d = 1] and u (n, m).

        constants: values overriding the initial ones (extra names are ignored); columns: a subset
        of term indices (then the result is (n, len(columns)), in that order).
        """
        return self._evaluate(x, u, constants, columns, None)

    def gradient_wrt_constants(
        self, x, u=None, constants=None, columns=None
    ) -> dict[str, np.ndarray]:
        """{constant name: d Theta[:, columns] / d constant, (n, len(columns))} for every constant
        that appears in the chosen columns (zero columns where a term does not contain it)."""
        indices = range(len(self.terms)) if columns is None else list(columns)
        names = dict.fromkeys(c for i in indices for c in self.terms[i].constant_names)
        return {c: self._evaluate(x, u, constants, indices, c) for c in names}

    def _evaluate(self, x, u, constants, columns, wrt: str | None) -> np.ndarray:
        n, values = self._namespace(x, u, constants)
        indices = range(len(self.terms)) if columns is None else list(columns)
        out = np.zeros((n, len(indices)))
        with np.errstate(all="ignore"):
            for j, i in enumerate(indices):
                if wrt is not None and wrt not in self.terms[i].constant_names:
                    continue
                arguments, function = self._compiled(i, wrt)
                out[:, j] = function(*(values[a] for a in arguments))
        return out

    def _compiled(self, index: int, wrt: str | None) -> tuple[list[str], Callable[..., np.ndarray]]:
        """(argument names, numpy function) of term ``index`` or of its derivative by ``wrt``.

        Compiled functions are shared by every TermSet through ``cache.CACHE``: the libraries of
        a sweep repeat the same terms, and lambdify costs milliseconds per term.
        """
        term = self.terms[index]
        key = (term.expr, tuple(term.constant_names), self.n_states, self.n_inputs, wrt)

        def compile_term() -> tuple[list[str], Callable[..., np.ndarray]]:
            import sympy

            expression = self.symbolic(index)
            if wrt is not None:
                expression = sympy.diff(expression, sympy.Symbol(wrt))
            symbols = sorted(expression.free_symbols, key=lambda s: s.name)
            function = sympy.lambdify(symbols, expression, modules="numpy")
            return [s.name for s in symbols], function

        return CACHE.get("term", key, compile_term)

    def _namespace(self, x, u, constants) -> tuple[int, dict[str, np.ndarray | float]]:
        """(n, {coordinate name: (n,) samples, constant name: value})."""
        x = np.asarray(x, dtype=float)
        x = x[:, None] if x.ndim == 1 else x
        if x.ndim != 2 or x.shape[1] != self.n_states:
            raise ValueError(f"x has shape {x.shape}, expected (n, {self.n_states})")
        columns = list(np.ascontiguousarray(x.T))
        if self.n_inputs:
            u = None if u is None else np.asarray(u, dtype=float).reshape(len(x), -1)
            if u is None or u.shape[1] != self.n_inputs:
                raise ValueError(f"u must have shape ({len(x)}, {self.n_inputs})")
            columns += list(np.ascontiguousarray(u.T))
        names = coordinate_names(self.n_states, self.n_inputs)
        samples = dict(zip(names, columns, strict=True))
        return len(x), {**samples, **self._initial, **(constants or {})}

    def to_spec(self) -> dict[str, Any]:
        """A JSON-safe description that ``from_spec`` turns back into an equal TermSet."""
        return {
            "format": SPEC_FORMAT,
            "n_states": self.n_states,
            "n_inputs": self.n_inputs,
            "terms": [_term_spec(t) for t in self.terms],
        }

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> TermSet:
        """The TermSet ``to_spec`` described; every expression goes through the whitelist parser,
        so a tampered file cannot run code. Raises DataError for a malformed spec."""
        try:
            if spec["format"] != SPEC_FORMAT:
                raise ValueError(f"unknown format {spec['format']!r}")
            n_states, n_inputs = int(spec["n_states"]), int(spec["n_inputs"])
            terms = [
                Term(
                    str(t["expr"]),
                    tuple((str(n), float(v)) for n, v in t["constants"].items()),
                    str(t["kind"]),
                    str(t.get("family", "")),
                    tuple((str(n), float(lo), float(hi)) for n, (lo, hi) in t.get("bounds", {}).items()),
                    int(t.get("sharpness", 1)),
                )
                for t in spec["terms"]
            ]
            termset = cls(terms, n_states, n_inputs)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise DataError(f"bad term-set description: {exc}") from None
        for index in range(len(terms)):
            termset.symbolic(index)  # parse all now: a bad expression fails here, as DataError
        return termset


def _term_spec(term: Term) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "expr": term.expr,
        "kind": term.kind,
        "constants": {n: float(v) for n, v in term.constants},
    }
    if term.family:  # search hints, only where a library set them
        spec["family"] = term.family
    if term.bounds:
        spec["bounds"] = {n: [float(lo), float(hi)] for n, lo, hi in term.bounds}
    if term.sharpness != 1:
        spec["sharpness"] = term.sharpness
    return spec
