"""Beyond the fixed libraries: terms generated from each equation's chosen terms
(``symbolic.generated``), and close libraries settled by trajectories (``symbolic.rivals``)."""

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import dynid
from dynid.symbolic.generated import candidate_terms
from dynid.symbolic.identify import identify
from dynid.symbolic.library import PolynomialLibrary, TermSet
from dynid.symbolic.options import SymbolicParams
from dynid.symbolic.rivals import trajectory_criterion
from dynid.symbolic.shooting import ShootingFit


def _record(rhs, x0, span, n=150):
    t = np.linspace(0.0, span, n)
    solution = solve_ivp(rhs, (0.0, span), x0, t_eval=t, method="DOP853", rtol=1e-11, atol=1e-12)
    return dynid.Dataset.from_arrays(solution.y.T, t=t)


def _terms(result, i=0):
    return {result.termset.names[j]: result.coefficients[i, j] for j in np.flatnonzero(result.coefficients[i])}


def test_a_cubic_decay_is_not_swapped_for_a_trig_surrogate():
    # On 150 coarse samples from x0 = 3 the finite difference's truncation error let
    # -7.04 x + 7.08 sin x win on equation errors; its trajectories do not match.
    result = identify(_record(lambda t, x: [-x[0] ** 3], [3.0], 15.0), SymbolicParams(ensemble=0))
    terms = _terms(result)
    assert set(terms) == {"x0**3"}, terms
    assert terms["x0**3"] == pytest.approx(-1.0, rel=1e-6)


@pytest.mark.parametrize(("rhs", "x0", "truth"), [
    (lambda t, x: [-2.0 * np.sin(x[0])], [3.0], {"sin(x0)": -2.0}),
    (lambda t, x: [0.3 - np.sin(x[0])], [2.9], {"1": 0.3, "sin(x0)": -1.0}),
])
def test_a_sine_system_does_not_come_back_as_a_polynomial(rhs, x0, truth):
    result = identify(_record(rhs, x0, 10.0), SymbolicParams(ensemble=0))
    terms = _terms(result)
    assert set(terms) == set(truth), terms
    for name, value in truth.items():
        assert terms[name] == pytest.approx(value, rel=1e-5)


def test_the_trajectory_criterion_is_bic_with_the_noise_level_estimated():
    def fit(cost, residuals, dof):
        zeros = np.zeros((1, 1))
        return ShootingFit(zeros, {}, 1, 10, 1, 1, 1, 1.0, 1.0, cost, residuals, dof, zeros, zeros)

    # One parameter more must buy a misfit lower by the factor exp(-ln(n) / n).
    n = 100
    base = trajectory_criterion(fit(50.0, n, 90))
    assert base == pytest.approx(n * np.log(0.5) + 10 * np.log(n))
    assert trajectory_criterion(fit(50.0 * np.exp(-np.log(n) / n), n, 89)) == pytest.approx(base)
    # Scale-free: the standardising noise level does not change which contender wins.
    assert trajectory_criterion(fit(5e6, n, 90)) - trajectory_criterion(fit(4e6, n, 89)) == pytest.approx(
        trajectory_criterion(fit(5.0, n, 90)) - trajectory_criterion(fit(4.0, n, 89))
    )


def test_a_non_integer_power_is_recovered_exactly():
    result = identify(_record(lambda t, x: [0.5 - x[0] ** 1.5], [3.0], 8.0), SymbolicParams(ensemble=0))
    terms = _terms(result)
    assert len(terms) == 2, terms
    assert terms["1"] == pytest.approx(0.5, rel=1e-5)
    power = next(name for name in terms if name != "1")
    assert power.startswith("x0**")
    assert float(power[4:]) == pytest.approx(1.5, rel=1e-5)
    assert terms[power] == pytest.approx(-1.0, rel=1e-5)


def test_a_saturating_harvest_beside_logistic_growth_is_found():
    # x - x^2/6 - 1.5 x/(1 + x): no library of the sweep has x^2 and x/(x + c) together.
    result = identify(
        _record(lambda t, x: [x[0] - x[0] ** 2 / 6 - 1.5 * x[0] / (1 + x[0])], [1.2], 12.0), SymbolicParams(ensemble=0)
    )
    terms = _terms(result)
    assert terms["x0"] == pytest.approx(1.0, rel=1e-4)
    assert terms["x0**2"] == pytest.approx(-1 / 6, rel=1e-4)
    saturating = [name for name in terms if name.startswith("x0/(x0 + ")]
    assert len(saturating) == 1, terms
    assert float(saturating[0][len("x0/(x0 + "):-1]) == pytest.approx(1.0, rel=1e-4)
    assert terms[saturating[0]] == pytest.approx(-1.5, rel=1e-4)
    # Known gap (also with library=poly2+rational, which holds the true terms): on these coarse
    # clean samples a surrogate of contribution ~1e-5 may stay beside the true terms.
    x = np.linspace(1.2, 4.3, 50)[:, None]
    extra = [k for k, name in enumerate(result.termset.names) if name not in ("x0", "x0**2", saturating[0])]
    if extra:
        contribution = result.termset.evaluate(x, columns=extra) @ result.coefficients[0, extra]
        assert np.max(np.abs(contribution)) < 1e-4


def test_lorenz_gains_no_generated_term():
    def lorenz(t, x):
        return [10 * (x[1] - x[0]), x[0] * (28 - x[2]) - x[1], x[0] * x[1] - 8 / 3 * x[2]]

    result = identify(_record(lorenz, [-8.0, 8.0, 27.0], 2.98), SymbolicParams(ensemble=0))
    truth = [{"x0": -10, "x1": 10}, {"x0": 28, "x1": -1, "x0*x2": -1}, {"x2": -8 / 3, "x0*x1": 1}]
    for i, wanted in enumerate(truth):
        assert "generated" not in result.equations[i].library
        terms = _terms(result, i)
        assert set(terms) == set(wanted), terms
        for name, value in wanted.items():
            assert terms[name] == pytest.approx(value, rel=1e-3)


def test_generated_shapes_skip_the_library_and_need_positive_data():
    termset = TermSet.build(PolynomialLibrary(2), 2)
    support = np.array([name in ("x0", "x0*x1") for name in termset.names])
    positive = np.array([[1.0, -1.0], [2.0, 3.0]])
    shapes = {term.expr for term in candidate_terms(termset, support, positive)}
    assert "exp(c0*log(x0))" in shapes and "exp(c0*log(x1))" not in shapes  # x1 goes below 0
    assert "(x0*x1)*x0/(x0 + c0)" in shapes and "(x0)*x0/(x0 + c0)" not in shapes
    assert "1/(1 + exp(c0*x1 + c1))" in shapes
    assert not any(term in shapes for term in ("(x0)*x0", "(x0)*x1"))  # x0**2, x0*x1: the library's
    assert "(x0*x1)*x1" in shapes
