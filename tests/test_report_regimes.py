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
from tests.test_rnn_states import (  # noqa: E402
    N_SAMPLES, WARMUP, known_alrnn, model_and_record, region_numbers,
)


def band_tips(svgs) -> list[list[str]]:
    """The tooltips of the subregion bands of each of the page's figures that has some."""
    rect, title = f"{{{SVG_XMLNS}}}rect", f"{{{SVG_XMLNS}}}title"
    tips = [[r.findtext(title) for r in svg.iter(rect)
             if (r.findtext(title) or "").startswith("subregion ")] for svg in svgs]
    return [found for found in tips if found]


def shares(codes: np.ndarray) -> str:
    """The caption's words on the time in each subregion of ``codes``."""
    return ", ".join(f"{code:02b}: {np.mean(codes == code):.0%}" for code in np.unique(codes))


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
    tips = band_tips(svgs)[0]
    assert tips == [f"subregion {code:02b}: t = {lo:g} to {hi:g}" for lo, hi, code in expected]
    # The names are the symbolic coding's: the same sequence of codes.
    coding = symbolic_coding((z[WARMUP:, 2:] > 0).astype(float))
    assert [tip.split()[1].rstrip(":") for tip in tips] == [run.split("*")[0] for run in coding.split()]
    assert f"{len(expected)} runs; time in each subregion {shares(truth[WARMUP:])}" in page
    assert f"the first {WARMUP} sample(s) have none" in page


def test_the_subregions_of_score_s_free_run_are_those_of_the_generating_map():
    """Below the data's band, the subregions of the free run score scores (10,000 steps from
    the first warmup + 1 samples): its first steps drawn, as many as the record has after the
    run's start, and the time in each over the whole run, against the generating map run on in
    float64 from the record."""
    model, data, z = model_and_record()
    page = build_report([("m.dynid", ModelFile(model, describe_fit(
        model, data, seed=0, device="cpu", fit_seconds=0.1)))], [], data)
    history, steps = WARMUP + 1, 10_000
    weights = known_alrnn()
    latents = np.vstack([z, np.zeros((history + steps - N_SAMPLES, 4))])
    for k in range(N_SAMPLES - 1, history + steps - 1):
        phi = np.concatenate([latents[k, :2], np.maximum(latents[k, 2:], 0.0)])
        latents[k + 1] = weights["A"] * latents[k] + weights["W"] @ phi + weights["h"]
    truth = region_numbers(latents[history:])  # of steps 1..10,000
    assert np.min(np.abs(latents[history:, 2:])) > 1e-4  # no step on a border: sharp codes
    shown = N_SAMPLES - history
    t = data.trials[0].t[history:]
    expected = runs_of(t, truth[:shown])
    assert band_tips(check_page(page))[1] == [
        f"subregion {code:02b}: t = {lo:g} to {hi:g}" for lo, hi, code in expected]
    whole = runs_of(np.arange(steps, dtype=float), truth)
    assert (f"The first {shown:,} steps (the trial&#x27;s length after its start) of the free run "
            "dynid score scores: 10,000 steps from the first 26 sample(s)") in page
    assert f"over all its 10,000 steps: {len(whole)} runs; time in each subregion {shares(truth)}." in page


def test_a_driven_run_s_subregions_follow_its_inputs():
    """With inputs, score's run is driven by the first trial's own inputs (as far as they go):
    it retraces the record, so its subregions are the generating latents'."""
    model, data, z = model_and_record(inputs=True)
    page = build_report([("m.dynid", ModelFile(model, describe_fit(
        model, data, seed=0, device="cpu", fit_seconds=0.1)))], [], data)
    history = WARMUP + 1
    truth = region_numbers(z[history:])
    expected = runs_of(data.trials[0].t[history:], truth)
    assert band_tips(check_page(page))[1] == [
        f"subregion {code:02b}: t = {lo:g} to {hi:g}" for lo, hi, code in expected]


def test_a_diverging_run_s_subregions_stop_where_it_diverges():
    """A free run that leaves the training range (the observed rotation grown 10 % a step)
    has subregions only up to there: the caption says how many steps, and where it diverges,
    as the other figures of that run do."""
    from dynid.api import score_free_run

    model, data, _ = model_and_record()
    with torch.no_grad():
        model.cell_.W[:2, :2] *= 1.1
    model.data_range_ = data.value_range()  # as a fit records it: the escape check's range
    run = score_free_run(model, data)
    assert run.escaped and 2 < run.diverged_at < N_SAMPLES - WARMUP - 1
    page = build_report([("m.dynid", ModelFile(model, describe_fit(
        model, data, seed=0, device="cpu", fit_seconds=0.1)))], [], data)
    check_page(page)
    finite = run.diverged_at - 1
    assert f"The first {finite:,} steps (up to where it diverges) of the free run" in page
    assert f"over all its {finite:,} steps before it diverges: " in page
    assert f"The free run diverges at step {run.diverged_at} " in page.split("Linear subregions")[1]


def test_state_runs_skip_samples_without_a_state():
    t = np.arange(7.0)
    state = np.array([np.nan, np.nan, 2, 2, 3, np.nan, 3])
    assert state_runs(t, state) == [(2.0, 4.0, 2), (4.0, 5.0, 3), (6.0, 6.0, 3)]
