"""Symbolic pages of the report: equations typeset as MathML, terms with intervals and inclusion
probabilities, the Pareto front as a figure, free runs of the equations, no raw dumps."""

from __future__ import annotations

import copy
import re

import numpy as np

from dynid.data.dataset import Dataset
from dynid.modelfile import ModelFile, describe_fit
from dynid.models import registry
from dynid.report import build_report
from dynid.report.symbolic import equation_mathml
from tests.test_report import SVG_XMLNS, SYMBOLIC, check_page

SYMBOLS = {"x": "x", "y": "y", "u": "u"}
DT_X = "<mfrac><mrow><mi>d</mi><mi>x</mi></mrow><mrow><mi>d</mi><mi>t</mi></mrow></mfrac>"


def _math(terms, *, discrete=False, symbols=SYMBOLS):
    equation = {"lhs": "x", "terms": [{"term": t, "coefficient": c} for t, c in terms]}
    return equation_mathml(equation, symbols, discrete)


def test_equations_are_typeset_with_their_left_side_and_signs():
    assert _math([("x", -2.5), ("x*y", 0.5)]) == (
        f'<math display="block" alttext="dx/dt = -2.5 x + 0.5 x y"><mrow>{DT_X}<mo>=</mo><mo>\u2212</mo><mn>2.5</mn>'
        "<mo>&#x2062;</mo><mi>x</mi><mo>+</mo><mn>0.5</mn><mo>&#x2062;</mo><mrow><mi>x</mi>"
        "<mo>&InvisibleTimes;</mo><mi>y</mi></mrow></mrow></math>")
    discrete = _math([("1", 3.0)], discrete=True)
    assert "<mi>x</mi><mo>[</mo><mi>k</mi><mo>+</mo><mn>1</mn><mo>]</mo><mo>=</mo><mn>3</mn></mrow>" in discrete
    assert "<mn>0</mn>" in _math([])
    # a sum as one term keeps its parentheses; a power is a superscript
    assert "<mo>(</mo><mrow><mi>x</mi><mo>-</mo><mi>y</mi></mrow><mo>)</mo>" in _math([("x - y", 1.0)])
    assert "<msup><mi>x</mi><mn>2</mn></msup>" in _math([("x**2", 1.0)])
    # a term sympy cannot read is shown as escaped text, not dropped
    assert "<mtext>x &lt;b&gt;!!</mtext>" in _math([("x <b>!!", 1.0)])


def test_a_symbolic_result_page_has_math_terms_and_a_pareto_front_and_no_dump():
    doc = copy.deepcopy(SYMBOLIC)
    doc["kind"] = "symbolic"
    doc["metrics"]["equations"] = [{
        "variable": "x", "library": "poly1", "criterion": -50.0, "validation_r2": 0.999,
        "pareto": [{"n_terms": 0, "validation_rmse": 3.0, "criterion": 10.0, "terms": []},
                   {"n_terms": 1, "validation_rmse": 1.0, "criterion": 2.0, "terms": ["x0"]},
                   {"n_terms": 2, "validation_rmse": 0.01, "criterion": -50.0,
                    "terms": ["x0", "x1"]}],
    }]
    page = build_report([], [("symbolic.json", doc)])
    svgs = check_page(page)
    assert "<pre>" not in page and "{variable:" not in page and "pareto" not in page.lower().replace("pareto front", "")
    assert page.count('<math display="block"') == 1
    header = re.search(r"<thead>(.*?)</thead>", page).group(1)
    assert re.findall(r">([^<]+)</th>", header) == [
        "equation", "term", "coefficient", "95% interval", "inclusion probability"]
    front = next(svg for svg in svgs if svg.find(f"{{{SVG_XMLNS}}}title").text == "Pareto front")
    path = front.find(f".//{{{SVG_XMLNS}}}path").get("d")
    assert path.count("L") == 2  # three sizes on one line
    radii = [c.get("r") for c in front.findall(f"{{{SVG_XMLNS}}}circle")]
    # three sizes; the chosen one large (over the small dot of a one-point line)
    assert sorted(radii) == ["2", "2.5", "2.5", "2.5", "6.0"]
    assert "Selection per equation" in page and "poly1" in page
    selection = page.split("Selection per equation")[1]
    assert re.findall(r'<th scope="col">([^<]+)</th>', selection)[:2] == ["variable", "library"]


def test_an_equation_model_file_shows_typeset_equations_and_their_free_run():
    t = np.arange(0, 10, 0.01)
    x = np.c_[np.exp(-0.1 * t) * np.cos(t), np.exp(-0.1 * t) * np.sin(t)]
    data = Dataset.from_arrays(x, dt=0.01, variables=["x", "y"])
    model = registry.get("sindy")().fit(data, seed=0)
    model_file = ModelFile(model, describe_fit(model, data, seed=0, device="cpu", fit_seconds=0.1))
    page = build_report([("sindy.dynid", model_file)], [], data)
    titles = [svg.find(f"{{{SVG_XMLNS}}}title").text for svg in check_page(page)]
    assert page.count('<math display="block"') == 2 and DT_X in page
    assert page.count("<h3>Equations</h3>") == 1 and "<pre>" not in page
    assert "<h3>Free run of the equations</h3>" in page
    assert "the first 999 steps (its length) of the free run dynid score scores: 10,000 steps" in page
    assert titles.count("x") >= 3  # overview, forecast, free run (and spectrum)
    # The equations' curve is the start of score's run, the one its D_stsp and D_H are of.
    from dynid.api import score_free_run
    from dynid.report.svg import Series, line_plot

    run = score_free_run(model, data).states[:999]
    trial = data.trials[0]
    drawn = line_plot([Series("data", trial.t, trial.x[:, 0]),
                       Series("equations", trial.t, np.r_[trial.x[0, 0], run[:, 0]], dashed=True)],
                      title="x", xlabel="t", width=420, height=220)
    assert drawn in page
