"""Reports of the sample data, made through the CLI as a user would: structure checks (well
formed, no external reference, every expected section, size budget) and, where Debian's chromium
is installed, a real headless browser that must render them without a console error."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import run_cli_in_process
from tests.test_report import check_page

SAMPLES = Path(__file__).resolve().parent.parent / "sample_data"
SIZE_BUDGET = 2_000_000  # bytes, for a default report of the sample data
# Each report: the sections (h2 titles, as prefixes) it must have, in order.
EXPECTED = {
    "lorenz": ["Data: ", "Model comparison on ", "Model: sindy.dynid (sindy)",
               "Model: dmd.dynid (dmd)", "Provenance"],
    "results": ["Causal discovery: causal.json", "Symbolic regression: symbolic.json"],
    "vanderpol": ["Data: ", "Model: vdp.dynid (sindy)", "Provenance"],
    "forced": ["Data: ", "Model: forced.dynid (dmd)", "Provenance"],
}


def _dynid(workdir: Path, *args: object) -> None:
    result = run_cli_in_process(*args, cwd=workdir)
    assert result.returncode == 0, result.stderr


@pytest.fixture(scope="module")
def sample_reports(tmp_path_factory) -> dict[str, Path]:
    """name -> the HTML report written by ``dynid report`` for each kind of input."""
    work = tmp_path_factory.mktemp("reports")
    lorenz, var5 = SAMPLES / "lorenz.csv", SAMPLES / "var5.csv"
    vdp, forced = f"{SAMPLES / 'vanderpol_trials.h5'}:/trials", SAMPLES / "forced_oscillator.csv"
    _dynid(work, "fit", lorenz, "--model", "sindy", "-o", "sindy.dynid", "--seed", "0")
    _dynid(work, "fit", lorenz, "--model", "dmd", "-o", "dmd.dynid", "--seed", "0")
    _dynid(work, "report", "sindy.dynid", "dmd.dynid", "--data", lorenz, "-o", "lorenz.html")
    _dynid(work, "discover-causal", var5, "--max-lag", "2", "--format", "json", "-o", "causal.json")
    _dynid(work, "symbolic", lorenz, "--format", "json", "-o", "symbolic.json")
    _dynid(work, "report", "causal.json", "symbolic.json", "-o", "results.html")
    _dynid(work, "fit", vdp, "--model", "sindy", "-o", "vdp.dynid", "--seed", "0")
    _dynid(work, "report", "vdp.dynid", "--data", vdp, "-o", "vanderpol.html")
    _dynid(work, "fit", forced, "--model", "dmd", "--inputs", "u", "-o", "forced.dynid")
    _dynid(work, "report", "forced.dynid", "--data", forced, "-o", "forced.html")
    return {name: work / f"{name}.html" for name in EXPECTED}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sample_report_structure(sample_reports, name):
    page = sample_reports[name].read_text(encoding="utf-8")
    check_page(page)  # balanced, no script, no URL but the SVG namespace
    lowered = page.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:|//)""", lowered)
    assert "@import" not in lowered and "url(" not in lowered and "<link" not in lowered
    assert len(page.encode("utf-8")) < SIZE_BUDGET
    titles = re.findall(r"<h2>([^<]*)</h2>", page)[1:]  # after "Contents"
    positions = []
    for expected in EXPECTED[name]:
        found = [i for i, title in enumerate(titles) if title.startswith(expected)]
        assert found, f"{name}: no section {expected!r} in {titles}"
        positions.append(found[0])
    assert positions == sorted(positions)
    toc = re.findall(r'<li><a href="#(s\d+)">', page)
    assert toc == re.findall(r'<section id="(s\d+)">', page) and len(toc) == len(titles)


def test_model_reports_show_the_dynamics(sample_reports):
    page = sample_reports["lorenz"].read_text(encoding="utf-8")
    for heading in ("Phase portrait", "Residuals", "Eigenvalues", "Equations", "Ranges", "Overview"):
        assert f"<h3>{heading}</h3>" in page
    assert "Not held out" in page  # --data is the training data, and the report says so
    assert page.count('aria-label="z against y"') == 2  # one portrait per model
    vdp = sample_reports["vanderpol"].read_text(encoding="utf-8")
    assert "trial 2" in vdp  # all three trials drawn in the overview
