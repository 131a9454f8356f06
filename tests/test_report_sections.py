"""The report's section registry: a backend or result kind adds its section by one registration."""

from __future__ import annotations

import pytest

from dynid.report import build_report, sections
from tests.test_report import check_page, fitted


@pytest.fixture
def registries(monkeypatch):
    """Registrations made in a test stay in the test."""
    monkeypatch.setattr(sections, "MODEL_PARTS", list(sections.MODEL_PARTS))
    monkeypatch.setattr(sections, "RESULT_RENDERERS", dict(sections.RESULT_RENDERERS))


def test_builtin_parts_are_registered_in_order():
    headings = [part.render.__name__ for part in sections.MODEL_PARTS]
    assert headings[:5] == ["_metadata", "_fit_metrics", "_equations", "_eigenvalues", "_forecast"]
    assert {"causal", "symbolic", "score", "fit", "info", "generic"} <= set(sections.RESULT_RENDERERS)


def test_a_model_part_shows_only_where_its_capability_applies(registries):
    @sections.model_part("Spin <check>", applies=lambda ctx: ctx.model.n_variables == 2)
    def _spin(ctx):
        return f"<p>spin of {len(ctx.model.variables_)} variables</p>"

    page = build_report([("m.dynid", fitted())], [])
    check_page(page)
    assert "<h3>Spin &lt;check&gt;</h3>" in page and "spin of 2 variables" in page
    # after the built-in parts, in registration order
    assert page.index("Eigenvalues") < page.index("Spin &lt;check&gt;")

    sections.MODEL_PARTS[-1] = sections.ModelPart(
        lambda ctx: "Spin", _spin, lambda ctx: ctx.model.n_variables == 3
    )
    page = build_report([("m.dynid", fitted())], [])
    assert "spin of" not in page


def test_a_part_that_has_nothing_to_show_leaves_no_heading(registries):
    sections.model_part("Nothing here")(lambda ctx: None)
    page = build_report([("m.dynid", fitted())], [])
    assert "Nothing here" not in page


def test_a_result_kind_gets_its_renderer_and_kinds_register_once(registries):
    sections.result_renderer("forecast", "Forecast")(lambda doc: f"<p>{len(doc['t'])} times</p>")
    page = build_report([], [("f.json", {"kind": "forecast", "t": [0, 1, 2]})])
    assert "Forecast: f.json" in page and "<p>3 times</p>" in page
    with pytest.raises(ValueError, match="already registered"):
        sections.result_renderer("forecast", "Again")(lambda doc: "")
