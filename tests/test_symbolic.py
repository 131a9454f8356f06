"""Equations as JSON, text and LaTeX: symbols, term translation, parseability."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import sympy
from scipy.integrate import solve_ivp

from dynid.data.dataset import Dataset
from dynid.models.sindy import SINDy, SINDyParams
from dynid.symbolic import (
    assign_symbols,
    build_result,
    equations_result,
    feature_expression,
    format_latex,
    format_text,
)

X, Y, Z, U = sympy.symbols("x y z u")
LORENZ_FEATURES = ["1", "x0", "x1", "x2", "x0^2", "x0 x1", "x0 x2", "x1^2", "x1 x2", "x2^2"]
LORENZ_RHS = [-10 * X + 10 * Y, 28 * X - Y - X * Z, sympy.Rational(-8, 3) * Z + X * Y]


def lorenz_coefficients() -> np.ndarray:
    coefficients = np.zeros((3, len(LORENZ_FEATURES)))
    for row, rhs in enumerate(LORENZ_RHS):
        for k, feature in enumerate(LORENZ_FEATURES):
            term = feature_expression(feature, {"x0": "x", "x1": "y", "x2": "z"})
            coefficients[row, k] = float(sympy.Poly(rhs, X, Y, Z).coeff_monomial(term))
    return coefficients


def parse(rhs: str, result: dict) -> sympy.Expr:
    return sympy.sympify(rhs, locals={s: sympy.Symbol(s) for s in result["symbols"]})


@pytest.mark.parametrize(
    ("feature", "expected"),
    [
        ("1", sympy.Integer(1)),
        ("x0", X),
        ("x0 x1", X * Y),
        ("x0^2", X**2),
        ("x0^2 x1", X**2 * Y),
        ("x1 x2^3", Y * Z**3),
        ("x0 u0", X * U),
        ("sin(1 x0)", sympy.sin(X)),
        ("cos(2 x1)", sympy.cos(2 * Y)),
        ("sin(3 u0)", sympy.sin(3 * U)),
    ],
)
def test_feature_expression(feature, expected):
    coordinates = {"x0": "x", "x1": "y", "x2": "z", "u0": "u"}
    assert feature_expression(feature, coordinates) == expected


@pytest.mark.parametrize("feature", ["x0^", "x9", "tan(1 x0)", "x0*x1", ""])
def test_feature_expression_rejects_unknown_names(feature):
    with pytest.raises(ValueError):
        feature_expression(feature, {"x0": "x", "x1": "y"})


def test_assign_symbols_keeps_identifiers_and_renames_the_rest():
    variables, inputs = assign_symbols(["x", "temp (K)", "x-1", "E", "beta", "lambda"], ["u"])
    assert variables == ["x", "x1", "x2", "x3", "x4", "x5"]
    assert inputs == ["u"]
    # A fallback never collides with a name that is kept.
    assert assign_symbols(["x1", "a b"], ["pressure [Pa]"]) == (["x1", "x1_1"], ["u0"])


def test_lorenz_result_parses_back_to_the_equations():
    result = build_result(["x", "y", "z"], [], LORENZ_FEATURES, lorenz_coefficients())
    json.dumps(result)  # plain JSON types only
    assert [eq["lhs"] for eq in result["equations"]] == ["x", "y", "z"]
    assert result["equations"][0]["rhs"] == "-10.0*x + 10.0*y"
    assert result["equations"][0]["terms"] == [
        {"term": "x", "coefficient": -10.0, "feature": "x0"},
        {"term": "y", "coefficient": 10.0, "feature": "x1"},
    ]
    for equation, truth in zip(result["equations"], LORENZ_RHS, strict=True):
        difference = sympy.expand(sympy.sympify(equation["rhs"]) - truth)
        assert all(abs(c) < 1e-14 for c in sympy.Poly(difference, X, Y, Z).coeffs())
    assert result["symbols"] == {"x": "x", "y": "y", "z": "z"}


def test_text_and_latex():
    result = build_result(["x", "y", "z"], [], LORENZ_FEATURES, lorenz_coefficients())
    assert format_text(result).splitlines() == [
        "dx/dt = -10 x + 10 y",
        "dy/dt = 28 x - y - x z",
        "dz/dt = -2.66667 z + x y",
    ]
    latex = format_latex(result)
    assert latex.splitlines()[0] == r"\dot{x} = -10 x + 10 y"
    assert latex.count(r"\dot") == 3


def test_non_identifier_names_get_symbols():
    coefficients = np.array([[0.0, -0.5, 2.0, 0.0, 1.5], [1e-7, 0.0, 0.0, -3.0, 0.0]])
    features = ["1", "x0", "x1 u0", "sin(2 x1)", "x0^2"]
    result = build_result(["temp (K)", "E"], ["valve %"], features, coefficients)
    assert result["symbols"] == {"x0": "temp (K)", "x1": "E", "u0": "valve %"}
    x0, x1, u0 = sympy.symbols("x0 x1 u0")
    expected = [-0.5 * x0 + 2.0 * x1 * u0 + 1.5 * x0**2, 1e-7 - 3.0 * sympy.sin(2 * x1)]
    for equation, truth in zip(result["equations"], expected, strict=True):
        assert sympy.simplify(parse(equation["rhs"], result) - truth) == 0
    text = format_text(result)
    assert "dx0/dt = -0.5 x0 + 2 u0 x1 + 1.5 x0^2" in text
    assert "dx1/dt = 1e-07 - 3 sin(2 x1)" in text
    assert "where x0 = temp (K)" in text and "where u0 = valve %" in text
    latex = format_latex(result)
    assert r"\dot{x_{0}} = " in latex and r"10^{-7}" in latex and "% u0 = valve %" in latex


def test_discrete_and_empty_equations():
    result = build_result(["p", "q"], [], ["1", "x0"], np.array([[0.0, 0.5], [0.0, 0.0]]),
                          discrete=True)
    assert result["equations"][1] == {"lhs": "q", "rhs": "0", "terms": []}
    assert format_text(result).splitlines() == ["p[k+1] = 0.5 p", "q[k+1] = 0"]
    assert format_latex(result).splitlines()[0] == "{p}_{k+1} = 0.5 p"


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="shape"):
        build_result(["x"], [], ["1", "x0"], np.zeros((2, 2)))


def test_equations_result_of_a_fitted_model():
    # dx/dt = -0.5 x with an input: x' = -0.5 x + 2 u.
    t = np.arange(2000) * 0.01
    u = np.sin(t)
    x = solve_ivp(lambda s, v: [-0.5 * v[0] + 2 * np.sin(s)], (0, t[-1]), [1.0],
                  method="DOP853", t_eval=t, rtol=1e-10, atol=1e-12).y[0]
    model = SINDy(SINDyParams(degree=1)).fit(
        Dataset.from_arrays(x, t=t, u=u, variables=["level (m)"], inputs=["flow"])
    )
    result = equations_result(model)
    assert result["symbols"] == {"x0": "level (m)", "flow": "flow"}
    assert result["metrics"]["n_terms"] == 2
    rhs = parse(result["equations"][0]["rhs"], result)
    x0, flow = sympy.symbols("x0 flow")
    assert abs(float(rhs.coeff(x0)) + 0.5) < 5e-3 and abs(float(rhs.coeff(flow)) - 2) < 5e-3
    assert model.equations() == [("x0", result["equations"][0]["rhs"])]


def test_importing_symbolic_does_not_import_sympy():
    code = "import sys, dynid.symbolic; print('sympy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
