"""The provenance section says how the report and each model were made."""

from __future__ import annotations

from dynid import __version__
from dynid.report import build_report
from tests.test_report import check_page, fitted, rotation_data


def test_provenance_names_version_command_fingerprints_and_fit_settings():
    data = rotation_data()
    model_file = fitted(data=data)
    page = build_report([("m.dynid", model_file)], [], data,
                        command_line="dynid report m.dynid --data d.csv -o r.html")
    check_page(page)
    section = page.split("<h2>Provenance</h2>")[1]
    assert "dynid report m.dynid --data d.csv -o r.html" in section
    assert f"<td>{__version__}</td>" in section
    digest = data.fingerprint()
    assert section.count(f'title="{digest}"') == 2  # the data read and the model's training data
    assert "ridge = 0" in section and ">cpu<" in section and ">0.1<" in section
    assert "not recorded" in section  # fit does not record its command line
    assert page.index("<h2>Provenance</h2>") > page.index("Model: m.dynid")  # last


def test_results_alone_get_no_provenance_and_python_callers_say_so():
    assert "Provenance" not in build_report([], [("x.json", {"kind": "fit", "model": "dmd"})])
    page = build_report([("m.dynid", fitted())], [])
    assert "none (built from Python)" in page


def test_cli_report_records_its_command_line(cli, linear_csv, tmp_path):
    model = tmp_path / "m.dynid"
    assert cli("fit", linear_csv, "--model", "dmd", "-o", model).returncode == 0
    report = tmp_path / "r.html"
    assert cli("report", model, "--data", linear_csv, "-o", report).returncode == 0
    page = report.read_text()
    assert f"dynid report {model} --data {linear_csv} -o {report}" in page
