"""The report's "Regimes over time" for an alrnn: the linear subregion of each sample, as
``dynid states`` numbers it and ``dynid info``'s symbolic coding names it, on a record an AL-RNN
with known weights generated (``test_rnn_states``), so the subregions are known."""

from __future__ import annotations

import numpy as np
import pytest

from dynid.modelfile import ModelFile, describe_fit
from dynid.report import build_report
from dynid.report.regimes import state_runs
from tests.test_report import SVG_XMLNS, check_page

torch = pytest.importorskip("torch")

from dynid.models.rnn.alrnn import symbolic_coding  # noqa: E402
from tests.test_rnn_states import WARMUP, model_and_record, region_numbers  # noqa: E402


def band_tips(svgs) -> list[str]:
    """The tooltips of the subregion bands of the page's figures."""
    rect, title = f"{{{SVG_XMLNS}}}rect", f"{{{SVG_XMLNS}}}title"
    return [r.findtext(title) for svg in svgs for r in svg.iter(rect)
            if (r.findtext(title) or "").startswith("subregion ")]


def runs_of(t: np.ndarray, codes: np.ndarray) -> list[tuple[float, float, int]]:
    """(from, to, code) of each maximal run of ``codes``, reaching to the next run's start."""
    runs = []
    for k, code in enumerate(codes.tolist()):
        if runs and runs[-1][2] == code:
            continue
        if runs:
            runs[-1][1] = float(t[k])
        runs.append([float(t[k]), float(t[-1]), code])
    return [tuple(run) for run in runs]


def test_an_alrnn_report_draws_the_linear_subregions_of_the_data():
    """Only hmm-like models (--labels capable) had the part; an alrnn now gets the band of its
    subregions over the last trial of --data, named by the code info's symbolic coding writes
    ("10": the first piecewise-linear unit on, the second off)."""
    model, data, z = model_and_record()
    page = build_report([("m.dynid", ModelFile(model, describe_fit(
        model, data, seed=0, device="cpu", fit_seconds=0.1)))], [], data)
    svgs = check_page(page)
    assert "<h3>Linear subregions over time</h3>" in page
    t, truth = data.trials[0].t, region_numbers(z)  # the generating latents' subregions
    expected = runs_of(t[WARMUP:], truth[WARMUP:])
    assert len(expected) > 3  # the record crosses subregions
    tips = band_tips(svgs)
    assert tips == [f"subregion {code:02b}: t = {lo:g} to {hi:g}" for lo, hi, code in expected]
    # The names are the symbolic coding's: the same sequence of codes.
    coding = symbolic_coding((z[WARMUP:, 2:] > 0).astype(float))
    assert [tip.split()[1].rstrip(":") for tip in tips] == [run.split("*")[0] for run in coding.split()]
    shares = {code: np.mean(truth[WARMUP:] == code) for code in np.unique(truth[WARMUP:])}
    caption = ", ".join(f"{code:02b}: {share:.0%}" for code, share in sorted(shares.items()))
    assert f"{len(expected)} runs; time in each subregion {caption}" in page
    assert f"the first {WARMUP} sample(s) have none" in page


def test_state_runs_skip_samples_without_a_state():
    t = np.arange(7.0)
    state = np.array([np.nan, np.nan, 2, 2, 3, np.nan, 3])
    assert state_runs(t, state) == [(2.0, 4.0, 2), (4.0, 5.0, 3), (6.0, 6.0, 3)]
