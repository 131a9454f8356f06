"""``--report PATH`` on fit, symbolic and discover-causal: the report ``dynid report`` would make
of the run's result on its data, written atomically; refused with --each in one line."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import run_cli_in_process
from tests.test_report import check_page

SAMPLES = Path(__file__).resolve().parent.parent / "sample_data"
LORENZ = SAMPLES / "lorenz.csv"


def _sections(page: str) -> list[str]:
    return re.findall(r"<h2>([^<]*)</h2>", page)[1:]


def _without_times(page: str) -> str:
    """The page less what differs between two runs (times, the command line)."""
    page = re.sub(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[^<]*", "TIME", page)
    page = re.sub(r"<th scope=\"row\">(build seconds|command line)</th><td[^>]*>[^<]*</td>", "", page)
    return page


def test_fit_report_is_the_report_of_its_model_file(tmp_path):
    result = run_cli_in_process("fit", LORENZ, "--model", "dmd", "-o", "m.dynid", "--seed", "0",
                                "--report", "fit.html", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert b"wrote fit.html" in result.stderr and result.stdout == b""
    page = (tmp_path / "fit.html").read_text(encoding="utf-8")
    check_page(page)
    assert [t.split(":")[0] for t in _sections(page)] == ["Data", "Model", "Provenance"]
    assert "--report fit.html" in page  # the command line, in the provenance
    again = run_cli_in_process("report", "m.dynid", "--data", LORENZ, "-o", "again.html", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert _without_times(page) == _without_times((tmp_path / "again.html").read_text(encoding="utf-8"))


def test_symbolic_report_shows_the_identified_model(tmp_path):
    data = tmp_path / "short.csv"
    data.write_text("".join(LORENZ.read_text().splitlines(keepends=True)[:401]))
    result = run_cli_in_process("symbolic", data, "-p", "ensemble=0", "--library", "poly2", "-o", "eq.txt",
                                "--report", "sym.html", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "sym.html").read_text(encoding="utf-8")
    check_page(page)
    assert _sections(page)[1] == "Model: model (not saved) (symbolic)"
    assert page.count('<math display="block"') == 3 and "<h3>Free run of the equations</h3>" in page


def test_causal_report_shows_the_graph(tmp_path):
    result = run_cli_in_process("discover-causal", SAMPLES / "var5.csv", "--max-lag", "2",
                                "--format", "json", "-o", "c.json", "--report", "c.html", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "c.html").read_text(encoding="utf-8")
    check_page(page)
    assert [t.split(":")[0] for t in _sections(page)] == ["Data", "Causal discovery", "Provenance"]


def test_report_with_each_is_refused_in_one_line(tmp_path):
    result = run_cli_in_process("fit", LORENZ, LORENZ, "--each", "--model", "dmd",
                                "-o", "{stem}.dynid", "--report", "r.html", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.count(b"\n") == 1 and b"--report" in result.stderr and b"--each" in result.stderr
    assert not (tmp_path / "r.html").exists() and not (tmp_path / "lorenz.dynid").exists()


def test_sindy_causal_report_shows_its_equations_typeset_and_escaped():
    """The equations the sindy links were read off, typeset as the symbolic pages do (not only
    counted as "equations (2 fields)"): names that are no symbols written as their symbols,
    which a note maps back, escaped."""
    import html

    from dynid import api
    from dynid.data.dataset import Dataset
    from dynid.report import build_report
    from dynid.systems import simulate

    sim = simulate("forced-oscillator", n=1000, seed=0)
    data = Dataset.from_arrays(sim.x, t=sim.t, u=sim.u, variables=["x <m>", "v&w"], inputs=["u"])
    document = api.causal_document(api.discover_causal(data, "sindy", seed=0))
    page = build_report([], [("c.json", document)])
    check_page(page)
    assert "<h3>Equations the links were read off</h3>" in page
    assert re.findall(r'<math display="block" alttext="([^"]*)"', page) == [
        "dx0/dt = x1", "dx1/dt = -4 x0 - 0.2 x1 + u"]
    assert "Symbols: x0 = x &lt;m&gt;, x1 = v&amp;w." in page
    assert "equations (2 fields)" not in page
    # A document of an older version, its right-hand sides in names sympy cannot read: plain lines.
    older = {**document, "equations": {"x <m>": "1*v&w"}, "symbols": None}
    page = build_report([], [("old.json", older)])
    check_page(page)
    assert html.escape("d(x <m>)/dt", quote=False) in page and "1*v&amp;w" in page
