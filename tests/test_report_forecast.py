"""The report's forecasts say whether they are truly held out, and ``--test`` supplies data that is."""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from dynid.data.dataset import Dataset
from dynid.report import build_report
from tests.conftest import damped_rotation, write_csv
from tests.test_report import check_page, fitted, rotation_data


def _rmse_cells(page: str) -> list[float]:
    return [float(v) for v in re.findall(r'<td class="num">([^<]+)</td>', page.split("forecast RMSE")[1].split("</table>")[0])]


def test_forecast_on_the_training_data_says_it_is_not_held_out():
    data = rotation_data()
    page = build_report([("m.dynid", fitted(data=data))], [], data)
    check_page(page)
    assert "Not held out: the --data data are the data this model was fitted on" in page
    assert "<h3>Forecast on &lt;memory&gt;</h3>" in page


def test_test_data_are_forecast_instead_of_data_and_said_to_differ():
    train = rotation_data()
    x = rotation_data(n=60).trials[0].x * 2.0  # another start on the same linear map
    test = dataclasses.replace(Dataset.from_arrays(x, dt=0.1, variables=["x", "y"]), source="test.csv")
    page = build_report([("m.dynid", fitted(data=train))], [], train, test=test, horizon=10)
    check_page(page)
    assert "<h3>Forecast on test.csv (--test)</h3>" in page
    assert "The --test data differ from the data this model was fitted on" in page
    assert "Not held out" not in page
    assert "Last trial: 50 samples of history, the following 10" in page  # test's 60, not 120
    assert all(v < 1e-6 for v in _rmse_cells(page))  # the exact linear map still forecasts it


def test_test_equal_to_the_training_data_is_flagged():
    train = rotation_data()
    page = build_report([("m.dynid", fitted(data=train))], [], None, test=train)
    assert "Not held out: the --test data are the data this model was fitted on" in page


def test_a_model_without_a_fingerprint_says_it_cannot_tell():
    data = rotation_data()
    model_file = fitted(data=data)
    del model_file.metadata["data_fingerprint"]
    page = build_report([("m.dynid", model_file)], [], data)
    assert "records no data fingerprint" in page
    assert 'data sha256</th><td>' in page  # the metadata row stays, empty


def test_cli_report_with_test_data(cli, tmp_path):
    x = damped_rotation(400)
    train = write_csv(tmp_path / "train.csv", x[:300], ["p", "q"], dt=0.1)
    test = write_csv(tmp_path / "test.csv", x[300:], ["p", "q"], dt=0.1)
    model = tmp_path / "m.dynid"
    assert cli("fit", train, "--model", "dmd", "-o", model).returncode == 0
    report = tmp_path / "r.html"
    result = cli("report", model, "--data", train, "--test", test, "-o", report)
    assert result.returncode == 0, result.stderr
    page = report.read_text()
    check_page(page)
    assert "test.csv (--test)" in page and "differ from the data this model was fitted on" in page
    assert np.isfinite(_rmse_cells(page)).all()
