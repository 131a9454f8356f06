"""The contract every ``--method`` in ``dynid.causal.registry`` keeps, whoever wrote it.

Each test is parametrised over ``registry.names()``, so a new method is checked by adding its
registry line; its id (``[granger]``, ``[ccm]`` ...) says whose failure it is. Whether a method
finds the right links is each method's own ground-truth test.
"""

from __future__ import annotations

import dataclasses
import functools
import json

import numpy as np
import pytest

from dynid.causal import CausalSettings, registry
from dynid.causal.base import CausalMethod
from dynid.causal.graph import CONTRACT_KEYS
from dynid.data.dataset import Dataset
from dynid.errors import DataError, ResourceUnavailable
from dynid.jsonable import jsonable
from dynid.runtime import cuda_available
from dynid.systems import simulate

from conftest import (
    TYPO,
    assert_registered_and_documented,
    assert_typo_named_with_valid_keys,
    write_csv,
)

# -p settings that keep a method with slow defaults fast here; a method not listed runs with its
# defaults, so a new method needs no entry unless its defaults take seconds.
CONTRACT_PARAMS: dict[str, list[str]] = {
    "ccm": ["n_library_sizes=3", "n_samples=5", "max_E=3"],
    "te": ["n_permutations=19"],
    "neural": ["lam=0.1", "max_iter=20"],
    "dynamic": ["step=50"],
}
LINK_MARKS = {"-->", "<--", "o-o", "x-x"}
SETTINGS = CausalSettings(max_lag=2, alpha=0.05, seed=0)
SIM = simulate("logistic-coupled", n=300, seed=1)  # x drives y: a known two-node graph
DATA = Dataset.from_arrays(SIM.x, t=SIM.t, variables=list(SIM.variables))

pytestmark = [
    pytest.mark.parametrize("name", registry.names()),
    pytest.mark.usefixtures("one_torch_thread"),
]


def method(name: str) -> CausalMethod:
    cls = registry.get(name)
    return cls(cls.Params.parse(CONTRACT_PARAMS.get(name, [])))


def discover_json(name: str) -> dict:
    return jsonable(method(name).discover(DATA, SETTINGS).to_json_dict())


@pytest.fixture
def document(name) -> dict:
    """The method's JSON document on DATA, computed once and shared."""
    return first_document(name)


@functools.cache
def first_document(name: str) -> dict:
    return discover_json(name)


def test_registry_name_and_documented_params(name):
    assert_registered_and_documented(registry.get(name), name)


def test_graph_over_the_variables_with_the_json_contract(name, document):
    assert list(document)[: len(CONTRACT_KEYS)] == list(CONTRACT_KEYS)
    json.dumps(document, allow_nan=False)
    variables = list(DATA.variables)
    d = len(variables)
    assert document["variables"] == variables and document["method"] == name
    assert document["max_lag"] == SETTINGS.max_lag and document["alpha"] == SETTINGS.alpha
    assert np.array(document["score_matrix"], dtype=float).shape == (d, d)
    adjacency = np.array(document["adjacency"])
    assert adjacency.shape == (d, d) and set(adjacency.ravel()) <= {0, 1}
    assert np.all(np.diag(adjacency) == 0)
    significant = set()
    first_lag = 0 if registry.get(name).contemporaneous else 1
    for edge in document["edges"]:
        keys = {"source", "target", "lag", "strength", "p_value", "significant"}
        # Only lag-0 edges of a method that tests them may say how the link is oriented.
        assert set(edge) == (keys | {"link"} if "link" in edge else keys)
        assert "link" not in edge or (edge["lag"] == 0 and edge["link"] in LINK_MARKS)
        assert edge["source"] in variables and edge["target"] in variables
        assert edge["source"] != edge["target"]
        assert first_lag <= edge["lag"] <= SETTINGS.max_lag
        assert edge["p_value"] is None or 0.0 <= edge["p_value"] <= 1.0
        if edge["significant"]:
            significant.add((variables.index(edge["source"]), variables.index(edge["target"])))
    assert significant == set(zip(*np.nonzero(adjacency)))


def test_same_seed_same_graph(name, document):
    assert discover_json(name) == document


def with_column(transform) -> Dataset:
    x = DATA.trials[0].x.copy()
    transform(x)
    return Dataset.from_arrays(x, t=DATA.trials[0].t, variables=list(DATA.variables))


def test_refuses_missing_values(name):
    def put_nan(x):
        x[100, 1] = np.nan

    with pytest.raises(DataError, match="'y'"):
        method(name).discover(with_column(put_nan), SETTINGS)


def test_refuses_a_constant_column(name):
    def flatten(x):
        x[:, 0] = 0.5

    with pytest.raises(DataError, match="'x'.*constant"):
        method(name).discover(with_column(flatten), SETTINGS)


def test_refuses_irregular_sampling(name):
    t = np.cumsum(np.random.default_rng(0).uniform(0.5, 1.5, DATA.n_samples))
    irregular = Dataset.from_arrays(DATA.trials[0].x, t=t, variables=list(DATA.variables))
    assert irregular.dt is None
    with pytest.raises(DataError, match="--resample"):
        method(name).discover(irregular, SETTINGS)


@pytest.fixture(scope="module")
def data_file(tmp_path_factory):
    return write_csv(tmp_path_factory.mktemp("causal-contract") / "coupled.csv", SIM.x,
                     SIM.variables, t=SIM.t)


def test_a_param_typo_names_the_valid_keys(name, cli, data_file):
    result = cli("discover-causal", data_file, "--method", name, "-p", f"{TYPO}=1")
    assert_typo_named_with_valid_keys(result, registry.get(name).Params)
    assert result.stdout == b""


def test_cuda_as_declared(name, cli, data_file):
    params = [arg for assignment in CONTRACT_PARAMS.get(name, []) for arg in ("-p", assignment)]
    result = cli("discover-causal", data_file, "--method", name, *params, "--max-lag", "2",
                 "--device", "cuda", "--json")
    if not registry.get(name).cuda:
        # A CPU-only method: asking for CUDA is a usage error whatever the machine has.
        assert result.returncode == 2 and "CPU only" in result.stderr.decode(), result.stderr
    elif not cuda_available():
        assert result.returncode == 4 and "cuda" in result.stderr.decode(), result.stderr
        # The method checks too, for callers of the Python API that skip resolve_device.
        with pytest.raises(ResourceUnavailable, match="cuda"):
            method(name).discover(DATA, dataclasses.replace(SETTINGS, device="cuda"))
    else:
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["method"] == name
