"""Convergent cross mapping (Sugihara et al., Science 338:496, 2012) with cross-map lags (Ye et
al., Sci. Rep. 5:14750, 2015).

Convention: ``X -> Y`` when the delay-embedded shadow manifold ``M_Y`` of the *target* recovers the
*source*: a forced variable carries its driver's history, not the other way round.

Steps.

1. Embedding, per variable: the Theiler window ``w`` (``theiler``, or by default the
   decorrelation time: the first lag where the autocorrelation falls below ``1/e``, at least 1)
   and the pair ``(E, tau)`` in ``1..max_E x 1..max_tau`` that maximises the simplex forecast skill
   ``rho`` at ``tp = 1``. Every candidate predicts the same samples, leave-one-out, from its ``E+1``
   nearest library points (Euclidean) whose time lies more than ``w`` samples away; ties go to the
   smaller ``E``, then ``tau``.
2. Cross mapping ``X`` from ``M_Y``: the same simplex weights on ``M_Y``'s neighbours of each
   sample ``t`` predict ``x(t + tp)`` for cross-map lags ``tp = -max_lag..0``; skill is the Pearson
   ``rho`` between predicted and actual values over every sample. Libraries: ``n_library_sizes``
   sizes from ``L_min = E + 2 + 2w`` (the fewest that leave ``E+1`` neighbours outside the window)
   to all ``L_max`` samples, geometrically spaced, ``n_samples`` random libraries each.
3. Lag: the causal lag ``l*`` is the lag ``1..max_lag`` of largest skill at ``L_max``. Following Ye
   et al., a driver's past is what the target's manifold holds, so skill must peak at a past lag;
   a pair whose skill at ``tp = 0`` beats every lagged one shows no delayed effect (in strongly
   forced systems that is how the false reverse direction shows up) and gets ``p = 1``.
4. Two tests at ``l*``. Convergence: ``p_conv`` is the rank of ``rho(L_max)`` among ``rho(L_min)``
   over ``n_surrogates`` random smallest libraries, ``(1 + #{rho(L_min) >= rho(L_max)}) /
   (1 + n)``: skill must grow with the library. Significance: ``p_surr`` compares the statistic
   ``max over lags of rho(L_max)`` with the same statistic for ``n_surrogates`` time-shift
   surrogates of the source (each trial rotated circularly by a random shift of at least a tenth
   of its length), which keep the source's own dynamics and only break its alignment with the
   target. The pair's p-value is ``max(p_conv, p_surr)``: the intersection-union test, rejecting
   only when both nulls are rejected, is valid at level ``alpha`` without a correction.
   p-values are adjusted over the ``d (d - 1)`` pairs; their floor ``1 / (n_surrogates + 1)`` is
   why ``n_surrogates`` is sized by default so that one pair can pass the correction. That is
   the most a pair draws: both nulls are drawn together in rounds (``montecarlo.py``), and a
   pair stops once ``stop_after`` null values of either test reached its statistic
   (Besag-Clifford) or once its decision under the correction is settled (MMCTest), so strong
   pairs in a rich graph, and clear nulls, need far fewer samples.

Edges: one per (source, target, lag 1..max_lag) with ``strength = rho(L_max)`` at that lag; the
pair's adjusted p-value sits on ``l*`` and the other lags get ``p = 1`` (the lag is estimated, not
tested). Trials are embedded separately; no delay vector or library neighbour spans two trials.
``score_matrix`` is ``-log10`` of the adjusted pair p-value.

``extra``: ``embedding`` (per variable ``E``, ``tau``, ``theiler`` and the simplex skill grid
``simplex_rho`` (d, max_E, max_tau)); ``cross_map_skill`` (d, d, max_lag + 1)
``[source][target][-tp]`` at ``L_max``; ``best_lag`` and ``peak_at_zero`` (d, d);
``library_sizes`` (d, n_library_sizes) per target; ``rho_curve`` and ``rho_curve_sd``
(d, d, n_library_sizes), mean and spread of skill at the best lag per library size;
``p_convergence``, ``p_surrogate``, ``p_value_raw`` (their max, or 1; Besag-Clifford's value for
a pair that stopped early), ``p_value_adjusted`` and ``null_samples_done`` (d, d);
``n_surrogates`` (the most per pair), ``p_value_floor``, ``lone_link_can_pass``, ``correction``,
``dt``, ``workers`` (processes used).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

from dynid.causal.base import CausalMethod, CausalSettings
from dynid.causal.fdr import adjust_pvalues
from dynid.causal.common import (
    check_series,
    check_whole,
    default_permutations,
    lone_link_can_pass,
    usable_rows,
)
from dynid.causal.graph import CausalGraph, Edge
from dynid.causal.montecarlo import sequential_pvalues
from dynid.causal.pool import Mapper, default_workers, worker_pool
from dynid.data.dataset import Dataset
from dynid.errors import DataError
from dynid.params import Hyperparameters, param
from dynid.runtime import Steps

# Fewest prediction samples per embedding dimension for simplex skill to mean anything.
_ROWS_PER_DIMENSION = 10
# Time-shift surrogates rotate each trial by at least this fraction of its length.
_MIN_SHIFT_FRACTION = 0.1
# Pairs x samples from which the work goes to worker processes by default: starting a worker
# (~2-3 s) pays once the embeddings, cross maps and null samples take ~10 s or more on one core
# (35 CPU s for 90 pairs x 1,000 samples, measured on Lorenz-96 at max_lag 5).
_POOL_WORK = 20_000


@dataclass(frozen=True)
class CCMParams(Hyperparameters):
    max_E: int = param(8, "largest embedding dimension tried (E is chosen by simplex skill)")
    max_tau: int = param(3, "largest embedding delay tried, in samples")
    theiler: int | None = param(
        None, "exclude library points this close in time; none = decorrelation time per variable"
    )
    n_library_sizes: int = param(8, "library sizes from the smallest usable to all samples")
    n_samples: int = param(20, "random libraries per library size for the skill curve")
    n_surrogates: int | None = param(
        None, "most time-shift surrogates and smallest libraries per test; none = enough for "
        "one pair to pass the correction"
    )
    stop_after: int = param(
        10, "stop a test once this many null values reach the statistic; 0 = never"
    )
    workers: int = param(0, "processes; 0 = one per core when the pairs are many")

    def __post_init__(self) -> None:
        lows = {"max_E": 1, "max_tau": 1, "n_library_sizes": 2, "n_samples": 1, "stop_after": 0,
                "workers": 0}
        optional = {"theiler": 0, "n_surrogates": 1}
        for name, low in {**lows, **optional}.items():
            value = getattr(self, name)
            if value is None and name in optional:
                continue
            check_whole(name, value, low)


@dataclass(frozen=True)
class _Series:
    """All trials stacked: ``x`` (N, d); per sample its ``trial`` and in-trial index ``time``."""

    x: np.ndarray
    trial: np.ndarray
    time: np.ndarray
    lengths: np.ndarray
    offsets: np.ndarray

    @classmethod
    def of(cls, data: Dataset) -> _Series:
        lengths = np.array([trial.n_samples for trial in data.trials])
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        trial = np.repeat(np.arange(lengths.size), lengths)
        return cls(np.concatenate([t.x for t in data.trials]), trial,
                   np.arange(lengths.sum()) - offsets[trial], lengths, offsets)

    def rows(self, first: int, last_margin: int) -> np.ndarray:
        """Global indices of samples ``first <= time < n - last_margin`` of every trial."""
        n = self.lengths[self.trial]
        return np.flatnonzero((self.time >= first) & (self.time < n - last_margin))

    def shifted(self, shifts: np.ndarray) -> np.ndarray:
        """(S, N) index maps rotating every trial circularly, by ``shifts`` (S, n_trials)."""
        per_sample = shifts[:, self.trial]
        return self.offsets[self.trial] + (self.time + per_sample) % self.lengths[self.trial]


@dataclass(frozen=True)
class _Embedding:
    """Delay vectors of one variable at ``rows``: ``points`` (r, E), and the Theiler key per row."""

    points: np.ndarray
    rows: np.ndarray
    key: np.ndarray
    E: int
    theiler: int

    @classmethod
    def of(cls, series: _Series, var: int, rows: np.ndarray, E: int, tau: int,
           theiler: int) -> _Embedding:
        points = series.x[rows[:, None] - tau * np.arange(E)[None, :], var]
        # Samples of different trials must never count as temporal neighbours: space trials apart.
        key = rows + series.trial[rows] * (series.x.shape[0] + theiler + 1)
        return cls(points, rows, key, E, theiler)

    def neighbours(self, library: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Simplex neighbours of every row within ``library`` (row positions; None = all rows).

        Returns global sample indices (r, E+1) of the E+1 nearest library points more than
        ``theiler`` samples away, and their weights ``exp(-d / d_nearest)`` normalised per row.
        """
        lib = np.arange(self.rows.size) if library is None else library
        # At most 2w+1 library points fall in a row's window, so this many leave E+1 outside it.
        k = min(lib.size, self.E + 2 + 2 * self.theiler)
        dist, pos = cKDTree(self.points[lib]).query(self.points, k=[*range(1, k + 1)])
        lib_pos = lib[pos]
        allowed = np.abs(self.key[lib_pos] - self.key[:, None]) > self.theiler
        first = np.argsort(~allowed, axis=1, kind="stable")[:, : self.E + 1]
        dist = np.take_along_axis(dist, first, axis=1)
        if first.shape[1] < self.E + 1 or not np.take_along_axis(allowed, first, axis=1).all():
            raise DataError("too few library points outside the Theiler window")
        nearest = dist[:, :1]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            # A duplicate point (d_nearest = 0) takes all the weight; the rest get exp(-inf) = 0.
            weights = np.where(nearest > 0, np.exp(-dist / nearest), (dist == 0).astype(float))
        weights /= weights.sum(axis=1, keepdims=True)
        return self.rows[np.take_along_axis(lib_pos, first, axis=1)], weights


class CCM(CausalMethod):
    """``--method ccm``: convergent cross mapping with cross-map lags and surrogate tests."""

    name = "ccm"
    reports_progress = True
    use_when = (
        "deterministic nonlinear (chaotic) systems with weak to moderate coupling, where the driver's state shows in the target's delay embedding; not for noisy stochastic data"
    )
    summary = "convergent cross mapping (nonlinear, deterministic coupling) with cross-map lags"
    Params = CCMParams

    def discover(self, data: Dataset, settings: CausalSettings) -> CausalGraph:
        params = self.params
        assert isinstance(params, CCMParams)
        return ccm(data, settings, params)


def ccm(data: Dataset, settings: CausalSettings, params: CCMParams) -> CausalGraph:
    """The CCM graph of ``data`` (see the module docstring for the method and ``extra``).

    Embeddings, cross maps and null samples are computed per variable / target, in worker
    processes when the pairs are many (``pool.py``); each target draws its random libraries and
    shifts from its own stream, so the answers do not depend on the number of workers.
    """
    d, lags = data.n_variables, settings.max_lag
    _check(data, params, lags)
    series = _Series.of(data)
    n_null = params.n_surrogates or default_permutations(d * (d - 1), settings.alpha,
                                                          settings.correction)
    theiler = np.array([
        params.theiler if params.theiler is not None else decorrelation_time(series, v)
        for v in range(d)
    ])
    _check_window(data, series, params, theiler)
    problem = _Problem(series, params, lags, theiler,
                       int(np.random.SeedSequence(settings.seed).entropy))
    workers = params.workers or (
        min(default_workers(), d) if d * (d - 1) * series.x.shape[0] >= _POOL_WORK else 1)
    steps = Steps(settings.training.progress, 2)
    with worker_pool(workers, _same, problem) as pool:
        steps.start("ccm: cross maps")
        selection = pool.map(_select_embedding, range(d))
        E = np.array([s[0] for s in selection])
        tau = np.array([s[1] for s in selection])
        maps = pool.map(_cross_map, [(t, int(E[t]), int(tau[t])) for t in range(d)])
        steps.finish("ccm: cross maps")
        skill = np.stack([m.target.full.T for m in maps], axis=1)  # [source][target][-tp]
        best_lag = np.stack([m.best_lag for m in maps], axis=1)
        peak_at_zero = np.stack([m.peak_at_zero for m in maps], axis=1)
        curve_mean = np.stack([m.curve_mean for m in maps], axis=1)
        curve_sd = np.stack([m.curve_sd for m in maps], axis=1)
        sizes = np.stack([m.sizes for m in maps])
        steps.start("ccm: convergence and surrogate tests")
        nulls = _Nulls(pool, [m.target for m in maps], best_lag, peak_at_zero)
        p_tests, n_done, _ = sequential_pvalues(
            nulls.draw, len(nulls.pairs), n_null, alpha=settings.alpha,
            correction=settings.correction,  # type: ignore[arg-type]
            stop_after=params.stop_after or None,
        )
        steps.finish("ccm: convergence and surrogate tests")
    cross = ~np.eye(d, dtype=bool)
    p_raw, p_conv, p_surr = (np.full((d, d), np.nan) for _ in range(3))
    done = np.zeros((d, d), dtype=np.int64)
    s_index, t_index = (np.array(column) for column in zip(*nulls.pairs))
    p_raw[s_index, t_index], done[s_index, t_index] = p_tests, n_done
    p_conv[s_index, t_index] = (1 + nulls.exceed_conv) / (1 + n_done)
    p_surr[s_index, t_index] = (1 + nulls.exceed_surr) / (1 + n_done)
    p_raw[cross & peak_at_zero] = 1.0
    return _graph(data, settings, skill, best_lag, p_raw, extra={
        "strength_kind": "cross_map_rho",
        "dt": data.dt,
        "n_surrogates": int(n_null),
        "p_value_floor": 1.0 / (n_null + 1),
        "lone_link_can_pass": lone_link_can_pass(n_null, d * (d - 1), settings.alpha,
                                                 settings.correction),
        "embedding": {
            "E": E, "tau": tau, "theiler": theiler,
            "simplex_rho": np.stack([s[2] for s in selection]),
        },
        "cross_map_skill": skill,
        "best_lag": best_lag,
        "peak_at_zero": peak_at_zero,
        "library_sizes": sizes,
        "rho_curve": curve_mean,
        "rho_curve_sd": curve_sd,
        "p_convergence": p_conv,
        "p_surrogate": p_surr,
        "p_value_raw": p_raw,
        "null_samples_done": done,
        "workers": int(workers),
    })


@dataclass(frozen=True)
class _Problem:
    """What every worker needs: the series, the options, the lags, each variable's Theiler
    window and the seed's entropy (the streams of each target's random draws derive from it)."""

    series: _Series
    params: CCMParams
    lags: int
    theiler: np.ndarray
    entropy: int


def _same(problem: _Problem) -> _Problem:
    """A worker's state is the problem itself."""
    return problem


def _select_embedding(problem: _Problem, var: int) -> tuple[int, int, np.ndarray]:
    params = problem.params
    return select_embedding(problem.series, var, params.max_E, params.max_tau,
                            int(problem.theiler[var]))


@dataclass(frozen=True)
class _Target:
    """One target's embedding, its simplex neighbours and weights over every row, its cross-map
    skill at L_max (lags + 1, d), and the smallest library size."""

    embedding: _Embedding
    index: np.ndarray
    weights: np.ndarray
    full: np.ndarray
    smallest: int


@dataclass(frozen=True)
class _CrossMap:
    """One target's cross maps: ``target``; ``sizes`` (n_library_sizes,) its library sizes;
    per source (d,) ``best_lag`` (0 for the target itself) and ``peak_at_zero``; the skill
    curve at the best lag, ``curve_mean`` and ``curve_sd`` (d, n_library_sizes), NaN for the
    target itself."""

    target: _Target
    sizes: np.ndarray
    best_lag: np.ndarray
    peak_at_zero: np.ndarray
    curve_mean: np.ndarray
    curve_sd: np.ndarray


def _cross_map(problem: _Problem, job: tuple[int, int, int]) -> _CrossMap:
    """The cross maps of target ``t`` with embedding ``(E, tau)``: ``job = (t, E, tau)``."""
    t, E, tau = job
    series, lags, params = problem.series, problem.lags, problem.params
    d = series.x.shape[1]
    target = _Embedding.of(series, t, series.rows(max((E - 1) * tau, lags), 0), E, tau,
                           int(problem.theiler[t]))
    sizes = library_sizes(target, params.n_library_sizes)
    index, weights = target.neighbours()
    full = cross_map_skill(series, target.rows, index, weights, lags)  # (lags + 1, d)
    sources = np.flatnonzero(np.arange(d) != t)
    best_lag = np.zeros(d, dtype=int)
    peak_at_zero = np.zeros(d, dtype=bool)
    best = 1 + np.argmax(full[1:, sources], axis=0)  # lag of peak skill, per source
    best_lag[sources] = best
    peak_at_zero[sources] = full[0, sources] > full[best, sources]
    rng = np.random.default_rng([problem.entropy, 0, t])
    curves = _library_curves(series, target, sizes, params.n_samples, lags, rng)
    curve_mean = np.full((d, sizes.size), np.nan)
    curve_sd = np.full((d, sizes.size), np.nan)
    for s, lag in zip(sources, best, strict=True):
        curve_mean[s] = [c[:, lag, s].mean() for c in curves]
        curve_sd[s] = [c[:, lag, s].std() for c in curves]
    return _CrossMap(_Target(target, index, weights, full, int(sizes[0])), sizes, best_lag,
                     peak_at_zero, curve_mean, curve_sd)


class _Nulls:
    """The null samples of every pair's two tests, drawn in rounds (``montecarlo.Draw``).

    A pair ``(source, target)`` gets, per null sample, one random smallest library of the
    target (convergence: does that skill reach ``rho(L_max)`` at the best lag?) and one
    time-shift surrogate of the source (significance: does its best skill over lags reach the
    observed one?). Its p-value ``max(p_conv, p_surr)`` counts ``max`` of the two exceedance
    counts, so the sequential stop applies to the pair. The libraries of a target and the
    shifts of a round serve all of its sources (one worker task per target). A pair peaking at
    lag 0 has p = 1 and stops.
    """

    def __init__(self, pool: Mapper[_Problem], targets: list[_Target], best_lag: np.ndarray,
                 peak_at_zero: np.ndarray) -> None:
        d = len(targets)
        self.pool, self.targets, self.best_lag = pool, targets, best_lag
        self.pairs = [(s, t) for t in range(d) for s in range(d) if s != t]
        self.peak = np.array([peak_at_zero[s, t] for s, t in self.pairs])
        self.exceed_conv = np.zeros(len(self.pairs), dtype=np.int64)
        self.exceed_surr = np.zeros(len(self.pairs), dtype=np.int64)
        self.done = np.zeros(d, dtype=np.int64)  # null samples each target has drawn

    def draw(self, tests: np.ndarray, count: int, need: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        exceed, done = np.zeros(tests.size, dtype=np.int64), np.zeros(tests.size, dtype=np.int64)
        by_target: dict[int, list[int]] = {}
        for k, test in enumerate(tests.tolist()):
            if self.peak[test]:  # p = 1: stop at once
                exceed[k] = done[k] = min(int(need[k]), count)
                continue
            by_target.setdefault(self.pairs[test][1], []).append(k)
        requests = []
        for t, members in by_target.items():
            sources = np.array([self.pairs[tests[k]][0] for k in members])
            requests.append(_NullRequest(self.targets[t], t, sources, self.best_lag[sources, t],
                                         count, int(self.done[t])))
        results = self.pool.map(_null_exceedances, requests)
        for (t, members), (conv, surr) in zip(by_target.items(), results):
            self.done[t] += count
            for column, k in enumerate(members):
                test = tests[k]
                before = max(self.exceed_conv[test], self.exceed_surr[test])
                cum_conv = self.exceed_conv[test] + np.cumsum(conv[:, column])
                cum_surr = self.exceed_surr[test] + np.cumsum(surr[:, column])
                gained = np.maximum(cum_conv, cum_surr) - before
                reached = np.flatnonzero(gained >= need[k])
                n = int(reached[0]) + 1 if reached.size else count
                exceed[k], done[k] = gained[n - 1], n
                self.exceed_conv[test], self.exceed_surr[test] = cum_conv[n - 1], cum_surr[n - 1]
        return exceed, done


@dataclass(frozen=True)
class _NullRequest:
    """``count`` null samples of target ``t`` (``target``) for ``sources`` at their best
    ``lag``s, the target having drawn ``before`` samples in earlier rounds."""

    target: _Target
    t: int
    sources: np.ndarray
    lag: np.ndarray
    count: int
    before: int


def _null_exceedances(problem: _Problem, request: _NullRequest) -> tuple[np.ndarray, np.ndarray]:
    """(count, len(sources)) whether each null sample reached the observed skill: smallest
    libraries at each source's best lag, and time-shift surrogates (best over lags). Drawn from
    the stream of (seed, target, samples drawn before)."""
    target, sources, lag, count = request.target, request.sources, request.lag, request.count
    rng = np.random.default_rng([problem.entropy, 1, request.t, request.before])
    observed_conv = target.full[lag, sources]
    r = target.embedding.rows.size
    conv = np.empty((count, sources.size), dtype=bool)
    for k in range(count):
        library = np.sort(rng.choice(r, target.smallest, replace=False))
        index, weights = target.embedding.neighbours(library)
        conv[k] = _skill_at(problem.series, target.embedding.rows, index, weights, sources,
                            lag) >= observed_conv
    statistic = _surrogate_statistic(problem.series, target, sources, problem.lags, count, rng)
    surr = statistic >= target.full[1:, sources].max(axis=0)
    return conv, surr


def decorrelation_time(series: _Series, var: int) -> int:
    """First lag (samples, >= 1) where the autocorrelation of ``var`` drops below 1/e.

    Pooled over trials (each trial's lagged products stay inside it); the longest trial's half
    length if it never does.
    """
    centred = series.x[:, var] - series.x[:, var].mean()
    max_lag = max(1, int(series.lengths.max()) // 2)
    cov = np.zeros(max_lag + 1)
    for offset, n in zip(series.offsets, series.lengths, strict=True):
        seg = centred[offset: offset + n]
        size = 1 << int(2 * n - 1).bit_length()  # zero padding: no wrap-around
        spectrum = np.fft.rfft(seg, size)
        acov = np.fft.irfft(spectrum * spectrum.conj(), size)[: min(n, max_lag + 1)]
        cov[: acov.size] += acov
    below = np.flatnonzero(cov[1:] < cov[0] / np.e)
    return int(below[0] + 1) if below.size else max_lag


def select_embedding(series: _Series, var: int, max_E: int, max_tau: int,
                     theiler: int) -> tuple[int, int, np.ndarray]:
    """(E, tau, skill) of ``var``: skill (max_E, max_tau) is the simplex rho at tp = 1.

    Every candidate predicts the same samples (those with the largest window's past and one
    future sample inside their trial), so their skills are comparable.
    """
    rows = series.rows((max_E - 1) * max_tau, 1)
    skill = np.full((max_E, max_tau), -np.inf)
    for E in range(1, max_E + 1):
        # E = 1 has no delay: its skill is the same for every tau.
        for tau in range(1, max_tau + 1 if E > 1 else 2):
            embedding = _Embedding.of(series, var, rows, E, tau, theiler)
            index, weights = embedding.neighbours()
            prediction = np.sum(weights * series.x[index + 1, var], axis=1)
            skill[E - 1, tau - 1] = _pearson(prediction, series.x[rows + 1, var], axis=0)
    if max_tau > 1:
        skill[0, 1:] = skill[0, 0]
    E, tau = np.unravel_index(np.argmax(skill), skill.shape)  # first maximum: smallest E, tau
    return int(E) + 1, int(tau) + 1, skill


def library_sizes(target: _Embedding, count: int) -> np.ndarray:
    """``count`` library sizes, geometric from the smallest usable ``E + 2 + 2w`` to every row.

    Sizes may repeat when there are few rows; a repeat only adds samples to that size.
    """
    smallest = target.E + 2 + 2 * target.theiler
    return np.geomspace(smallest, target.rows.size, count).round().astype(int)


def cross_map_skill(series: _Series, rows: np.ndarray, index: np.ndarray, weights: np.ndarray,
                    lags: int) -> np.ndarray:
    """rho (lags + 1, d) of every variable at ``tp = -lag`` predicted from these neighbours.

    rows: (r,) predicted samples; index, weights: (r, E+1) from ``_Embedding.neighbours``. Row
    ``lag`` of the result is cross-map lag ``tp = -lag``.
    """
    out = np.empty((lags + 1, series.x.shape[1]))
    for lag in range(lags + 1):
        prediction = np.einsum("rk,rkd->rd", weights, series.x[index - lag])
        out[lag] = _pearson(prediction, series.x[rows - lag], axis=0)
    return out


def _library_curves(series: _Series, target: _Embedding, sizes: np.ndarray, n_samples: int,
                    lags: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Cross-map skill per library size: (samples, lags + 1, d) arrays, one per size; a size
    covering every row gets its one library, the others ``n_samples`` random ones."""
    r = target.rows.size
    curves = []
    for size in sizes:
        libraries = [None] if size >= r else [
            np.sort(rng.choice(r, size, replace=False)) for _ in range(n_samples)
        ]
        curves.append(np.stack([
            cross_map_skill(series, target.rows, *target.neighbours(lib), lags)
            for lib in libraries
        ]))
    return curves


def _skill_at(series: _Series, rows: np.ndarray, index: np.ndarray, weights: np.ndarray,
              sources: np.ndarray, lags: np.ndarray) -> np.ndarray:
    """rho (len(sources),) of each source at its own cross-map lag ``tp = -lags[k]``."""
    values = series.x[index[:, :, None] - lags[None, None, :], sources[None, None, :]]
    prediction = np.einsum("rk,rks->rs", weights, values)
    return _pearson(prediction, series.x[rows[:, None] - lags[None, :], sources[None, :]], axis=0)


def _surrogate_statistic(series: _Series, target: _Target, sources: np.ndarray, lags: int,
                         count: int, rng: np.random.Generator) -> np.ndarray:
    """(count, len(sources)) ``max over lags 1..max_lag of rho(L_max)`` for time-shift surrogates.

    Each surrogate rotates every trial of the source by its own random shift (at least a tenth
    of the trial's length from either end); the target's neighbours and weights stay as they are.
    """
    low = np.maximum(1, np.ceil(_MIN_SHIFT_FRACTION * series.lengths)).astype(int)
    high = np.maximum(low, series.lengths - low)
    shifts = rng.integers(low, high + 1, size=(count, series.lengths.size))
    index, weights, rows = target.index, target.weights, target.embedding.rows
    statistic = np.full((count, sources.size), -np.inf)
    for chunk in np.array_split(np.arange(count), max(1, count // 32)):
        maps = series.shifted(shifts[chunk])  # (S, N)
        for lag in range(1, lags + 1):
            values = series.x[maps[:, index - lag]][..., sources]  # (S, r, E+1, sources)
            prediction = np.einsum("rk,srkd->srd", weights, values)
            actual = series.x[maps[:, rows - lag]][..., sources]  # (S, r, sources)
            rho = _pearson(prediction, actual, axis=1)
            statistic[chunk] = np.maximum(statistic[chunk], rho)
    return statistic


def _pearson(a: np.ndarray, b: np.ndarray, axis: int) -> np.ndarray:
    """Pearson correlation of ``a`` and ``b`` along ``axis``; 0 where either is constant."""
    a = a - a.mean(axis=axis, keepdims=True)
    b = b - b.mean(axis=axis, keepdims=True)
    denominator = np.sqrt(np.sum(a * a, axis=axis) * np.sum(b * b, axis=axis))
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.sum(a * b, axis=axis) / denominator
    return np.where(denominator > 0, rho, 0.0)


def _graph(data: Dataset, settings: CausalSettings, skill: np.ndarray, best_lag: np.ndarray,
           p_raw: np.ndarray, extra: dict) -> CausalGraph:
    """Edges per (source, target, lag): the adjusted pair p-value on the best lag, 1 elsewhere."""
    d, lags = data.n_variables, settings.max_lag
    cross = ~np.eye(d, dtype=bool)
    p_adj = np.ones((d, d))
    p_adj[cross] = adjust_pvalues(p_raw[cross], settings.correction)  # type: ignore[arg-type]
    adjacency = cross & (p_adj <= settings.alpha)
    names = data.variables
    edges = []
    for s in range(d):
        for t in range(d):
            if s == t:
                continue
            for lag in range(1, lags + 1):
                on_best = lag == best_lag[s, t]
                edges.append(Edge(
                    names[s], names[t], lag, float(skill[s, t, lag]),
                    float(p_adj[s, t]) if on_best else 1.0, bool(on_best and adjacency[s, t]),
                ))
    score = np.where(cross, -np.log10(p_adj), 0.0)
    return CausalGraph(
        variables=names, method="ccm", max_lag=lags, alpha=settings.alpha, edges=edges,
        score_matrix=score, adjacency=adjacency,
        extra={"correction": settings.correction,
               "p_value_adjusted": np.where(cross, p_adj, np.nan), **extra},
    )


def _check(data: Dataset, params: CCMParams, lags: int) -> None:
    start = max((params.max_E - 1) * params.max_tau + 1, lags)
    rows = usable_rows(data, start)
    needed = _ROWS_PER_DIMENSION * (params.max_E + 1)
    check_series(
        data, "CCM", enough=rows >= needed,
        requirement=(
            f"{needed} usable samples for max_E={params.max_E}, max_tau={params.max_tau}, "
            f"max_lag={lags} (a trial of n samples gives n - {start}), got {rows}; use longer "
            "or more trials, or smaller -p max_E, -p max_tau or --max-lag"
        ),
    )


def _check_window(data: Dataset, series: _Series, params: CCMParams, theiler: np.ndarray) -> None:
    """DataError when a Theiler window leaves too few library points for the largest E."""
    rows = series.rows((params.max_E - 1) * params.max_tau, 1).size
    for v, w in enumerate(theiler):
        if 2 * (params.max_E + 2 + 2 * w) > rows:
            source = "-p theiler" if params.theiler is not None else "its decorrelation time"
            raise DataError(
                f"{data.source}: column '{data.variables[v]}': a Theiler window of {w} samples "
                f"({source}) leaves too few of the {rows} usable samples to cross map with "
                f"E up to {params.max_E}; give more samples, a smaller -p theiler or -p max_E"
            )
