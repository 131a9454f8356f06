"""Term libraries, term sets, user terms and constant refinement for ``dynid symbolic``."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import numpy as np
import pytest
import sympy

from dynid.errors import DataError, UsageError
from dynid.symbolic.library import (
    CustomLibrary,
    ExpLogLibrary,
    PolynomialLibrary,
    ProductLibrary,
    RationalLibrary,
    SumLibrary,
    Term,
    TermSet,
    TrigLibrary,
    parse_library_spec,
)
from dynid.symbolic.refine import refine_constants
from dynid.symbolic.user_terms import parse_user_terms

RNG = np.random.default_rng(0)


def names(library, d, m=0, x=None, u=None):
    return [t.expr for t in library.terms(d, m, x, u)]


def test_polynomial_names_and_order():
    got = names(PolynomialLibrary(degree=3), 2, 1)
    assert got[:10] == ["1", "x0", "x1", "u0", "x0**2", "x0*x1", "x0*u0", "x1**2", "x1*u0", "u0**2"]
    assert got[10:13] == ["x0**3", "x0**2*x1", "x0**2*u0"]
    assert len(got) == 20  # C(3 + 3, 3)
    assert len(names(PolynomialLibrary(3, include_constant=False), 2, 1)) == 19
    assert len(names(PolynomialLibrary(3, include_inputs=False), 2, 1)) == 10
    with pytest.raises(UsageError):
        PolynomialLibrary(degree=-1)


def test_trig_names_and_differences():
    assert names(TrigLibrary(frequencies=(1, 2)), 2) == [
        "sin(x0)", "cos(x0)", "sin(x1)", "cos(x1)",
        "sin(2*x0)", "cos(2*x0)", "sin(2*x1)", "cos(2*x1)",
    ]
    got = names(TrigLibrary(of_differences=True), 3, 1)
    assert got[-6:] == [
        "sin(x0 - x1)", "cos(x0 - x1)", "sin(x0 - x2)", "cos(x0 - x2)",
        "sin(x1 - x2)", "cos(x1 - x2)",
    ]
    assert "sin(u0)" in got and "sin(x0 - u0)" not in got  # differences are between states only
    x = RNG.normal(size=(50, 3))
    theta = TermSet.build(TrigLibrary(of_differences=True), 3, 0).evaluate(x)
    np.testing.assert_allclose(theta[:, -1], np.cos(x[:, 1] - x[:, 2]))


def test_every_generated_name_parses_back_to_itself():
    x = RNG.uniform(0.1, 2.0, size=(100, 2))
    library = parse_library_spec("poly2*trig+trigdiff+rational+explog")
    for term in library.terms(2, 0, x):
        expression = term.sympy(2, 0)
        assert term.sympy(2, 0) == sympy.sympify(str(expression))
        assert expression.free_symbols >= {sympy.Symbol(c) for c in term.constant_names}


def test_evaluation_matches_numpy():
    x = RNG.uniform(0.5, 2.0, size=(40, 2))
    u = RNG.normal(size=(40, 1))
    termset = TermSet.build(PolynomialLibrary(2) + TrigLibrary() + ExpLogLibrary(), 2, 1, x, u)
    theta = termset.evaluate(x, u)
    a, b, c = x[:, 0], x[:, 1], u[:, 0]
    expected = {
        "1": np.ones_like(a), "x0*x1": a * b, "x1*u0": b * c, "u0**2": c * c,
        "sin(x1)": np.sin(b), "cos(u0)": np.cos(c), "exp(x0)": np.exp(a), "log(x1)": np.log(b),
    }
    for name, column in expected.items():
        np.testing.assert_allclose(theta[:, termset.names.index(name)], column, rtol=1e-12)
    assert "log(u0)" not in termset.names  # u0 takes negative values
    assert theta.shape == (40, len(termset))


def test_sum_removes_duplicates_and_renumbers_constants():
    assert names(PolynomialLibrary(2) + PolynomialLibrary(3), 2) == names(PolynomialLibrary(3), 2)
    x = RNG.uniform(0, 3, size=(200, 1))
    library = RationalLibrary(kinds=("hill",)) + RationalLibrary() + CustomLibrary(["x0/(x0 + 1)"])
    terms = library.terms(1, 0, x)
    assert len(terms) == 6 + 1  # the second library's Hill terms repeat the first's
    constant_names = [c for t in terms for c in t.constant_names]
    assert constant_names == [f"c{k}" for k in range(6)]
    assert terms[3].expr == "x0/(c3 + x0)"


def test_products():
    got = names(PolynomialLibrary(1) * TrigLibrary(), 2)
    assert got == [
        "sin(x0)", "cos(x0)", "sin(x1)", "cos(x1)",
        "x0*sin(x0)", "x0*cos(x0)", "x0*sin(x1)", "x0*cos(x1)",
        "x1*sin(x0)", "x1*cos(x0)", "x1*sin(x1)", "x1*cos(x1)",
    ]
    x = RNG.uniform(0, 2, size=(100, 2))
    product = ProductLibrary(RationalLibrary(kinds=("michaelis_menten",), n_constants=2),
                             PolynomialLibrary(1, include_constant=False))
    terms = product.terms(2, 0, x)
    assert all(t.kind == "product" for t in terms)
    assert [c for t in terms for c in t.constant_names] == [f"c{k}" for k in range(len(terms))]
    termset = TermSet(terms, 2)
    value = terms[0].constants[0][1]
    np.testing.assert_allclose(termset.evaluate(x)[:, 0], x[:, 0] ** 2 / (value + x[:, 0]))


def test_rational_grid_from_data():
    x = np.column_stack([np.linspace(0, 4, 401), np.linspace(-1, 1, 401)])
    terms = RationalLibrary().terms(2, 0, x)
    assert {t.expr.count("x1") for t in terms} == {0}  # x1 goes negative: no rational terms
    values = [t.constants[0][1] for t in terms if t.kind == "rational"][:3]
    assert values == [1.0, 2.0, 3.0]  # quantiles 0.25, 0.5, 0.75 of a uniform grid on [0, 4]
    assert [t.expr for t in terms[3:6]] == [f"x0**2/(c{k}**2 + x0**2)" for k in (3, 4, 5)]
    sparse = np.zeros((100, 1))
    sparse[-5:] = 2.0  # mostly zero: quantiles are 0, fall back to fractions of the maximum
    assert [t.constants[0][1] for t in RationalLibrary(kinds=("michaelis_menten",)).terms(
        1, 0, sparse)] == [0.5, 1.0, 1.5]
    assert [t.constants[0][1] for t in RationalLibrary(n_constants=3).terms(1, 0)][:3] == [
        0.5, 1.0, 2.0]
    with pytest.raises(UsageError):
        RationalLibrary(kinds=("logistic",))


def test_explog_range_guards():
    t = np.linspace(0, 1, 200)
    x = np.column_stack([30 * t + 1, 3 * t + 0.1, -t, 15 * t**8])
    got = names(ExpLogLibrary(), 4, 0, x)
    # x0 overflows the guard, x3 is dominated by a few samples, x2 is not positive
    assert got == ["exp(x1)", "exp(x2)", "log(x0)", "log(x1)"]
    assert names(ExpLogLibrary(), 1) == ["exp(x0)", "log(x0)"]  # no data: no guard


def test_non_finite_values_are_left_for_the_pipeline():
    termset = TermSet([Term("log(x0)", kind="log"), Term("1/x0", kind="custom")], 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        theta = termset.evaluate(np.array([-1.0, 0.0, 1.0]))
    assert np.isnan(theta[0, 0]) and np.isinf(theta[1, 1]) and theta[2, 0] == 0.0


def test_spec_round_trip_gives_identical_evaluation():
    x = RNG.uniform(0.1, 3, size=(300, 2))
    u = RNG.uniform(0.1, 3, size=(300, 1))
    library = parse_library_spec("poly2+trigdiff+rational+explog") + CustomLibrary(["sin(x0)*u0"])
    termset = TermSet.build(library, 2, 1, x, u)
    spec = json.loads(json.dumps(termset.to_spec()))
    rebuilt = TermSet.from_spec(spec)
    assert rebuilt == termset and rebuilt.constants == termset.constants
    np.testing.assert_array_equal(rebuilt.evaluate(x, u), termset.evaluate(x, u))
    shifted = {"c0": 0.3}
    np.testing.assert_array_equal(rebuilt.evaluate(x, u, shifted), termset.evaluate(x, u, shifted))


@pytest.mark.parametrize(
    "expr",
    ["__import__('os').system('echo hi')", "x0.real", "open('f')", "x0 + y", "(lambda: 1)()"],
)
def test_from_spec_refuses_code(expr):
    spec = TermSet([Term("x0")], 1).to_spec()
    spec["terms"][0]["expr"] = expr
    with pytest.raises(DataError):
        TermSet.from_spec(spec)


def test_spec_errors_are_data_errors():
    with pytest.raises(DataError):
        TermSet.from_spec({"format": "nope"})
    with pytest.raises(DataError):
        TermSet.from_spec({**TermSet([Term("x0")], 1).to_spec(), "terms": [{"expr": "x0"}]})


def test_gradient_wrt_constants_matches_finite_differences():
    x = RNG.uniform(0, 2, size=(50, 1))
    termset = TermSet.build(RationalLibrary(n_constants=1), 1, 0, x)
    gradient = termset.gradient_wrt_constants(x)
    for name, value in termset.constants.items():
        h = 1e-6 * value
        numeric = (termset.evaluate(x, constants={name: value + h})
                   - termset.evaluate(x, constants={name: value - h})) / (2 * h)
        np.testing.assert_allclose(gradient[name], numeric, rtol=1e-5, atol=1e-9)


def test_evaluation_of_a_large_library():
    x = RNG.normal(size=(10_000, 6))
    termset = TermSet.build(PolynomialLibrary(3) + TrigLibrary(), 6, 0)
    assert len(termset) == 84 + 12
    theta = termset.evaluate(x)
    assert theta.shape == (10_000, 96)
    np.testing.assert_array_equal(theta[:10], termset.evaluate(x[:10]))


def test_parse_library_spec():
    assert parse_library_spec("poly3") == PolynomialLibrary(3)
    assert parse_library_spec("poly3 + trig + rational") == SumLibrary(
        (PolynomialLibrary(3), TrigLibrary(), RationalLibrary(n_constants=1)))
    assert parse_library_spec("poly2*trig") == ProductLibrary(PolynomialLibrary(2), TrigLibrary())
    assert parse_library_spec("trigdiff+explog").parts == (
        TrigLibrary(of_differences=True), ExpLogLibrary())
    for bad in ["fourier", "poly3+", "poly2**trig", ""]:
        with pytest.raises(UsageError, match="unknown part"):
            parse_library_spec(bad)


def test_user_terms_good():
    assert parse_user_terms("sin(x-y), x/(1+x**2), exp(-u)", ["x", "y"], ["u"]) == [
        "sin(x0 - x1)", "x0/(x0**2 + 1)", "exp(-u0)"]
    # non-identifier column names are written by coordinate; duplicates collapse
    assert parse_user_terms("T*x1,\n x1*T, sqrt(x2)", ["T", "p [Pa]", "q-1"], []) == [
        "x0*x1", "sqrt(x2)"]
    # a data name wins over the coordinate of the same spelling
    assert parse_user_terms("x0", ["x1", "x0"], []) == ["x1"]
    assert parse_user_terms("2*pi*x + tanh(x)**2", ["x"], []) == ["2*pi*x0 + tanh(x0)**2"]


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('echo hi')",
        "x.__class__",
        "lambda: 1",
        "open('f')",
        "().__class__",
        "x.real",
        "getattr(x, 'real')",
        "x[0]",
        "'x'",
        "x if x else 1",
        "9**9**9**9",
        "x**y",
        "foo(x)",
        "sin(x, y)",
        "1 + 2",
        "log(-1)*x",
        "x" + "+x" * 1000,
    ],
)
def test_user_terms_rejected(text):
    with pytest.raises(UsageError, match="--terms"):
        parse_user_terms(text, ["x", "y"], [])


def test_user_terms_messages():
    with pytest.raises(UsageError, match=r"unknown name 'foo' in 'foo\(x\)'; allowed: x, "):
        parse_user_terms("foo(x)", ["x"], [])
    with pytest.raises(UsageError, match=r"'p \[Pa\]' is x1"):
        parse_user_terms("x*p", ["x", "p [Pa]"], [])


def _best_single_term(termset, x, y):
    theta = termset.evaluate(x)
    errors = [np.linalg.lstsq(theta[:, [k]], y, rcond=None)[1][0] for k in range(len(termset))]
    k = int(np.argmin(errors))
    mask = np.zeros(len(termset), dtype=bool)
    mask[k] = True
    coefs = np.zeros(len(termset))
    coefs[k] = np.linalg.lstsq(theta[:, [k]], y, rcond=None)[0][0]
    return k, mask, coefs


@pytest.mark.parametrize(
    ("kind", "shape", "c_true"),
    [
        ("michaelis_menten", lambda x, c: x / (c + x), 0.7),
        ("hill", lambda x, c: x**2 / (c**2 + x**2), 0.9),
    ],
)
def test_refine_recovers_constants(kind, shape, c_true):
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 3, size=(1000, 1))
    y = 2.0 * shape(x[:, 0], c_true) + 0.01 * rng.standard_normal(1000)
    termset = TermSet.build(RationalLibrary(kinds=(kind,)), 1, 0, x)
    k, mask, coefs = _best_single_term(termset, x, y)
    name = termset.terms[k].constant_names[0]
    assert abs(termset.constants[name] - c_true) > 0.02 * c_true  # the grid alone is off
    constants, refined = refine_constants(termset, mask, coefs, x, None, y)
    assert constants[name] == pytest.approx(c_true, rel=0.02)
    assert refined[k] == pytest.approx(2.0, rel=0.02)
    assert np.count_nonzero(refined) == 1
    # the reported term carries the refined constant as a number
    expression = sympy.sympify(termset.expression(k, constants))
    assert expression.free_symbols == {sympy.Symbol("x0")}
    assert float(expression.subs("x0", 1.3)) == pytest.approx(shape(1.3, constants[name]))


def test_refine_with_a_plain_term_and_a_transform():
    rng = np.random.default_rng(2)
    x = rng.uniform(0, 3, size=(800, 1))
    y = 1.5 * x[:, 0] / (0.5 + x[:, 0]) - 0.4 * x[:, 0] + 0.005 * rng.standard_normal(800)
    termset = TermSet.build(PolynomialLibrary(1) + RationalLibrary(kinds=("michaelis_menten",)),
                            1, 0, x)
    mask = np.isin(termset.names, ["x0", "x0/(c0 + x0)"])
    averaging = np.kron(np.eye(80), np.ones((1, 10)) / 10)  # a linear map like weak-form integrals
    constants, coefs = refine_constants(termset, mask, np.zeros(len(termset)), x, None,
                                        averaging @ y, transform=lambda a: averaging @ a)
    assert constants["c0"] == pytest.approx(0.5, rel=0.02)
    np.testing.assert_allclose(coefs[mask], [-0.4, 1.5], rtol=0.02)


def test_refine_without_constants_is_a_no_op():
    x = RNG.normal(size=(100, 1))
    termset = TermSet.build(PolynomialLibrary(2), 1, 0)
    coefs = np.array([0.0, 1.0, 0.5])
    constants, refined = refine_constants(termset, coefs != 0, coefs, x, None, x[:, 0])
    assert constants == {} and np.array_equal(refined, coefs)


def test_modules_do_not_import_sympy_or_scipy_eagerly():
    code = (
        "import sys, dynid.symbolic.library, dynid.symbolic.refine, dynid.symbolic.user_terms;"
        "print(sorted(m for m in ('sympy', 'scipy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
