"""``--method sindy``: the graph of known equations read off the identified ones (Lorenz-63,
Rossler, Sprott B, Lorenz-96, a forced oscillator, coupled logistic maps), clean and noisy, with
and without a time column; its building blocks against exact answers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dynid.causal import discover
from dynid.causal.sindy import SindyParams, library_specs, term_states
from dynid.data.dataset import Dataset
from dynid.errors import DataError, UsageError
from dynid.metrics.causal import auroc
from dynid.symbolic.library import TermSet, parse_library_spec
from dynid.systems import simulate

from conftest import write_csv

N = 1000


def links(d: int, *pairs: tuple[int, int]) -> np.ndarray:
    """(d, d) 0/1 [source][target] with the (source, target) ``pairs`` set."""
    truth = np.zeros((d, d), dtype=int)
    for source, target in pairs:
        truth[source, target] = 1
    return truth


X, Y, Z = 0, 1, 2
# Written from the equations: x_j -> x_i iff x_j appears in dx_i/dt (self-links not scored).
# Lorenz-63: x' = s(y - x), y' = x(r - z) - y, z' = xy - bz.
LORENZ = links(3, (Y, X), (X, Y), (Z, Y), (X, Z), (Y, Z))
# Rossler: x' = -y - z, y' = x + ay, z' = b + z(x - c).
ROSSLER = links(3, (Y, X), (Z, X), (X, Y), (X, Z))
# Sprott B: x' = yz, y' = x - y, z' = 1 - xy.
SPROTT_B = links(3, (Y, X), (Z, X), (X, Y), (X, Z), (Y, Z))


def terms_of(rhs: str) -> dict[str, float]:
    """A right-hand side as ``dynid symbolic`` writes it, parsed by sympy: term -> coefficient."""
    import sympy

    return {str(term): float(c) for term, c in sympy.sympify(rhs).as_coefficients_dict().items()}


def assert_equations(equations: dict[str, str], expected: dict[str, dict[str, float]]) -> None:
    """Each variable's right-hand side holds the expected terms with coefficients to 1e-6."""
    assert equations.keys() == expected.keys()
    for name, terms in expected.items():
        found = terms_of(equations[name])
        assert found.keys() == terms.keys(), (name, equations[name])
        for term, value in terms.items():
            assert found[term] == pytest.approx(value, rel=1e-6), (name, term)


def lorenz96_truth(n: int) -> np.ndarray:
    """x_i' = (x_{i+1} - x_{i-2}) x_{i-1} - x_i + F: sources i+1, i-2, i-1 of every site i."""
    return links(n, *[((i + k) % n, i) for i in range(n) for k in (1, -2, -1)])


def graph_of(sim, **settings):
    data = Dataset.from_arrays(sim.x, t=sim.t, variables=list(sim.variables))
    return discover(data, "sindy", seed=0, **settings)


def off_diagonal(d: int) -> np.ndarray:
    return ~np.eye(d, dtype=bool)


@pytest.mark.parametrize(("system", "truth", "noise"), [
    ("lorenz", LORENZ, 0.0),
    ("lorenz", LORENZ, 0.01),  # noisy: the weak form, not derivatives
    ("rossler", ROSSLER, 0.0),
    ("sprott-b", SPROTT_B, 0.0),
])
def test_the_graph_of_known_equations(system, truth, noise):
    graph = graph_of(simulate(system, n=N, noise=noise, seed=1))
    np.testing.assert_array_equal(graph.adjacency, truth)
    score = np.asarray(graph.score_matrix)
    assert auroc(score, truth) == 1.0
    # Non-links are kept by few bags (none, mostly); links by (nearly) all of them.
    off = off_diagonal(3)
    assert score[(truth == 0) & off].max() < 0.25 and score[truth == 1].min() > 0.9
    assert graph.extra["formulation"] == ("weak" if noise else "strong")
    edges = {(e.source, e.target): e for e in graph.edges}
    assert all(e.lag == 1 and np.isnan(e.p_value) for e in edges.values())
    assert edges[("y", "x")].significant and edges[("y", "x")].strength > 0.1


def test_lorenz_equations_reported_in_the_variables_names():
    equations = graph_of(simulate("lorenz", n=N, seed=1)).extra["equations"]
    terms = {lhs: set(terms_of(rhs)) for lhs, rhs in equations.items()}
    assert terms == {"x": {"x", "y"}, "y": {"x", "y", "x*z"}, "z": {"z", "x*y"}}
    assert terms_of(equations["x"])["y"] == pytest.approx(10.0, rel=1e-3)


def test_equations_are_written_as_dynid_symbolic_writes_them():
    """One formatter (``build_term_result``): a name that is not a sympy symbol ('x (m)',
    'lambda') is written as a symbol that ``symbols`` maps back, coefficients at full precision
    and signs as in "-4.0*x - 0.2*v", so that every right-hand side parses with sympy."""
    sim = simulate("forced-oscillator", n=N, seed=0)
    data = Dataset.from_arrays(sim.x, t=sim.t, u=sim.u, variables=["x (m)", "lambda"], inputs=["u"])
    graph = discover(data, "sindy", seed=0)
    assert graph.extra["symbols"] == {"x0": "x (m)", "x1": "lambda", "u": "u"}
    assert_equations(graph.extra["equations"], {"x (m)": {"x1": 1.0}, "lambda": {"x0": -4.0, "x1": -0.2, "u": 1.0}})
    assert " - " in graph.extra["equations"]["lambda"] and "+ -" not in graph.extra["equations"]["lambda"]


def test_lorenz96_ring():
    sim = simulate("lorenz96", n=600, seed=0, params={"N": 6})
    graph = graph_of(sim)
    truth = lorenz96_truth(6)
    np.testing.assert_array_equal(graph.adjacency, truth)
    assert auroc(np.asarray(graph.score_matrix), truth) == 1.0


def test_same_graph_with_or_without_a_time_column_and_repeatable(cli, tmp_path):
    # Without a time column the step is one sample: the equations' coefficients scale with it,
    # which terms they hold does not.
    sim = simulate("sprott-b", n=N, seed=1)
    timed = write_csv(tmp_path / "timed.csv", sim.x, sim.variables, t=sim.t)
    untimed = tmp_path / "untimed.csv"
    np.savetxt(untimed, sim.x, delimiter=",", header="x,y,z", comments="")
    runs = [cli("discover-causal", path, "--method", "sindy", "--seed", "3", "--json")
            for path in (timed, untimed, untimed)]
    assert all(run.returncode == 0 for run in runs), runs[0].stderr
    documents = [json.loads(run.stdout) for run in runs]
    for document in documents:
        np.testing.assert_array_equal(document["adjacency"], SPROTT_B)
    assert runs[1].stdout == runs[2].stdout


def test_term_states_reads_whole_coordinate_names():
    termset = TermSet.build(parse_library_spec("poly2"), 11)
    contains = term_states(termset)
    names = termset.names
    assert names[0] == "1" and not contains[0].any()
    # x10 is state 10, not state 1 followed by a 0.
    assert np.flatnonzero(contains[names.index("x1*x10")]).tolist() == [1, 10]
    assert np.flatnonzero(contains[names.index("x10**2")]).tolist() == [10]
    assert contains.sum(axis=1).max() == 2


def test_libraries_need_ten_rows_per_column():
    # poly3 of 10 variables has 286 columns, poly2 66: 1,000 rows are too few for poly3.
    assert library_specs(10, 0, 1000, 3) == ["poly1", "poly2"]
    assert library_specs(10, 0, 2860, 3) == ["poly1", "poly2", "poly3"]
    assert library_specs(10, 0, 2859, 3) == ["poly1", "poly2"]
    assert library_specs(10, 1, 2860, 3) == ["poly1", "poly2"]  # one user term more
    # 3 variables and 2 inputs: poly2 has 21 columns.
    assert library_specs(5, 0, 210, 3) == ["poly1", "poly2"]
    assert library_specs(3, 0, 1000, 1) == ["poly1"]
    assert library_specs(3, 0, 50, 3) == ["poly1"]


@pytest.mark.parametrize("assignment", ["max_degree=0", "ensemble=0", "criterion=aic", "derivative=fd"])
def test_bad_options_are_refused(assignment):
    with pytest.raises(UsageError, match=assignment.split("=")[0]):
        SindyParams.parse([assignment])


def test_inputs_enter_the_equations_not_the_graph():
    # x' = v, v' = -k x - c v + u: the input is in the library and the equations, and the graph
    # stays over the state variables.
    sim = simulate("forced-oscillator", n=N, seed=0)
    data = Dataset.from_arrays(sim.x, t=sim.t, u=sim.u, variables=list(sim.variables),
                               inputs=list(sim.inputs))
    graph = discover(data, "sindy", seed=0)
    np.testing.assert_array_equal(graph.adjacency, [[0, 1], [1, 0]])
    assert_equations(graph.extra["equations"], {"x": {"v": 1.0}, "v": {"x": -4.0, "v": -0.2, "u": 1.0}})


def test_a_map_with_discrete():
    # x[k+1] = 3.8 x (1 - x), y[k+1] = 3.5 y (1 - y - 0.1 x): x drives y, not the reverse.
    sim = simulate("logistic-coupled", n=300, seed=1)
    data = Dataset.from_arrays(sim.x, t=sim.t, variables=list(sim.variables))
    graph = discover(data, "sindy", ["discrete=true"], seed=0)
    np.testing.assert_array_equal(graph.adjacency, [[0, 1], [0, 0]])
    assert graph.extra["formulation"] == "map"
    assert_equations(graph.extra["equations"], {"x": {"x": 3.8, "x**2": -3.8},
                                                "y": {"y": 3.5, "x*y": -0.1, "y**2": -3.5}})
    assert graph.score_matrix[1, 0] < 0.5 < graph.score_matrix[0, 1]


@pytest.mark.parametrize("n", [6, 8])
def test_too_short_a_record_is_a_data_error(n):
    sim = simulate("lorenz", n=n, seed=1)
    with pytest.raises(DataError, match="too short"):
        discover(Dataset.from_arrays(sim.x, t=sim.t), "sindy", seed=0)


def test_user_terms_for_a_piecewise_linear_system():
    # Chua: x' = a (y - x - h(x)), h(x) = m1 x + (m0 - m1) (|x + 1| - |x - 1|) / 2, y' = x - y + z,
    # z' = -b y. Polynomials stand in for h with z in it; with |x + 1| and |x - 1| offered the
    # equations are exact and so is the graph.
    sim = simulate("double-scroll", n=N, seed=2)
    data = Dataset.from_arrays(sim.x, t=sim.t, variables=list(sim.variables))
    graph = discover(data, "sindy", ["terms=abs(x+1), abs(x-1)"], seed=0)
    truth = links(3, (Y, X), (X, Y), (Z, Y), (Y, Z))
    np.testing.assert_array_equal(graph.adjacency, truth)
    assert np.asarray(graph.score_matrix)[(truth == 0) & off_diagonal(3)].max() < 0.05
    assert "Abs(x + 1)" in graph.extra["equations"]["x"]
