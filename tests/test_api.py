"""The Python API carries what the CLI does, against ground truth; every JSON document carries its
"kind", and the report dispatches on it."""

from __future__ import annotations

import json

import numpy as np
import pytest

import dynid
from dynid import documents
from dynid.data.dataset import Dataset
from dynid.errors import DataError, UsageError
from dynid.modelfile import save_model
from dynid.models import registry
from dynid.report import build_report
from dynid.systems import simulate

LORENZ = {"sigma": 10.0, "rho": 28.0, "beta": 8.0 / 3.0}


def lorenz_data(n: int = 2000) -> Dataset:
    run = simulate("lorenz", n=n)
    return Dataset.from_arrays(run.x, t=run.t, variables=list(run.variables))


def coefficients(document: dict) -> dict[str, dict[str, float]]:
    """{lhs: {term: coefficient}} from a symbolic document."""
    return {eq["lhs"]: {t["term"]: t["coefficient"] for t in eq["terms"]} for eq in document["equations"]}


# -- identify ----------------------------------------------------------------------------------------
def test_identify_finds_the_lorenz_equations():
    document = dynid.identify(lorenz_data(), library="poly2", ensemble=0, seed=0)
    assert document["kind"] == "symbolic"
    s, r, b = LORENZ["sigma"], LORENZ["rho"], LORENZ["beta"]
    truth = {
        "x": {"x": -s, "y": s},
        "y": {"x": r, "y": -1.0, "x*z": -1.0},
        "z": {"z": -b, "x*y": 1.0},
    }
    found = coefficients(document)
    assert {lhs: set(terms) for lhs, terms in found.items()} == {lhs: set(t) for lhs, t in truth.items()}
    for lhs, terms in truth.items():
        for term, value in terms.items():
            # Noise-free data sampled at dt = 0.01: only derivative error remains (~1e-4 relative).
            assert found[lhs][term] == pytest.approx(value, rel=1e-3), (lhs, term)


def test_identify_returns_what_the_cli_prints(cli, tmp_path):
    data = lorenz_data(800)
    path = tmp_path / "lorenz.csv"
    columns = np.column_stack([data.trials[0].t, data.trials[0].x])
    np.savetxt(path, columns, delimiter=",", header="t,x,y,z", comments="", fmt="%.17g")
    printed = cli("symbolic", path, "--library", "poly2", "--ensemble", "0", "--seed", "0", "--json")
    assert printed.returncode == 0, printed.stderr.decode()
    document = dynid.identify(dynid.load(str(path)), library="poly2", ensemble=0, seed=0)
    assert json.loads(printed.stdout) == json.loads(json.dumps(document))


def test_identify_takes_options_or_params_but_not_both():
    with pytest.raises(UsageError, match="not both"):
        dynid.identify(lorenz_data(50), {"ensemble": 0}, library="poly2")
    with pytest.raises(UsageError, match="valid keys: library, terms"):
        dynid.identify(lorenz_data(50), libary="poly2")


# -- discover_causal with clusters -------------------------------------------------------------------
GROUPS = {"A": ["a0", "a1"], "B": ["b0", "b1"], "C": ["c0"]}
GROUP_TRUTH = [[0, 1, 0], [0, 0, 0], [0, 0, 0]]  # A -> B only


@pytest.fixture(scope="module")
def coupled() -> Dataset:
    """VAR(1): a0 drives b0 and a1 drives b1 (0.4 each); c0 is independent of both groups."""
    names = ["a0", "a1", "b0", "b1", "c0"]
    coefs = np.diag([0.5, 0.5, 0.4, 0.4, 0.5])
    coefs[2, 0] = coefs[3, 1] = 0.4
    noise = np.random.default_rng(3).standard_normal((1600, 5))
    x = np.zeros_like(noise)
    for t in range(1, len(x)):
        x[t] = coefs @ x[t - 1] + noise[t]
    return Dataset.from_arrays(x[100:], variables=names)


def test_discover_causal_with_clusters_finds_the_cluster_graph(coupled):
    from_text = dynid.discover_causal(coupled, "granger", clusters="A=a0,a1; B=b0,b1; C=c0", max_lag=2)
    from_dict = dynid.discover_causal(coupled, "granger", clusters=GROUPS, max_lag=2)
    assert from_text.variables == ("A", "B", "C")
    assert from_text.adjacency.tolist() == GROUP_TRUTH
    assert from_text.to_json_dict() == from_dict.to_json_dict()


def test_discover_causal_without_clusters_finds_the_variable_graph(coupled):
    graph = dynid.discover_causal(coupled, "granger", max_lag=1, alpha=0.01)
    truth = np.zeros((5, 5), dtype=int)
    truth[0, 2] = truth[1, 3] = 1
    np.testing.assert_array_equal(graph.adjacency, truth)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"method": "pcmci", "clusters": "A=a0;B=b0"}, UsageError, "supported with: granger"),
        ({"clusters": {"A": ["a0"]}}, UsageError, "at least two clusters"),
        ({"clusters": {"A": ["a0"], "B": ["a0"]}}, UsageError, "'a0' is in both"),
        ({"clusters": {"A": ["a0"], "B": ["nope"]}}, DataError, "'nope'"),
        ({"clusters": "A=a0;B=b0", "penalty": "group-lasso"}, UsageError, "drop -p"),
        ({"penalty": "lasso"}, UsageError, "penalty"),
        ({"params": {"penalty": "ols"}, "penalty": "ols"}, UsageError, "not both"),
    ],
)
def test_discover_causal_refuses_bad_requests(coupled, kwargs, error, message):
    with pytest.raises(error, match=message):
        dynid.discover_causal(coupled, **{"method": "granger", "max_lag": 1, **kwargs})


# -- fit with typed params ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "model, values, strings",
    [
        ("var", {"order": 2, "ridge": 0.1, "trend": False}, ["order=2", "ridge=0.1", "trend=false"]),
        ("var", {"ridge": 1}, ["ridge=1"]),  # an int for a float field
        ("var", {"order": None, "max_order": 3, "criterion": "aic"}, ["order=none", "max_order=3", "criterion=aic"]),
        ("dmd", {"rank": None}, ["rank=none"]),
        ("sindy", {"threshold": "0.1"}, ["threshold=0.1"]),  # strings are parsed
    ],
)
def test_fit_with_a_params_dict_equals_fit_with_the_parsed_strings(model, values, strings):
    data = lorenz_data(400)
    typed = dynid.fit(data, model, values, seed=0)
    parsed = dynid.fit(data, model, strings, seed=0)
    assert typed.model.params == parsed.model.params == registry.get(model).Params.parse(strings)
    # == holds for 1 and 1.0 too: the stored types must match as well (a model file keeps them).
    assert {k: type(v) for k, v in typed.model.params.to_dict().items()} == {
        k: type(v) for k, v in parsed.model.params.to_dict().items()}
    assert typed.metadata["hyperparameters"] == parsed.metadata["hyperparameters"]
    arrays, expected = typed.model.arrays(), parsed.model.arrays()
    assert arrays.keys() == expected.keys()
    for name in arrays:
        np.testing.assert_array_equal(arrays[name], expected[name])


def test_a_bad_key_names_the_valid_keys():
    with pytest.raises(UsageError) as caught:
        dynid.fit(lorenz_data(100), "var", {"oder": 2})
    assert "oder" in str(caught.value)
    assert "valid keys: " + ", ".join(f["name"] for f in registry.get("var").Params.describe()) in str(caught.value)


@pytest.mark.parametrize(
    "values, message",
    [
        ({"order": 2.5}, "expected an integer"),
        ({"order": True}, "expected an integer"),
        ({"ridge": "abc"}, "expected a number"),
        ({"ridge": float("inf")}, "finite"),
        ({"trend": 1}, "true or false"),
        ({"max_order": None}, "None"),
        ({"order": 0}, "order"),  # the dataclass's own check
    ],
)
def test_wrong_types_are_usage_errors(values, message):
    with pytest.raises(UsageError, match=message):
        registry.get("var").Params.from_values(values)


def test_params_of_another_backend_or_a_bare_string_are_refused():
    with pytest.raises(UsageError, match="expected"):
        dynid.fit(lorenz_data(100), "var", registry.get("dmd").Params())
    with pytest.raises(UsageError, match="give a dict"):
        dynid.fit(lorenz_data(100), "var", "order=2")


def test_documents_carry_one_known_kind():
    assert list(documents.tagged(documents.SCORE, {"rmse": 1.0})) == ["kind", "rmse"]
    assert documents.listing(documents.MODELS, [{"name": "var"}]) == {"kind": "models", "models": [{"name": "var"}]}
    with pytest.raises(ValueError, match="unknown document kind"):
        documents.tagged("no-such-kind", {})
    with pytest.raises(ValueError, match="tagged as"):
        documents.tagged(documents.FIT, {"kind": "score"})
    with pytest.raises(ValueError, match="needs a known 'kind'"):
        documents.to_text({"rmse": 1.0})
    assert json.loads(documents.to_text(documents.tagged(documents.SCORE, {"rmse": float("nan")}))) == {
        "kind": "score", "rmse": None}


# -- "kind" in every JSON document -------------------------------------------------------------------
@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A small data file and a VAR model fitted on it."""
    folder = tmp_path_factory.mktemp("kinds")
    data = lorenz_data(300)
    csv = folder / "lorenz.csv"
    np.savetxt(csv, np.column_stack([data.trials[0].t, data.trials[0].x]), delimiter=",",
               header="t,x,y,z", comments="", fmt="%.17g")
    fitted = dynid.fit(data, "var", {"order": 1})
    model = folder / "lorenz.dynid"
    save_model(fitted.model, str(model), fitted.metadata)
    return {"csv": csv, "model": model, "folder": folder}


COMMANDS = {
    "fit": ["fit", "{csv}", "--model", "dmd", "-o", "{folder}/fit.dynid"],
    "forecast": ["forecast", "{model}", "{csv}", "--horizon", "3"],
    "score": ["score", "{model}", "{csv}", "--horizon", "5", "--starts", "2"],
    "symbolic": ["symbolic", "{csv}", "--library", "poly2", "--ensemble", "0"],
    "causal": ["discover-causal", "{csv}", "--max-lag", "1"],
    "info": ["info", "{model}"],
    "simulate": ["simulate", "linear", "--n", "5"],
    "models": ["models"],
    "methods": ["discover-causal", "--list"],
    "systems": ["simulate", "--list"],
}


@pytest.mark.parametrize("kind", sorted(COMMANDS))
def test_every_json_document_carries_its_kind(cli, files, kind):
    args = [a.format(**files) for a in COMMANDS[kind]]
    result = cli(*args, "--json")
    assert result.returncode == 0, result.stderr.decode()
    document = json.loads(result.stdout)
    assert isinstance(document, dict) and next(iter(document)) == "kind"
    assert document["kind"] == kind
    if kind in ("models", "methods", "systems"):
        assert isinstance(document[kind], list) and document[kind]
    if kind in ("forecast", "simulate"):
        assert np.array(document["x"]).shape == (len(document["t"]), len(document["variables"]))


@pytest.mark.parametrize("kind", ["forecast", "simulate"])
def test_json_with_an_output_file_is_refused(cli, files, kind):
    args = [a.format(**files) for a in COMMANDS[kind]]
    result = cli(*args, "--json", "-o", str(files["folder"] / "out.csv"))
    assert result.returncode == 2 and result.stdout == b""
    assert "--json" in result.stderr.decode()


def test_forecast_json_holds_the_same_numbers_as_its_csv(cli, files):
    args = [a.format(**files) for a in COMMANDS["forecast"]]
    table = np.loadtxt(cli(*args).stdout.decode().splitlines(), delimiter=",", skiprows=1)
    document = json.loads(cli(*args, "--json").stdout)
    np.testing.assert_allclose(np.column_stack([document["t"], document["x"]]), table, rtol=1e-12)


# -- the report dispatches on "kind" -----------------------------------------------------------------
def test_report_dispatches_on_kind_not_keys():
    # A fit summary that happens to hold an "equations" key is still a fit summary.
    fit = {"kind": "fit", "model_path": "m.dynid", "model": "sindy", "metrics": {"rmse": 0.1},
           "equations": ["dx/dt = x"]}
    legacy = {"horizon": 5, "starts": 1, "rmse": 0.5, "nrmse": 0.1, "valid_prediction_time": 1.0}
    later = {"kind": "states", "rows": 3}
    page = build_report([], [("f.json", fit), ("old.json", legacy), ("s.json", later)])
    assert "Fit summary: f.json" in page and "Symbolic regression" not in page
    assert "Forecast score: old.json" in page and "an older dynid wrote it" in page
    assert "Result (states): s.json" in page
    assert page.count("older dynid") == 1


def test_report_cli_reads_results_by_kind_and_notes_old_ones(cli, files):
    folder = files["folder"]
    scored = cli("score", files["model"], files["csv"], "--horizon", "5", "--starts", "2", "--json")
    (folder / "score.txt").write_bytes(scored.stdout)  # recognised by content, not by name
    old = json.loads(scored.stdout)
    del old["kind"]
    (folder / "old.json").write_text(json.dumps(old))
    result = cli("report", files["model"], folder / "score.txt", folder / "old.json", "-o", folder / "r.html")
    assert result.returncode == 0, result.stderr.decode()
    notes = result.stderr.decode().splitlines()
    assert [line for line in notes if "field" in line] == [
        f'{folder / "old.json"}: no "kind" field (an older dynid wrote it); read as score by its keys'
    ]
    page = (folder / "r.html").read_text()
    assert "Forecast score: " + str(folder / "score.txt") in page
    assert "Forecast score: " + str(folder / "old.json") in page
