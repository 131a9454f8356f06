"""``--method dynamic``: how each link's strength changes through the recording.

Two estimators give a strength series ``strength[t, source, target]`` on a grid of times:

``windowed``
    The base method (any registered one, ``-p base=NAME``, run with its default options) on
    windows of ``window`` samples slid by ``step`` over each trial; a window's value is stamped
    at its centre. Measure ``strength``: the largest ``|strength|`` over the pair's lags (for
    Granger the absolute partial correlation, a scale-free effect size that does not grow with
    the window length the way ``-log10 p`` does); ``score``: the base's ``score_matrix``.
    A window the base cannot test (e.g. a variable constant within it) is NaN.

``perturbation`` (after UnCLe's dynamic read-out, Bi et al., NeurIPS 2025)
    One predictor for the whole recording; for every source ``j`` its lagged values are
    permuted in time within each trial (``repeats`` times, seeded by ``--seed``, averaged),
    and the increase in every target's squared one-step error is recorded per time point,
    divided by the target's mean squared error (so it is a relative increase, comparable
    across targets), Gaussian-smoothed with sigma ``smoothing`` samples and then clipped at 0.
    UnCLe clips each point before smoothing; that turns zero-mean noise into a positive floor
    on links that do not exist, so here the clip comes last. Predictors: ``var``, a VAR(max_lag)
    fitted by least squares to the whole recording; ``local_var``, VAR(max_lag) fits weighted
    by a Gaussian kernel in time (sigma ``window / 4`` samples) centred every ``step`` samples.
    A global linear model still localises a coupling that switches on or off or changes
    direction (its averaged coefficient explains variance only where the coupling acts), but
    not one that flips sign (the average is near zero); ``local_var`` handles that, at the
    price of noisier series. ``base`` gives only the static test here.

Static summary: edges, p-values and adjacency are the base method's on the whole record (a
proper test; a link active only briefly may not reach significance there), and
``score_matrix`` is the time average of the strength series (diagonal 0). ``extra["dynamic"]``
holds ``times`` (T',) in data time units, ``trial`` (T',) the trial each time belongs to,
``strength`` (T', d, d) ``[time][source][target]`` (diagonal 0) and ``change_points``: for each
link, the changes in the mean of its strength series (``changepoints.py``), detected within each
trial separately, each ``{"source", "target", "time", "before", "after"}`` with ``time`` halfway
between the grid times either side of the change and the segment means before/after it.
The detector is told how far the estimator's noise is correlated along the grid (window
overlap, smoothing and local-fit kernels) and penalises each change by ``penalty * log(n)``
noise variances, n the trial's samples; for ``perturbation`` it reads the series before the
clip at 0.

Default resolution: ``window = max(10 * d * max_lag, n / 10)`` samples, with n the longest
trial's length - ten samples per VAR coefficient at least, and about ten independent windows
along the recording; ``step = window // 10`` for ``windowed``; ``smoothing = window / 4`` (the
kernel's +-2 sigma spans one window) and an output grid every ``step = smoothing / 2`` samples
for ``perturbation`` (finer grids only repeat information the smoothing has merged).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from dynid.causal.base import CausalMethod, CausalSettings
from dynid.causal.changepoints import DEFAULT_PENALTY, change_points
from dynid.causal.graph import CausalGraph
from dynid.data.dataset import Dataset
from dynid.data.readers import HDF5_SUFFIXES
from dynid.errors import DataError, UsageError
from dynid.params import Hyperparameters, param
from dynid.runtime import SilentProgress, Steps

# A window covers at least this many samples per VAR coefficient by default.
_SAMPLES_PER_COEFFICIENT = 10
# ... and the recording holds about this many windows by default.
_WINDOWS_PER_RECORDING = 10


@dataclass(frozen=True)
class DynamicParams(Hyperparameters):
    """``-p`` options of ``--method dynamic``; window, step and smoothing are in samples."""

    estimator: Literal["windowed", "perturbation"] = param(
        "windowed", "windowed: base method on sliding windows; perturbation: permute each "
        "source's history in one predictor, per-time error increase"
    )
    base: str = param(
        "granger", "method run on each window and, for p-values, on the whole record"
    )
    measure: Literal["strength", "score"] = param(
        "strength", "windowed: largest |edge strength| over lags, or the base's score_matrix"
    )
    predictor: Literal["var", "local_var"] = param(
        "var", "perturbation: one VAR(max_lag) fit, or kernel-weighted local VAR fits"
    )
    window: int | None = param(None, "samples per window (default max(10*d*max_lag, n/10))")
    step: int | None = param(
        None, "samples between grid times (default window/10; perturbation: smoothing/2)"
    )
    smoothing: float | None = param(
        None, "perturbation: Gaussian sigma in samples (default window/4)"
    )
    repeats: int = param(10, "perturbation: random permutations averaged per source")
    penalty: float = param(
        DEFAULT_PENALTY, "change points: cost of one change, in noise variances times log(n)"
    )

    def __post_init__(self) -> None:
        if self.window is not None and self.window < 3:
            raise ValueError(f"window must be at least 3 samples, got {self.window}")
        if self.step is not None and self.step < 1:
            raise ValueError(f"step must be at least 1 sample, got {self.step}")
        if self.smoothing is not None and not self.smoothing > 0:
            raise ValueError(f"smoothing must be positive (in samples), got {self.smoothing}")
        if self.repeats < 1:
            raise ValueError(f"repeats must be at least 1, got {self.repeats}")
        if not self.penalty > 0:
            raise ValueError(f"penalty must be positive, got {self.penalty}")


@dataclass(frozen=True)
class StrengthSeries:
    """Link strengths on a time grid.

    times: (T',) data time units; trial: (T',) int trial index; strength: (T', d, d)
    ``[time][source][target]``; correlation: integrated autocorrelation time of the series'
    noise in grid points (what overlapping windows or smoothing leave), for change points;
    detect: (T', d, d) the series change points are sought in, when not ``strength`` itself.
    """

    times: np.ndarray
    trial: np.ndarray
    strength: np.ndarray
    correlation: float
    kind: str
    detect: np.ndarray | None = None


class DynamicCausality(CausalMethod):
    """``--method dynamic``: time-resolved link strengths and their change points."""

    name = "dynamic"
    reports_progress = True
    use_when = (
        "coupling that switches on, off or changes strength over the recording: strengths over time and their change points"
    )
    summary = (
        "time-resolved causality: a base method on sliding windows, or the error increase when "
        "a source is perturbed in one predictor; change points per link"
    )
    Params = DynamicParams

    def discover(self, data: Dataset, settings: CausalSettings) -> CausalGraph:
        p: DynamicParams = self.params  # type: ignore[assignment]
        base_cls = _base_method(p.base)
        # The whole-record run comes first: it gives the static test and rejects bad data early.
        static = base_cls(base_cls.Params()).discover(data, settings)
        window = p.window if p.window is not None else default_window(data, settings.max_lag)
        if p.estimator == "windowed":
            step = p.step if p.step is not None else max(1, window // 10)
            series = windowed_strength(data, settings, base_cls, window, step, p.measure)
            resolution: dict[str, Any] = {"window": window, "step": step}
        else:
            smoothing = p.smoothing if p.smoothing is not None else window / 4
            step = p.step if p.step is not None else max(1, round(smoothing / 2))
            series = perturbation_strength(
                data, settings, predictor=p.predictor, bandwidth=window / 4,
                smoothing=smoothing, step=step, repeats=p.repeats,
            )
            resolution = {"window": window, "step": step, "smoothing": smoothing,
                          "predictor": p.predictor, "repeats": p.repeats}
        # Time average over the grid points the estimator could evaluate (0 where none).
        finite = np.isfinite(series.strength)
        total = np.where(finite, series.strength, 0.0).sum(axis=0)
        average = total / np.maximum(finite.sum(axis=0), 1)
        np.fill_diagonal(average, 0.0)
        return CausalGraph(
            variables=static.variables,
            method=self.name,
            max_lag=static.max_lag,
            alpha=static.alpha,
            edges=static.edges,
            score_matrix=average,
            adjacency=static.adjacency,
            extra={
                "estimator": p.estimator,
                **resolution,
                "strength_kind": series.kind,
                # What the base method warned of (e.g. links it cannot test), once.
                "warnings": static.extra.get("warnings", []),
                "static": {"method": static.method, "score_matrix": static.score_matrix},
                "dynamic": {
                    "times": series.times,
                    "trial": series.trial,
                    "strength": series.strength,
                    "change_points": link_change_points(
                        series, data.variables, p.penalty, [t.n_samples for t in data.trials]
                    ),
                },
            },
        )


def _base_method(name: str) -> type[CausalMethod]:
    from dynid.causal import registry

    if name == DynamicCausality.name or name in registry.ROUTERS:
        # A router would choose its method window by window: the series would not be one
        # method's strengths.
        raise UsageError(f"-p base={name}: the base must be a static method, e.g. granger")
    return registry.get(name)


def default_window(data: Dataset, max_lag: int) -> int:
    """``max(10 * d * max_lag, n / 10)`` samples, n the longest trial; DataError if n is shorter."""
    longest = max(trial.n_samples for trial in data.trials)
    window = max(_SAMPLES_PER_COEFFICIENT * data.n_variables * max_lag,
                 longest // _WINDOWS_PER_RECORDING)
    if window > longest:
        raise DataError(
            f"{data.source}: a time-resolved estimate with {data.n_variables} variables and "
            f"max_lag={max_lag} needs windows of {window} samples, longer than the longest "
            f"trial ({longest}); use a smaller --max-lag or set -p window=N"
        )
    return window


# -- windowed ------------------------------------------------------------------------------------
def windowed_strength(
    data: Dataset,
    settings: CausalSettings,
    base_cls: type[CausalMethod],
    window: int,
    step: int,
    measure: str,
) -> StrengthSeries:
    """The base method on windows of ``window`` samples every ``step`` samples of each trial.

    Windows are centred in each trial (the leftover ``(n - window) % step`` samples split
    between both ends); trials shorter than ``window`` give none. DataError when no window
    exists or the base can test none of them.
    """
    d = data.n_variables
    times: list[float] = []
    trials: list[int] = []
    values: list[np.ndarray] = []
    first_error: DataError | None = None
    starts = [
        range(((trial.n_samples - window) % step) // 2, trial.n_samples - window + 1, step)
        if trial.n_samples >= window else range(0)
        for trial in data.trials
    ]
    steps = Steps(settings.training.progress, sum(len(s) for s in starts))
    # Windows report as a whole: the base method's own progress on each would flood the line.
    quiet = replace(settings, training=replace(settings.training, progress=SilentProgress()))
    for index, (trial, trial_starts) in enumerate(zip(data.trials, starts)):
        for start in trial_starts:
            steps.start(f"{base_cls.name}: window {steps.done + 1}")
            part = trial.slice(start, start + window)
            times.append(0.5 * float(part.t[0] + part.t[-1]))
            trials.append(index)
            piece = data.with_trials(
                [part], source=f"{data.source} (window t={part.t[0]:g}..{part.t[-1]:g})"
            )
            try:
                # The run on the whole record has already warned of what the data holds (e.g.
                # a redundant column); once per window would repeat it window after window.
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    graph = base_cls(base_cls.Params()).discover(piece, quiet)
            except DataError as exc:
                first_error = first_error or exc
                graph = None
            values.append(np.full((d, d), np.nan) if graph is None else _window_measure(graph, measure))
            steps.finish(f"{base_cls.name}: window {steps.done + 1}")
    if not values:
        raise DataError(
            f"{data.source}: no trial holds a window of {window} samples; set a smaller -p window"
        )
    strength = np.stack(values)
    if np.all(np.isnan(strength)):
        raise DataError(f"every window of {window} samples failed, e.g.: {first_error}")
    return StrengthSeries(
        times=np.asarray(times),
        trial=np.asarray(trials, dtype=int),
        strength=strength,
        # Estimates from windows overlapping by (window - step) samples: triangular correlation.
        correlation=max(1.0, window / step),
        kind="abs_strength_of_best_lag" if measure == "strength" else "score",
    )


def _window_measure(graph: CausalGraph, measure: str) -> np.ndarray:
    """(d, d) ``[source][target]`` value of one window's graph; diagonal 0."""
    if measure == "score":
        value = np.array(graph.score_matrix, dtype=float)
    else:
        index = {name: i for i, name in enumerate(graph.variables)}
        value = np.full((len(index), len(index)), np.nan)
        for edge in graph.edges:
            s, t = index[edge.source], index[edge.target]
            if np.isfinite(edge.strength):
                value[s, t] = np.fmax(value[s, t], abs(edge.strength))
    np.fill_diagonal(value, 0.0)
    return value


# -- perturbation --------------------------------------------------------------------------------
def perturbation_strength(
    data: Dataset,
    settings: CausalSettings,
    *,
    predictor: str,
    bandwidth: float,
    smoothing: float,
    step: int,
    repeats: int,
) -> StrengthSeries:
    """Relative increase in each target's one-step squared error when a source is permuted.

    bandwidth: Gaussian kernel sigma (samples) of the ``local_var`` fits; smoothing: sigma
    (samples) of the smoothing of the per-time increase; step: grid spacing (samples).
    """
    from scipy.ndimage import gaussian_filter1d

    from dynid.linear.least_squares import fit_var_least_squares

    lags, d = settings.max_lag, data.n_variables
    fit = fit_var_least_squares([trial.x for trial in data.trials], lags, trend=True)
    design = fit.design
    z, y = design.regressors, design.targets
    blocks = _trial_blocks(design.rows_per_trial)
    if predictor == "var":
        theta = np.vstack([fit.intercept[None], *(fit.coefs[k].T for k in range(lags))])
        models = [(slice(0, design.n_rows), theta)]
    else:
        models = _local_fits(z, y, blocks, bandwidth, step)
    predicted = np.empty_like(y)
    for rows, theta in models:
        predicted[rows] = z[rows] @ theta
    error = (y - predicted) ** 2  # (N, d)
    # Relative units: divide by each target's mean squared error (floored for exact fits).
    scale = np.maximum(error.mean(axis=0), np.finfo(float).tiny)

    rng = np.random.default_rng(settings.seed)
    increase = np.zeros((design.n_rows, d, d))  # [row][source][target]
    steps = Steps(settings.training.progress, d)
    for j in range(d):
        steps.start(f"perturbation: source {data.variables[j]}")
        columns = [design.lag_column(lag, j) for lag in range(1, lags + 1)]
        for _ in range(repeats):
            permuted = np.concatenate([rows.start + rng.permutation(rows.stop - rows.start)
                                       for rows in blocks])
            # Only source j's lag columns change, so the prediction moves by their change times
            # their coefficients.
            shift = z[np.ix_(permuted, columns)] - z[:, columns]
            moved = np.empty_like(y)
            for rows, theta in models:
                moved[rows] = predicted[rows] + shift[rows] @ theta[columns]
            increase[:, j, :] += (y - moved) ** 2 - error
        steps.finish(f"perturbation: source {data.variables[j]}")
    increase /= repeats * scale[None, None, :]

    times, trials, values = [], [], []
    for index, (trial, rows) in enumerate(zip(data.trials, blocks)):
        n = rows.stop - rows.start
        if n == 0:
            continue
        # Near the ends, average only the samples that exist (padding would weight edge values
        # up to half the kernel).
        coverage = gaussian_filter1d(np.ones(n), smoothing, mode="constant")
        smooth = gaussian_filter1d(increase[rows], smoothing, axis=0, mode="constant")
        smooth /= coverage[:, None, None]
        grid = np.arange(min(step // 2, n - 1), n, step)
        times.append(trial.t[lags:][grid])
        trials.append(np.full(grid.size, index))
        values.append(smooth[grid])
    smoothed = np.concatenate(values)
    idx = np.arange(d)
    smoothed[:, idx, idx] = 0.0
    # Noise memory in samples: the smoothing kernel's, convolved, for local fits, with the fit
    # kernel's (a local coefficient wanders on that scale). A Gaussian of sigma s applied to
    # white noise leaves an integrated autocorrelation time of 2 sqrt(pi) s.
    memory = math.hypot(smoothing, bandwidth) if predictor == "local_var" else smoothing
    return StrengthSeries(
        times=np.concatenate(times),
        trial=np.concatenate(trials).astype(int),
        # Clipped after smoothing, not before: see the module docstring.
        strength=np.maximum(smoothed, 0.0),
        correlation=max(1.0, 2.0 * math.sqrt(math.pi) * memory / step),
        kind="relative_mse_increase",
        # Change points in the unclipped series: clipping piles a link's null stretches up at 0,
        # which fools the noise estimate.
        detect=smoothed,
    )


def _trial_blocks(rows_per_trial: tuple[int, ...]) -> list[slice]:
    """The design rows of each trial, in order."""
    ends = np.cumsum(rows_per_trial)
    return [slice(int(end - n), int(end)) for n, end in zip(rows_per_trial, ends)]


def _local_fits(
    z: np.ndarray, y: np.ndarray, blocks: list[slice], bandwidth: float, step: int
) -> list[tuple[slice, np.ndarray]]:
    """Kernel-weighted least squares fits centred every ``step`` rows of each trial.

    Each fit uses its own trial's rows weighted by ``exp(-(r - c)^2 / (2 bandwidth^2))``
    (rows further than 4 bandwidths are left out) and predicts the ``step`` rows around its
    centre. Returns (rows, theta (k, d)) pairs covering every row.
    """
    reach = int(math.ceil(4 * bandwidth))
    models = []
    for rows in blocks:
        n = rows.stop - rows.start
        for first in range(0, n, step):
            centre = first + 0.5 * (min(first + step, n) - 1 - first)
            lo, hi = max(0, first - reach), min(n, first + step + reach)
            offsets = np.arange(lo, hi)
            w = np.sqrt(np.exp(-0.5 * ((offsets - centre) / bandwidth) ** 2))[:, None]
            theta = np.linalg.lstsq(w * z[rows.start + lo : rows.start + hi],
                                    w * y[rows.start + lo : rows.start + hi], rcond=None)[0]
            models.append((slice(rows.start + first, rows.start + min(first + step, n)), theta))
    return models


# -- change points -------------------------------------------------------------------------------
def link_change_points(
    series: StrengthSeries, variables: tuple[str, ...], penalty: float, n_samples: list[int]
) -> list[dict[str, Any]]:
    """Changes in the mean strength of every link ``source != target``, within each trial.

    n_samples: samples per trial (the penalty's ``log n``). NaN grid points (windows the base
    could not test) are skipped; ``before``/``after`` are mean strengths of the segments either
    side. Sorted by source, target, time.
    """
    found: list[dict[str, Any]] = []
    detect = series.strength if series.detect is None else series.detect
    d = len(variables)
    for s in range(d):
        for t in range(d):
            if s == t:
                continue
            for index in np.unique(series.trial):
                keep = (series.trial == index) & np.isfinite(series.strength[:, s, t])
                times, values = series.times[keep], series.strength[keep, s, t]
                found_here = change_points(
                    detect[keep, s, t], penalty=penalty, correlation=series.correlation,
                    n_samples=n_samples[index],
                )
                bounds = [0, *(cp.index for cp in found_here), values.size]
                means = [float(values[a:b].mean()) for a, b in zip(bounds[:-1], bounds[1:])]
                for k, cp in enumerate(found_here):
                    found.append({
                        "source": variables[s],
                        "target": variables[t],
                        "time": 0.5 * float(times[cp.index - 1] + times[cp.index]),
                        "before": means[k],
                        "after": means[k + 1],
                    })
    return found


# The files ``write_strength_series`` writes, by suffix: HDF5 where ``write_table`` writes it
# (``is_hdf5_target``), or JSON.
STRENGTH_SUFFIXES = (*HDF5_SUFFIXES, ".json")


def check_strength_path(path: str) -> None:
    """UsageError unless ``path`` ends in one of ``STRENGTH_SUFFIXES`` (checked before a run)."""
    if not path.lower().endswith(STRENGTH_SUFFIXES):
        raise UsageError(f"--dynamic-output {path}: expected a {', '.join(STRENGTH_SUFFIXES)} file")


def write_strength_series(graph: CausalGraph, path: str) -> None:
    """A ``dynamic`` graph's strength series to ``path`` atomically.

    HDF5 (.h5/.hdf5): datasets ``times`` (T',) data time units, ``trial`` (T',) and ``strength``
    (T', d, d) ``[time][source][target]`` (attribute ``variables``), file attributes
    ``change_points`` (JSON), ``method`` and ``estimator``. JSON: one document of kind
    ``dynamic-strength`` with ``variables``, ``estimator`` and the fields of ``extra["dynamic"]``.
    UsageError for another suffix or a graph without a strength series.
    """
    import json

    from dynid.atomic import atomic_path, write_text
    from dynid.documents import DYNAMIC_STRENGTH, tagged, to_text
    from dynid.jsonable import jsonable

    check_strength_path(path)
    if "dynamic" not in graph.extra:
        raise UsageError(f"--dynamic-output {path}: the {graph.method} result has no strength series")
    dynamic = graph.extra["dynamic"]
    if path.lower().endswith(".json"):
        document = {"variables": list(graph.variables), "estimator": graph.extra.get("estimator"), **dynamic}
        write_text(path, to_text(tagged(DYNAMIC_STRENGTH, document)))
        return
    import h5py

    with atomic_path(path) as temp, h5py.File(temp, "w") as handle:
        handle.create_dataset("times", data=np.asarray(dynamic["times"], dtype=float))
        handle.create_dataset("trial", data=np.asarray(dynamic["trial"], dtype=np.int64))
        strength = handle.create_dataset("strength", data=np.asarray(dynamic["strength"], dtype=float))
        strength.attrs["variables"] = list(graph.variables)
        handle.attrs["method"] = graph.method
        handle.attrs["estimator"] = str(graph.extra.get("estimator"))
        handle.attrs["change_points"] = json.dumps(jsonable(dynamic["change_points"]), allow_nan=False)
