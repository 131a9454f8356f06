"""Reports of the sample data, made through the CLI as a user would: structure checks (well
formed, no external reference, every expected section, size budget) and, where Debian's chromium
is installed, a real headless browser that must render them without a console error."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
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
    "symbolic": ["Data: ", "Model: sym.dynid (symbolic)", "Provenance"],
    "interactive": ["Data: ", "Model: vdp.dynid (sindy)", "Provenance"],
}
INTERACTIVE = {"interactive"}


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
    _dynid(work, "symbolic", lorenz, "--format", "json", "-o", "symbolic.json",
           "--save-model", "sym.dynid")
    _dynid(work, "report", "sym.dynid", "--data", lorenz, "-o", "symbolic.html")
    _dynid(work, "report", "causal.json", "symbolic.json", "-o", "results.html")
    _dynid(work, "fit", vdp, "--model", "sindy", "-o", "vdp.dynid", "--seed", "0")
    _dynid(work, "report", "vdp.dynid", "--data", vdp, "-o", "vanderpol.html")
    _dynid(work, "report", "vdp.dynid", "--data", vdp, "--interactive", "-o", "interactive.html")
    _dynid(work, "fit", forced, "--model", "dmd", "--inputs", "u", "-o", "forced.dynid")
    _dynid(work, "report", "forced.dynid", "--data", forced, "-o", "forced.html")
    return {name: work / f"{name}.html" for name in EXPECTED}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sample_report_structure(sample_reports, name):
    page = sample_reports[name].read_text(encoding="utf-8")
    # balanced, no script (but the --interactive one), no URL but the SVG namespace
    check_page(page, interactive=name in INTERACTIVE)
    lowered = page.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:|//)""", lowered)
    assert "@import" not in lowered and "<link" not in lowered
    # url() only to a fragment of the page itself (the causal graph's arrowhead marker)
    assert not re.search(r"""url\(\s*["']?(?!#)""", lowered)
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
    for heading in ("Error against horizon", "Power spectra"):
        assert f"<h3>{heading}</h3>" in page and f"<h3>{heading}</h3>" in vdp


def test_symbolic_reports_typeset_and_plot_instead_of_dumping(sample_reports):
    for name in ("symbolic", "results"):
        page = sample_reports[name].read_text(encoding="utf-8")
        assert page.count('<math display="block"') == 3  # dx/dt, dy/dt, dz/dt
        assert "95% interval" in page and "inclusion probability" in page
        assert 'aria-label="Pareto front"' in page
        assert "<pre>" not in page and "{variable:" not in page
    page = sample_reports["symbolic"].read_text(encoding="utf-8")
    assert "<h3>Free run of the equations</h3>" in page


# -- a real browser ----------------------------------------------------------------------------------
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
# Added to a copy of the report (never to the report itself): after load, writes every SVG's
# rendered size into the DOM that --dump-dom prints.
PROBE = (
    "<script>addEventListener('load',()=>{const p=document.createElement('pre');p.id='probe';"
    "p.textContent=JSON.stringify([...document.querySelectorAll('svg')].map(s=>{"
    "const r=s.getBoundingClientRect();return [r.width,r.height]}));document.body.append(p)})"
    "</script>"
)
CONSOLE_LINE = re.compile(r":CONSOLE\(\d+\)\]|Uncaught|Failed to load resource")


def _chromium(profile: Path, *args: str) -> subprocess.CompletedProcess:
    """Headless chromium with the network blocked (every host unresolvable, a dead proxy) and
    console messages logged to stderr."""
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-extensions", "--disable-background-networking", "--disable-sync",
         f"--user-data-dir={profile}", "--host-resolver-rules=MAP * ~NOTFOUND",
         "--proxy-server=http://127.0.0.1:9", "--enable-logging=stderr", "--v=0",
         "--virtual-time-budget=5000", *args],
        capture_output=True, text=True, timeout=180, check=False,
    )


def _render(page: Path, profile: Path) -> tuple[list[list[float]], list[str]]:
    """(rendered [width, height] of every SVG, console lines) of ``page`` in chromium."""
    probed = page.with_name(page.stem + ".probe.html")
    probed.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"),
                      encoding="utf-8")
    result = _chromium(profile, "--dump-dom", probed.as_uri())
    assert result.returncode == 0, result.stderr[-2000:]
    match = re.search(r'<pre id="probe">(.*?)</pre>', result.stdout, flags=re.S)
    assert match, "the page did not finish loading"
    console = [line for line in result.stderr.splitlines() if CONSOLE_LINE.search(line)]
    return json.loads(html.unescape(match.group(1))), console


def _artifacts(tmp_path_factory) -> Path:
    """Where screenshots are kept: $DYNID_TEST_ARTIFACTS when set, else pytest's tmp dir."""
    root = os.environ.get("DYNID_TEST_ARTIFACTS")
    path = Path(root) / "report-screenshots" if root else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@needs_chromium
def test_the_probe_catches_console_errors(tmp_path):
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><body><svg width='10' height='10'></svg>"
                    "<script>notDefined()</script></body></html>")
    sizes, console = _render(page, tmp_path / "profile")
    assert sizes == [[10, 10]] and any("notDefined" in line for line in console)


@needs_chromium
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sample_report_renders_in_chromium(sample_reports, name, tmp_path, tmp_path_factory):
    page = sample_reports[name]
    sizes, console = _render(page, tmp_path / "profile")
    assert console == [], "\n".join(console)
    n_svg = page.read_text(encoding="utf-8").count("<svg ")
    assert len(sizes) == n_svg and n_svg > 0
    assert all(w > 0 and h > 0 for w, h in sizes), sizes
    shots = _artifacts(tmp_path_factory)
    for scheme, flags in (("light", []), ("dark", ["--force-dark-mode",
                                                    "--blink-settings=preferredColorScheme=0"])):
        shot = shots / f"{name}-{scheme}.png"
        result = _chromium(tmp_path / f"profile-{scheme}", *flags, "--hide-scrollbars",
                           "--window-size=1280,2400", f"--screenshot={shot}", page.as_uri())
        assert result.returncode == 0 and shot.stat().st_size > 10_000, result.stderr[-2000:]


# Added to a copy of the --interactive report: hovers over the middle of the first framed
# figure, then zooms in with the wheel, and writes the read-out and the viewBoxes into the DOM.
INTERACTION_PROBE = (
    "<script>addEventListener('load',()=>{const s=document.querySelector('svg[data-frame]');"
    "const r=s.getBoundingClientRect(),f=s.dataset.frame.split(' ').map(Number);"
    "s.dispatchEvent(new MouseEvent('mousemove',{clientX:r.left+(f[0]+f[1])/2,"
    "clientY:r.top+(f[4]+f[5])/2,bubbles:true}));const tip=document.querySelector('.tip'),"
    "before=s.getAttribute('viewBox');s.dispatchEvent(new WheelEvent('wheel',{deltaY:-100,"
    "clientX:r.left+f[0]+5,clientY:r.top+f[5]+5,bubbles:true,cancelable:true}));"
    "const p=document.createElement('pre');p.id='probe';p.textContent=JSON.stringify("
    "[tip.hidden,tip.textContent,before,s.getAttribute('viewBox'),f]);document.body.append(p)})"
    "</script>"
)


@needs_chromium
def test_interactive_report_reads_out_and_zooms_in_chromium(sample_reports, tmp_path):
    page = sample_reports["interactive"]
    probed = tmp_path / "interactive.probe.html"
    probed.write_text(page.read_text(encoding="utf-8").replace("</body>", INTERACTION_PROBE + "</body>"),
                      encoding="utf-8")
    result = _chromium(tmp_path / "profile", "--dump-dom", probed.as_uri())
    assert result.returncode == 0, result.stderr[-2000:]
    assert [line for line in result.stderr.splitlines() if CONSOLE_LINE.search(line)] == []
    match = re.search(r'<pre id="probe">(.*?)</pre>', result.stdout, flags=re.S)
    assert match, "the page did not finish loading"
    hidden, text, before, after, frame = json.loads(html.unescape(match.group(1)))
    # the read-out at the plot's centre is the middle of both axis ranges, to within the 1.5
    # pixels that whole-pixel event coordinates and the page's offsets allow
    x, y = (float(v) for v in text.split(", "))
    x_per_px = abs(frame[3] - frame[2]) / abs(frame[1] - frame[0])
    y_per_px = abs(frame[7] - frame[6]) / abs(frame[4] - frame[5])
    assert not hidden and abs(x - (frame[2] + frame[3]) / 2) <= 1.5 * x_per_px
    assert abs(y - (frame[6] + frame[7]) / 2) <= 1.5 * y_per_px
    width, zoomed = float(before.split()[2]), float(after.split()[2])
    assert abs(zoomed - 0.8 * width) < 1e-6 * width  # one wheel step in: 80% of the view
