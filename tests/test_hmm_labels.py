"""Partially known states (``--labels``) for the hidden Markov backends: with 10% of the rows
labelled, the states of a hard (overlapping) 3-state HMM are found more accurately, with the
labels' own numbering, and labelled rows keep their labels; the CLI reads the label column
as labels, not as a state variable."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dynid import api
from dynid.data.dataset import Dataset
from dynid.errors import DataError

from conftest import write_csv
from test_hmm import MEANS, chain, matching

N = 1500
# Emission sd: the three states overlap, so unsupervised EM mislabels a few percent.
WIDE_SD = 1.6


def labelled_data(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """True states (N,), observations (N, 2) and labels (N,): the true state on a random 10%
    of the rows, NaN elsewhere."""
    rng = np.random.default_rng(seed)
    z = chain(N, rng)
    x = MEANS[z] + WIDE_SD * rng.normal(size=(N, 2))
    labels = np.where(rng.random(N) < 0.1, z, np.nan)
    return z, x, labels


def test_ten_percent_labels_improve_the_states_and_keep_their_numbers():
    z, x, labels = labelled_data(seed=1)
    plain = Dataset.from_arrays(x, dt=0.1, variables=["a", "b"])
    with_labels = Dataset.from_arrays(np.column_stack([x, labels]), dt=0.1, variables=["a", "b", "label"])
    unlabelled = api.fit(plain, "hmm", {"states": 3, "restarts": 2}, seed=0, device="cpu").model
    labelled = api.fit(with_labels, "hmm", {"states": 3, "restarts": 2}, seed=0, device="cpu", labels="label").model
    assert labelled.variables_ == ("a", "b")
    assert labelled.metrics_["labelled_samples"] == int(np.sum(~np.isnan(labels)))
    _, before = matching(api.states(unlabelled, plain).state, z)  # best relabelling allowed
    found = api.states(labelled, with_labels, labels="label")
    after = float(np.mean(found.state == z))  # no relabelling: state k is label k
    assert after >= before + 0.005, (before, after)
    given = ~np.isnan(labels)
    np.testing.assert_array_equal(found.state[given], labels[given])
    np.testing.assert_array_equal(found.probabilities[given], np.eye(3)[labels[given].astype(int)])
    np.testing.assert_allclose(labelled.arrays()["means"], MEANS, atol=0.25)


def test_labels_beyond_the_states_are_refused_and_raise_auto():
    _, x, labels = labelled_data(seed=2)
    labels[:5] = 3  # a fourth state
    data = Dataset.from_arrays(np.column_stack([x, labels]), dt=0.1, variables=["a", "b", "label"])
    with pytest.raises(DataError, match="states up to 3"):
        api.fit(data, "hmm", {"states": 3}, seed=0, device="cpu", labels="label")
    model = api.fit(data, "hmm", {"max_states": 2, "restarts": 0}, seed=0, device="cpu", labels="label").model
    assert model.metrics_["states"] == 4
    labels[:5] = 4  # a state the model does not have
    beyond = Dataset.from_arrays(np.column_stack([x, labels]), dt=0.1, variables=["a", "b", "label"])
    with pytest.raises(DataError, match="not one of the model's states 0..3"):
        api.states(model, beyond, labels="label")


def test_fit_and_states_commands_read_the_label_column(cli, tmp_path):
    z, x, labels = labelled_data(seed=3)
    path = write_csv(tmp_path / "labelled.csv", np.column_stack([x[:400], labels[:400]]), ["a", "b", "regime"], dt=0.1)
    model_path = str(tmp_path / "m.dynid")
    fitted = cli("fit", path, "--model", "hmm", "-p", "states=3", "--labels", "regime", "-o", model_path, "--json")
    assert fitted.returncode == 0, fitted.stderr
    document = json.loads(fitted.stdout)
    assert document["variables"] == ["a", "b"]
    assert document["metrics"]["labelled_samples"] == int(np.sum(~np.isnan(labels[:400])))
    result = cli("states", model_path, path, "--labels", "regime", "--json")
    assert result.returncode == 0, result.stderr
    state = np.array(json.loads(result.stdout)["state"])
    given = ~np.isnan(labels[:400])
    np.testing.assert_array_equal(state[given], labels[:400][given])
    # The label column may also be named with --columns; --nan would cut or fill it: refused.
    assert cli("fit", path, "--model", "hmm", "--columns", "a,b", "--labels", "regime", "-o", model_path).returncode == 0
    refused = cli("fit", path, "--model", "hmm", "--labels", "regime", "--nan", "drop", "-o", model_path)
    assert refused.returncode == 2 and "--labels" in refused.stderr.decode()
    # So missing state values cannot be cut out: hmm says what to do instead.
    gappy = np.column_stack([x[:400], labels[:400]])
    gappy[10, 0] = np.nan
    gappy_path = write_csv(tmp_path / "gappy.csv", gappy, ["a", "b", "regime"], dt=0.1)
    refused = cli("fit", gappy_path, "--model", "hmm", "--labels", "regime", "-o", model_path)
    assert refused.returncode == 3 and "fill or drop those rows" in refused.stderr.decode(), refused.stderr


@pytest.mark.parametrize("labels, code, message", [("nope", 2, "not among"), ("a", 3, "state number")])
def test_bad_label_columns_are_refused(cli, tmp_path, labels, code, message):
    _, x, _ = labelled_data(seed=4)
    path = write_csv(tmp_path / "d.csv", x[:100], ["a", "b"], dt=0.1)  # column a holds reals
    result = cli("fit", path, "--model", "hmm", "--labels", labels, "-o", str(tmp_path / "m.dynid"))
    assert result.returncode == code and message in result.stderr.decode(), result.stderr


def test_labels_for_a_model_without_discrete_states_are_refused(cli, tmp_path):
    _, x, labels = labelled_data(seed=5)
    path = write_csv(tmp_path / "d.csv", np.column_stack([x[:100], labels[:100]]), ["a", "b", "regime"], dt=0.1)
    result = cli("fit", path, "--model", "var", "--labels", "regime", "-o", str(tmp_path / "m.dynid"))
    assert result.returncode == 2 and "no discrete states" in result.stderr.decode(), result.stderr


def test_fit_report_shows_the_regimes_of_the_data_without_the_label_column(cli, tmp_path):
    _, x, labels = labelled_data(seed=6)
    path = write_csv(tmp_path / "d.csv", np.column_stack([x[:300], labels[:300]]), ["a", "b", "regime"], dt=0.1)
    report = tmp_path / "r.html"
    result = cli("fit", path, "--model", "hmm", "-p", "states=3", "--labels", "regime",
                 "-o", str(tmp_path / "m.dynid"), "--report", str(report))
    assert result.returncode == 0, result.stderr
    page = report.read_text()
    assert "Regimes over time" in page and "differ from the model" not in page
