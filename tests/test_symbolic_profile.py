"""Saturating shapes with unknown exponent and constant: the per-equation profile, the library
families behind it, and end-to-end recovery of Hill, repression and Gompertz systems."""

import re

import numpy as np
import pytest
import sympy
from scipy.integrate import solve_ivp

import dynid
from dynid.symbolic.library import TermSet, parse_library_spec
from dynid.symbolic.profile import FamilyProfile
from dynid.symbolic.refine import refine_constants
from test_symbolic_identify import _equations

RNG = np.random.default_rng(3)


def _profile(x, y, spec="poly1+saturating"):
    termset = TermSet.build(parse_library_spec(spec), x.shape[1], 0, x)
    theta = termset.evaluate(x)
    train = np.ones(len(x), dtype=bool)
    evaluate = lambda terms, columns, constants: terms.evaluate(x, None, constants, columns)  # noqa: E731
    profile = FamilyProfile(termset, theta, np.all(np.isfinite(theta), axis=0), train, evaluate)
    chosen, _, positions = profile.choose(y)
    return [sympy.sympify(chosen.expression(j)) for j in positions]


def _denominator_constant(expression, symbol):
    """K in v**n/(v**n + K) or K/(v**n + K), and n."""
    denominator = sympy.Poly(sympy.denom(sympy.together(expression)), symbol)
    return float(denominator.coeffs()[-1]), denominator.degree()


@pytest.mark.parametrize(("shape", "n", "c"), [("activation", 3, 0.8), ("repression", 8, 1.1), ("activation", 1, 0.35)])
def test_profile_finds_exponent_and_constant(shape, n, c):
    x = RNG.uniform(0.1, 2.5, size=(600, 1))
    hill = x[:, 0] ** n / (c**n + x[:, 0] ** n)
    y = 2.0 * (hill if shape == "activation" else 1.0 - hill) - 0.3 * x[:, 0]
    chosen = _profile(x, y)
    # one activation and one repression sharing the constant (they sum to 1)
    assert len(chosen) == 2
    constants = {_denominator_constant(e, sympy.Symbol("x0")) for e in chosen}
    assert len(constants) == 1
    (k, degree), = constants
    assert degree == n
    assert k == pytest.approx(c**n, rel=1e-4)


def test_profile_backfits_terms_of_two_coordinates():
    x = RNG.uniform(0.05, 3.0, size=(800, 2))
    y = 1.5 * x[:, 0] / (0.5 + x[:, 0]) - 1.2 * x[:, 1] ** 2 / (1.0 + x[:, 1] ** 2)
    chosen = _profile(x, y)
    found = {}
    for expression in chosen:
        (symbol,) = expression.free_symbols
        found[symbol.name] = _denominator_constant(expression, symbol)
    # close enough for the joint refinement that follows in the pipeline
    assert found["x0"][1] == 1 and found["x0"][0] == pytest.approx(0.5, rel=0.03)
    assert found["x1"][1] == 2 and found["x1"][0] == pytest.approx(1.0, rel=0.03)


def test_saturating_library_pairs_share_constants_and_carry_bounds():
    x = np.column_stack([np.linspace(0.2, 4.0, 100), np.linspace(1.0, 2.0, 100)])
    terms = parse_library_spec("saturating").terms(2, 0, x)
    assert len(terms) == 2 * 2 * 7  # activation + repression, 2 coordinates, exponents 1-4, 6, 8, 10
    assert terms[0].expr == "x0/(c0 + x0)" and terms[1].expr == "c0/(c0 + x0)"
    assert terms[0].family == terms[1].family == "saturating:x0"
    low, high = np.quantile(x[:, 0], [0.01, 0.99])
    assert terms[0].bounds[0][1:] == pytest.approx((low / 2, 2 * high))  # a factor 2 beyond the data
    assert [t.sharpness for t in terms[:4]] == [1, 1, 1, 1] and terms[4].sharpness == 2
    # products: each product has its own constant, the pair inside a product shares one
    products = parse_library_spec("poly1*saturating").terms(2, 0, x)
    by_name = {t.expr: t.constant_names for t in products}
    x0_times = by_name["x0**2/(c14 + x0)"]
    assert by_name["c14*x0/(c14 + x0)"] == x0_times == ["c14"]
    (x1_times,) = [names for expr, names in by_name.items() if re.fullmatch(r"x0\*x1/\(c\d+ \+ x0\)", expr)]
    assert x1_times != x0_times


def test_refinement_stays_within_a_terms_bounds():
    x = RNG.uniform(0.5, 1.5, size=(300, 1))
    y = x[:, 0] / (10.0 + x[:, 0])  # c = 10 lies beyond twice the data's range
    termset = TermSet.build(parse_library_spec("saturating"), 1, 0, x)
    support = np.array([t.expr == "x0/(c0 + x0)" for t in termset.terms])
    constants, _ = refine_constants(termset, support, support.astype(float), x, None, y)
    assert constants["c0"] <= termset.terms[0].bounds[0][2] * (1 + 1e-12)


def _simulate(rhs, x0, n, span):
    t = np.linspace(0.0, span, n)
    solution = solve_ivp(rhs, (0.0, span), x0, t_eval=t, method="DOP853", rtol=1e-11, atol=1e-12)
    return t, solution.y.T


def _fit(t, x, names):
    data = dynid.Dataset.from_arrays(x, t=t, variables=names)
    return _equations(dynid.fit(data, "symbolic", ["ensemble=0"]).model)


def test_goodwin_repression_with_hill_exponent_10():
    def goodwin(t, v):
        return [1 / (1 + v[2] ** 10) - v[0] / 5, v[0] - v[1] / 5, v[1] - v[2] / 5]

    t, x = _simulate(goodwin, [0.157, 0.363, 1.362], 1500, 60.0)
    found = _fit(t, x, ["a", "b", "c"])
    assert set(found["b"]) == {"a", "b"} and set(found["c"]) == {"b", "c"}
    terms = found["a"]
    assert len(terms) == 2 and terms["a"] == pytest.approx(-0.2, rel=1e-3)
    (hill,) = [sympy.sympify(k) for k in terms if k != "a"]
    k, degree = _denominator_constant(hill, sympy.Symbol("c"))
    assert degree == 10 and sympy.numer(sympy.together(hill)).is_number  # repression, not 1 - activation
    assert terms[str(hill)] * float(sympy.numer(sympy.together(hill))) / k == pytest.approx(1.0, rel=1e-2)


def test_hill_activation_and_gompertz_are_found_without_a_library_hint():
    t, x = _simulate(lambda t, v: [v[0] ** 2 / (1 + v[0] ** 2) - 0.4 * v[0]], [0.6], 300, 30.0)
    terms = _fit(t, x, ["p"])["p"]
    assert terms.pop("p") == pytest.approx(-0.4, rel=1e-4)
    ((hill, coefficient),) = terms.items()
    k, degree = _denominator_constant(sympy.sympify(hill), sympy.Symbol("p"))
    assert degree == 2 and k == pytest.approx(1.0, rel=1e-3) and coefficient == pytest.approx(1.0, rel=1e-3)

    t, x = _simulate(lambda t, v: [0.6 * v[0] * (np.log(10) - np.log(v[0]))], [0.5], 300, 10.0)
    terms = _fit(t, x, ["n"])["n"]
    assert set(terms) == {"n", "n*log(n)"}
    assert terms["n*log(n)"] == pytest.approx(-0.6, rel=1e-3)
    assert terms["n"] == pytest.approx(0.6 * np.log(10), rel=1e-3)


def test_constant_plus_activation_is_written_that_way():
    # 0.6 - 1.5 s/(0.5 + s) is also -0.9 + 0.75 * 0.5/(0.5 + s): keep the usual form
    t, x = _simulate(lambda t, v: [0.6 - 1.5 * v[0] / (0.5 + v[0])], [3.0], 400, 20.0)
    terms = _fit(t, x, ["s"])["s"]
    assert terms.pop("1") == pytest.approx(0.6, rel=1e-4)
    ((activation, coefficient),) = terms.items()
    activation = sympy.sympify(activation)
    assert sympy.numer(sympy.together(activation)) == sympy.Symbol("s")
    assert _denominator_constant(activation, sympy.Symbol("s")) == (pytest.approx(0.5, rel=1e-4), 1)
    assert coefficient == pytest.approx(-1.5, rel=1e-4)
