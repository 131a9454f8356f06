"""The data overview section and the min/max decimation of long series."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np

from dynid.data.dataset import Dataset, Trial
from dynid.report import build_report
from dynid.report.overview import nan_segments
from dynid.report.svg import Series, line_plot, minmax_columns
from tests.test_report import SVG_XMLNS, check_page


def _path_points(svg: str) -> np.ndarray:
    """(k, 2) pixel points of the one line path in ``svg``."""
    d = ET.fromstring(svg).find(f"{{{SVG_XMLNS}}}path").get("d")
    return np.array([[float(v) for v in p.split()] for p in re.split(r"[ML]", d) if p.strip()])


def test_minmax_columns_keeps_every_extreme_of_each_column():
    rng = np.random.default_rng(0)
    px = np.sort(rng.uniform(0, 50, 10_000))
    y = rng.normal(size=px.size)
    y[1234] = np.nan
    keep = minmax_columns(px, y)
    assert np.all(np.diff(keep) > 0) and keep.size <= 5 * 50
    columns = np.floor(px)
    for c in np.unique(columns):
        inside = np.flatnonzero(columns == c)
        kept = np.intersect1d(keep, inside)
        assert np.nanmin(y[inside]) == np.nanmin(y[kept])
        assert np.nanmax(y[inside]) == np.nanmax(y[kept])
        assert inside[0] in kept and inside[-1] in kept
    assert 1234 in keep  # the gap stays a gap


def test_a_single_spike_in_a_long_series_is_drawn():
    n = 200_001
    t = np.arange(n) * 0.01
    y = np.sin(t / 50)
    y[123_457] = 40.0  # one sample; a stride of 100 would skip it
    svg = line_plot([Series("y", t, y)])
    points = _path_points(svg)
    assert points.shape[0] < 3000  # small, yet...
    top = points[:, 1].min()
    frame_top = float(ET.fromstring(svg).find(f"{{{SVG_XMLNS}}}rect").get("y"))
    assert top < frame_top + 0.1 * 200  # ... the spike reaches the top of the plot
    assert len(svg) < 120_000


def _gappy_data() -> Dataset:
    t1 = np.arange(50) * 0.1
    x1 = np.column_stack([np.sin(t1), np.cos(t1)])
    x1[10:13, 0] = np.nan
    x1[49, 1] = np.nan
    t2 = np.cumsum(np.r_[0.0, np.where(np.arange(29) % 3 == 0, 0.3, 0.1)])
    x2 = np.column_stack([t2, -t2])
    return Dataset(
        trials=(Trial(t1, x1), Trial(t2, x2)), variables=("a", "b"), source="gappy.csv"
    )


def test_nan_segments_are_found_per_trial_and_column():
    segments = nan_segments(_gappy_data())
    assert [(s.trial, s.column, s.start, s.stop) for s in segments] == [
        (0, "a", 10, 13), (0, "b", 49, 50)]


def test_data_overview_shows_ranges_sampling_trials_gaps_and_every_series():
    data = _gappy_data()
    page = build_report([], [], data)
    svgs = check_page(page)
    titles = [svg.find(f"{{{SVG_XMLNS}}}title").text for svg in svgs]
    assert titles == ["Sampling steps", "a", "b"]  # irregular: a step histogram
    for heading in ("Ranges", "Sampling", "Trials", "Missing values", "Overview"):
        assert f"<h3>{heading}</h3>" in page
    assert "2 runs of missing values" in page
    assert "Irregular sampling: 78 steps from 0.1 to 0.3" in page
    # ranges skip NaN and count it: column a over both trials
    a = np.concatenate([data.trials[0].x[:, 0], data.trials[1].x[:, 0]])
    row = re.search(r"<tr><td>a</td>(.*?)</tr>", page).group(1)
    cells = re.findall(r">([^<]+)</td>", row)
    assert float(cells[1]) == float(f"{np.nanmax(a):.5g}") and cells[4] == "3"
    # both trials drawn in each overview plot
    assert "trial 0" in page and "trial 1" in page


def test_uniform_data_says_its_step_and_has_no_missing_values():
    data = Dataset.from_arrays(np.ones((20, 1)), dt=0.5, variables=["v"])
    page = build_report([], [], data)
    check_page(page)
    assert "Uniform step dt = 0.5 in every trial (19 steps)." in page
    assert "No missing values." in page
