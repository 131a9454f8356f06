"""The HTML report: well-formed, offline, escaped, and robust to failing parts."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from html.parser import HTMLParser

import numpy as np
import pytest

from dynid.data.dataset import Dataset, Trial
from dynid.errors import DataError, UsageError
from dynid.modelfile import ModelFile, describe_fit
from dynid.models.base import Backend, Capabilities, Hyperparameters, expect_array, param
from dynid.report import build_report
from dynid.report.html import flatten
from dynid.report.sections import result_kind
from dynid.report.svg import Series, fmt, heatmap, line_plot, nice_ticks, tick_labels
from dynid.report.template import INTERACTIVE_JS

SVG_XMLNS = "http://www.w3.org/2000/svg"


# -- a tiny backend: x_{k+1} = A x_k --------------------------------------------------------------
@dataclass(frozen=True)
class LinearParams(Hyperparameters):
    ridge: float = param(0.0, "ridge penalty on A")


class LinearMap(Backend):
    name = "test-linear"
    summary = "x[k+1] = A x[k] by least squares"
    Params = LinearParams

    def _fit(self, data, *, seed, device, progress):
        past = np.vstack([t.x[:-1] for t in data.trials])
        nxt = np.vstack([t.x[1:] for t in data.trials])
        gram = past.T @ past + self.params.ridge * np.eye(past.shape[1])
        self.A_ = np.linalg.solve(gram, past.T @ nxt).T
        residual = nxt - past @ self.A_.T
        self.metrics_ = {
            "rmse": float(np.sqrt(np.mean(residual**2))),
            "per_variable": {"rmse": np.sqrt(np.mean(residual**2, axis=0)).tolist()},
            "residual_trace": list(range(30)),
        }

    def _simulate(self, history, steps, future_inputs):
        x = history.x[-1]
        out = []
        for _ in range(steps):
            x = self.A_ @ x
            out.append(x)
        return np.array(out)

    def arrays(self):
        return {"A": self.A_}

    def _load_arrays(self, arrays):
        d = len(self.variables_)
        self.A_ = expect_array(arrays, "A", (d, d))

    def eigenvalues(self):
        return np.linalg.eigvals(self.A_)

    def equations(self):
        return [
            (f"{v}[k+1]", " + ".join(f"{a:.4g}*{w}[k]" for a, w in zip(row, self.variables_)))
            for v, row in zip(self.variables_, self.A_)
        ]


class Diverging(LinearMap):
    def _simulate(self, history, steps, future_inputs):
        raise DataError("the rollout diverged <fast> & far")


def rotation_data(variables=("x", "y"), n=120) -> Dataset:
    angle = 0.2
    a = 0.99 * np.array([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])
    x = np.empty((n, 2))
    x[0] = [1.0, 0.0]
    for k in range(1, n):
        x[k] = a @ x[k - 1]
    return Dataset.from_arrays(x, dt=0.1, variables=list(variables))


def fitted(cls=LinearMap, data=None) -> ModelFile:
    data = data or rotation_data()
    model = cls().fit(data, seed=0)
    return ModelFile(model, describe_fit(model, data, seed=0, device="cpu", fit_seconds=0.1))


CAUSAL = {
    "variables": ["x", "y", "z<1>"],
    "method": "granger",
    "max_lag": 2,
    "alpha": 0.05,
    "edges": [
        {"source": "x", "target": "y", "lag": 1, "strength": 0.8, "p_value": 0.02, "significant": True},
        {"source": "z<1>", "target": "x", "lag": 2, "strength": -0.4, "p_value": 0.0007, "significant": True},
        {"source": "y", "target": "x", "lag": 1, "strength": 0.01, "p_value": 0.9, "significant": False},
    ],
    "score_matrix": [[0, 3.2, 0], [0.1, 0, 0], [5.0, 0, 0]],
    "adjacency": [[0, 1, 0], [0, 0, 0], [1, 0, 0]],
}

SYMBOLIC = {
    "variables": ["x", "y"],
    "inputs": [],
    "symbols": {"x": "x", "y": "y"},
    "equations": [
        {
            "lhs": "x",
            "rhs": "-10.0*x + 10.0*y",
            "terms": [
                {"term": "x", "coefficient": -10.0, "inclusion_probability": 0.98, "interval": [-10.4, -9.6]},
                {"term": "y", "coefficient": 10.0, "inclusion_probability": 0.97, "interval": [9.5, 10.3]},
            ],
        }
    ],
    "metrics": {"r2": 0.999, "per_equation": {"x": {"rmse": 0.0123456}}},
}


# -- checking helpers ------------------------------------------------------------------------------
class _Balance(HTMLParser):
    """Records every element that is closed out of order or left open."""

    VOID = {"meta", "br", "link", "img", "hr", "input", "wbr", "source", "col", "area", "base"}

    def __init__(self):
        super().__init__()
        self.stack: list[str] = []
        self.problems: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()


def check_page(page: str, *, interactive: bool = False) -> list[ET.Element]:
    """Assert the page is balanced, offline and script-free (``interactive``: its one script is
    dynid's own, once); return its parsed SVGs."""
    parser = _Balance()
    parser.feed(page)
    parser.close()
    assert parser.problems == [] and parser.stack == []
    assert page.startswith("<!DOCTYPE html>")
    if interactive:
        assert re.findall(r"<script>(.*?)</script>", page, flags=re.S) == [f"\n{INTERACTIVE_JS}\n"]
    else:
        assert "<script" not in page.lower()
    assert set(re.findall(r"https?://[^\s\"'<>]*", page)) <= {SVG_XMLNS}
    svgs = re.findall(r"<svg\b.*?</svg>", page, flags=re.S)
    return [ET.fromstring(svg) for svg in svgs]


# -- the report ------------------------------------------------------------------------------------
def test_full_report_is_well_formed_offline_and_complete():
    data = rotation_data()
    page = build_report(
        [("runs/rot.dynid", fitted(data=data))],
        [("causal.json", CAUSAL), ("symbolic.json", SYMBOLIC)],
        data,
        title="Rotation <study>",
    )
    svgs = check_page(page)
    # data overview x and y, eigenvalues, forecast x and y, phase portrait, residuals and their
    # autocorrelation, free run of the equations x and y, error against horizon, power spectra
    # x and y, causal node-link graph and heat-map
    assert len(svgs) == 15
    assert "Rotation &lt;study&gt;" in page and "Rotation <study>" not in page
    assert "dynid 0.1.0" in page and "UTC" in page
    assert 'href="#s1"' in page and 'id="s4"' in page  # table of contents
    # model section: metadata, metrics, equations, eigenvalues, forecast
    assert "test-linear" in page and "ridge = 0" in page
    fingerprint = data.fingerprint()
    assert f'title="{fingerprint}"' in page and f">{fingerprint[:12]}\u2026<" in page
    assert "per_variable.rmse" in page and "(30 values)" in page
    assert "x[k+1] = " in page
    assert 'aria-label="Eigenvalues"' in page and "unit circle" in page and "all decay" in page
    assert "forecast RMSE over 30 steps" in page  # 120 // 4
    # causal and symbolic results
    assert "z&lt;1&gt;" in page and "z<1>" not in page
    assert page.index("0.0007") < page.index("0.02")  # sorted by p-value
    assert ("<mfrac><mrow><mi>d</mi><mi>x</mi></mrow><mrow><mi>d</mi><mi>t</mi></mrow></mfrac>"
            "<mo>=</mo><mo>\u2212</mo><mn>10</mn><mo>&#x2062;</mo><mi>x</mi><mo>+</mo><mn>10</mn>"
            "<mo>&#x2062;</mo><mi>y</mi>") in page
    assert "<th scope=\"col\">inclusion probability</th>" in page and "[-10.4, -9.6]" in page


def test_forecast_plot_shows_data_and_forecast_for_each_variable():
    page = build_report([("m.dynid", fitted())], [], rotation_data(), horizon=10)
    titles = [svg.find(f"{{{SVG_XMLNS}}}title").text for svg in check_page(page)]
    assert titles[:5] == ["x", "y", "Eigenvalues", "x", "y"]  # data overview first
    assert "forecast RMSE over 10 steps" in page
    # A near-exact linear model forecasts its own data almost perfectly.
    rmse = re.findall(r'<td class="num">([^<]+)</td>', page.split("forecast RMSE")[1].split("</table>")[0])
    assert all(float(v) < 1e-6 for v in rmse)


def test_names_from_data_are_escaped_everywhere():
    data = rotation_data(variables=("a<b", "c&d"))
    page = build_report([("m<1>.dynid", fitted(data=data))], [], data)
    check_page(page)
    assert "a&lt;b" in page and "c&amp;d" in page and "m&lt;1&gt;.dynid" in page
    assert "a<b" not in page and "c&d" not in page


def test_failing_simulation_shows_its_message_and_keeps_the_report():
    data = rotation_data()
    page = build_report(
        [("bad.dynid", fitted(Diverging, data)), ("good.dynid", fitted(data=data))], [], data
    )
    check_page(page)
    assert "the rollout diverged &lt;fast&gt; &amp; far" in page
    assert page.count("forecast RMSE") == 1  # the good model still forecasts


def test_forecast_needs_matching_variables_and_enough_history():
    model = fitted()
    page = build_report([("m.dynid", model)], [], rotation_data(variables=("p", "q")))
    assert "No forecast: the data&#x27;s variables (p, q) differ" in page
    short = Dataset.from_arrays(np.ones((1, 2)), variables=["x", "y"])
    page = build_report([("m.dynid", model)], [], short)
    assert "No forecast: the last trial has 1 samples" in page
    # a horizon longer than the trial keeps the model's history
    page = build_report([("m.dynid", model)], [], rotation_data(n=12), horizon=500)
    assert "forecast RMSE over 11 steps" in page
    with pytest.raises(UsageError):
        build_report([], [], horizon=0)


def test_result_kinds_and_unknown_documents():
    score = {"horizon": 5, "starts": 3, "rmse": 0.5, "nrmse": 0.1, "valid_prediction_time": 1.25,
             "rmse_per_step": [0.1, 0.2, 0.3, 0.4, 0.5], "rmse_per_variable": {"x": 0.4}, "dt": 0.1}
    fit = {"model_path": "m.dynid", "model": "dmd", "metrics": {"rmse": 0.01}}
    odd = {"whatever": [1, {"nested": "<b>"}], "n": 3}
    broken_causal = {"edges": "not a list", "adjacency": [[0]], "variables": ["x", "y"]}
    assert [result_kind(d) for d in (CAUSAL, SYMBOLIC, score, fit, odd, [1, 2])] == [
        "causal", "symbolic", "score", "fit", "generic", "generic"]
    page = build_report([], [("s.json", score), ("f.json", fit), ("o.json", odd),
                             ("l.json", [1, 2]), ("c.json", broken_causal)])
    svgs = check_page(page)
    assert len(svgs) == 1  # RMSE by lead time
    assert "Forecast score: s.json" in page and "rmse_per_variable.x" in page
    assert "Fit summary: f.json" in page and "metrics.rmse" in page
    assert "[1, {nested: &lt;b&gt;}]" in page and "<pre>" not in page  # a table, escaped
    assert "c.json looks like a causal discovery result but could not be read" in page


def test_an_interactive_report_inlines_its_script_once_and_marks_every_framed_figure():
    data = rotation_data()
    page = build_report([("m.dynid", fitted(data=data))], [], data, interactive=True)
    svgs = check_page(page, interactive=True)
    framed = [svg for svg in svgs if svg.get("data-frame")]
    assert framed and len(framed) == len(svgs)  # every figure here has axes
    assert page.index("<script>") > page.index("</main>")  # after the figures it works on
    # the frame maps pixels to data: the plot area's edges and the axis ranges at them
    root = ET.fromstring(line_plot([Series("a", np.array([0.0, 10.0]), np.array([-1.0, 1.0]))]))
    x0, x1, xlo, xhi, y0, y1, ylo, yhi = map(float, root.get("data-frame").split())
    assert (xlo, xhi, ylo, yhi) == (0, 10, -1, 1) and x0 < x1 <= 640 and y1 < y0 <= 260
    assert "<script" not in build_report([("m.dynid", fitted(data=data))], [], data)


def test_empty_report_still_renders():
    page = build_report([], [])
    check_page(page)
    assert "Nothing to report" in page


# -- figures and formatting ------------------------------------------------------------------------
def test_ticks_are_nice_and_cover_the_range():
    assert nice_ticks(0, 9.7) == [0, 2, 4, 6, 8, 10]
    assert nice_ticks(-0.03, 0.27) == [-0.1, 0, 0.1, 0.2, 0.3]
    assert nice_ticks(1.02, 1.09) == [1.02, 1.04, 1.06, 1.08, 1.1]
    rng = np.random.default_rng(0)
    for _ in range(300):
        lo, hi = np.sort(rng.normal(0, 10.0 ** rng.integers(-6, 7), 2))
        ticks = nice_ticks(lo, hi)
        steps = np.diff(ticks)
        assert ticks[0] <= lo and ticks[-1] >= hi and 3 <= len(ticks) <= 11
        assert np.allclose(steps, steps[0], rtol=1e-6)
        mantissa = steps[0] / 10.0 ** math.floor(math.log10(steps[0]) + 1e-12)
        assert min(abs(mantissa - m) for m in (1, 2, 5)) < 1e-6
    assert tick_labels(nice_ticks(0, 9.7)) == ["0", "2", "4", "6", "8", "10"]
    assert tick_labels(nice_ticks(1.7e9, 1.7e9 + 90)) == [
        "1700000000", "1700000020", "1700000040", "1700000060", "1700000080", "1700000100"]
    assert tick_labels([-1e-5, 0.0, 1e-5]) == ["-1e-05", "0", "1e-05"]
    assert tick_labels([0.0, 100.0, 200.0, 300.0]) == ["0", "100", "200", "300"]
    assert len(nice_ticks(3, 3)) >= 2 and nice_ticks(math.nan, math.inf) == nice_ticks(0, 1)


def test_line_plot_is_nan_safe_valid_xml():
    x = np.arange(10.0)
    y = np.array([0, 1, np.nan, 3, 4, np.inf, 6, np.nan, 8, 9.0])
    svg = line_plot([Series("a & b", x, y), Series("all nan", x, np.full(10, np.nan), dashed=True)],
                    title="t<1>", xlabel="time", ylabel="value")
    root = ET.fromstring(svg)
    paths = root.findall(f"{{{SVG_XMLNS}}}path")
    assert len(paths) == 1 and paths[0].get("d").count("M") == 3  # runs 0-1, 3-4 and 8-9
    assert len(root.findall(f"{{{SVG_XMLNS}}}circle")) == 1  # the isolated point at x=6
    texts = [t.text for t in root.iter(f"{{{SVG_XMLNS}}}text")]
    assert "a & b" in texts and "t<1>" in texts and "10" in texts


def test_heatmap_outlines_marked_cells():
    svg = heatmap(np.array([[0, 2.0], [np.nan, -1]]), ["a", "b"], ["a", "b"],
                  outline=np.array([[False, True], [False, False]]))
    cells = ET.fromstring(svg).findall(f"{{{SVG_XMLNS}}}rect")
    assert [c.get("stroke-width") for c in cells] == [None, "2", None, None]
    assert cells[2].get("fill") == "none"  # NaN


def test_fmt_and_flatten():
    assert fmt(0.123456789) == "0.12346" and fmt(3) == "3" and fmt(True) == "true"
    assert fmt(None) == "\u2014" and fmt(float("nan")) == "NaN"
    assert fmt({"real": 1.0, "imag": -2.0}) == "1 - 2i"
    # an R^2 of 0.9999997 is not a perfect fit, and must not read as one
    assert fmt(0.9999997) == "1 - 3e-07" and fmt(-1.0000002) == "-1 - 2e-07" and fmt(1.0) == "1"
    assert fmt(list(range(20))) == "[0, 1, 2, \u2026, 18, 19] (20 values)"
    assert flatten({"a": {"b": 1, "c": [1, 2]}, "z": {"real": 0, "imag": 1}}) == [
        ("a.b", 1), ("a.c", [1, 2]), ("z", {"real": 0, "imag": 1})]


def test_forecast_gets_the_history_and_the_held_out_inputs():
    seen = {}

    class Spy(LinearMap):
        capabilities = Capabilities(inputs=True)

        def _simulate(self, history: Trial, steps, future_inputs):
            if steps == 7:  # the forecast's call (phase portrait and residuals make others)
                seen.update(n=history.n_samples, steps=steps, future=future_inputs)
            return super()._simulate(history, steps, future_inputs)

    base = rotation_data(n=40)
    u = np.arange(40.0)
    data = Dataset.from_arrays(base.trials[0].x, u=u, dt=0.1, variables=["x", "y"], inputs=["u"])
    page = build_report([("m.dynid", fitted(Spy, data))], [], data, horizon=7)
    assert "with the data&#x27;s inputs" in page
    assert seen["n"] == 33 and seen["steps"] == 7
    np.testing.assert_array_equal(seen["future"], u[33:, None])
