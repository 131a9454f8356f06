"""Links between nodes that are, at the same sample, mixtures of their parents' hidden states:
lag-0 dependence with an effective sample size, oriented by a cross-map asymmetry.

The data it is built for (the "coupled" graphs of CausalDynamics, Herdeanu et al., NeurIPS 2025
datasets track): each child is, at the same time step, a linear map of its parents' full
(multi-dimensional) states, and only one coordinate of each node is observed. Lagged tests find
little there: the coupling adds nothing to a smooth signal's own past. Two questions instead:

1. Are ``x_i`` and ``x_j`` dependent? Pearson's ``r`` at lag 0, tested as Fisher's
   ``z = atanh|r| sqrt(n_eff - 3)`` with Bartlett's effective sample size
   ``n_eff = n / (1 + 2 sum_{k=1..K} rho_i(k) rho_j(k))`` (Bartlett, JRSS Suppl. 8:27, 1946;
   Pyper and Peterman, CJFAS 55:2127, 1998), ``K = n / 10``: slow, strongly autocorrelated
   signals (a driver with a few periods per record) correlate by chance, and ``n_eff`` says so.
   Two-sided p-values ``2 (1 - Phi(z))``, one per unordered pair, adjusted with ``--correction``.
2. Which way? The principle of convergent cross mapping (Sugihara et al., Science 338:496, 2012):
   an effect's history holds its cause's state, not the other way round. Here the mixing is
   linear, so the reconstruction is linear too: ``R2[i, j]`` is the R^2 of ``x_j(t)`` regressed
   on the window ``x_i(t - w), x_i(t - w + s), ..., x_i(t + w)`` (a tiny ridge; ``w`` =
   ``window``, ``s`` = ``step``), and the link points ``i -> j`` when ``R2[j, i] > R2[i, j]``:
   the child's window recovers the parent better than the parent's recovers the child (which
   also holds the child's other parents).

``score_matrix[i, j] = z_ij * (0.5 + [i -> j])``: the dependence, three times larger in the
direction the asymmetry gives, so every pair is ranked. On CausalDynamics coupled graphs (see
benchmarks/README.md, "CausalDynamics graphs") it ranks links better than the lagged methods;
like every observational method it cannot order a child that copies a single parent (the two
are then two views of one system).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr

from dynid.causal.base import CausalMethod, CausalSettings
from dynid.causal.common import check_series
from dynid.causal.fdr import adjust_pvalues
from dynid.causal.graph import CausalGraph, Edge
from dynid.data.dataset import Dataset
from dynid.params import Hyperparameters, param

# Bartlett's sum runs to lag n / _BARTLETT_FRACTION.
_BARTLETT_FRACTION = 10
# The window of a smooth signal is nearly collinear; this ridge (times the rows) keeps the
# regression solvable without changing its fit (R^2 moved < 1e-3 for 1e-8..1e-4 in the study).
_RIDGE = 1e-6
# Fewest regression rows per window coefficient.
_ROWS_PER_COEFFICIENT = 5


@dataclass(frozen=True)
class MixingParams(Hyperparameters):
    """``-p`` options of ``--method mixing``."""

    window: int = param(40, "half width of the two-sided delay window that orients links, samples")
    step: int = param(4, "spacing of the window's taps, samples")

    def __post_init__(self) -> None:
        for name in ("window", "step"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
        if self.step > self.window:
            raise ValueError(f"step ({self.step}) must not exceed window ({self.window})")


class Mixing(CausalMethod):
    """``--method mixing``: lag-0 links, Bartlett-corrected correlation oriented by the linear
    cross-map asymmetry (module docstring).

    Edges: lag 0 only, one per ordered pair: ``strength`` = Pearson r, ``p_value`` the adjusted
    p-value of the pair's dependence (the same both ways), ``link`` ``-->`` or ``<--`` the
    direction from the asymmetry, ``significant`` when the pair is dependent at ``alpha`` and
    the edge points the way of the asymmetry. ``extra``: ``effective_samples``, ``fisher_z``
    and ``window_r2`` (d, d) ``[source][target]``: R^2 of the target on the source's window.
    ``--max-lag`` is not used (every link is at lag 0).
    """

    name = "mixing"
    contemporaneous = True
    use_when = (
        "nodes that are, at the same sample, mixtures of their parents' hidden states (partially "
        "observed deterministic systems with instantaneous coupling), where lagged tests find "
        "little; lag-0 links only"
    )
    summary = "lag-0 links: correlation with Bartlett's effective sample size, cross-map direction"
    Params = MixingParams

    def discover(self, data: Dataset, settings: CausalSettings) -> CausalGraph:
        params = self.params
        assert isinstance(params, MixingParams)
        taps = 2 * (params.window // params.step) + 1
        rows = sum(max(trial.n_samples - 2 * params.window, 0) for trial in data.trials)
        needed = _ROWS_PER_COEFFICIENT * (taps + 1)
        check_series(data, "mixing", enough=rows >= needed, requirement=(
            f"{needed} samples beyond the window's {2 * params.window} per trial for -p "
            f"window={params.window}, step={params.step}, got {rows}; use longer trials or a "
            "smaller -p window"))
        return mixing(data, params, settings)


def mixing(data: Dataset, params: MixingParams, settings: CausalSettings) -> CausalGraph:
    """The graph of the module docstring over ``data``'s variables."""
    trials = _standardized([trial.x for trial in data.trials])
    d = data.n_variables
    n_eff = effective_samples(trials)
    r = np.corrcoef(np.vstack(trials), rowvar=False)
    z = np.arctanh(np.clip(np.abs(r), 0.0, 1.0 - 1e-12)) * np.sqrt(n_eff - 3.0)
    np.fill_diagonal(z, 0.0)
    upper = np.triu_indices(d, 1)
    p = np.ones((d, d))
    p[upper] = adjust_pvalues(2.0 * ndtr(-z[upper]), settings.correction)  # type: ignore[arg-type]
    p = np.minimum(p, p.T)
    r2 = window_r2(trials, params.window, params.step)
    forward = r2.T > r2  # [i, j]: the target's window recovers the source better: i -> j
    dependent = (p <= settings.alpha) & ~np.eye(d, dtype=bool)
    adjacency = dependent & forward
    names = data.variables
    edges = [Edge(names[i], names[j], 0, float(r[i, j]), float(p[i, j]),
                  bool(adjacency[i, j]), link="-->" if forward[i, j] else "<--")
             for i in range(d) for j in range(d) if i != j]
    score = z * (0.5 + forward)
    np.fill_diagonal(score, 0.0)
    return CausalGraph(
        variables=names, method=Mixing.name, max_lag=settings.max_lag, alpha=settings.alpha,
        edges=edges, score_matrix=score, adjacency=adjacency,
        extra={"correction": settings.correction, "effective_samples": n_eff, "fisher_z": z,
               "window_r2": r2, "hyperparameters": params.to_dict(), "dt": data.dt},
    )


def _standardized(trials: list[np.ndarray]) -> list[np.ndarray]:
    """Trials (n_k, d) with every column at zero mean and unit variance over all samples."""
    stacked = np.vstack(trials)
    mean, sd = stacked.mean(axis=0), stacked.std(axis=0)
    return [(x - mean) / sd for x in trials]


def effective_samples(trials: list[np.ndarray]) -> np.ndarray:
    """(d, d) Bartlett's effective sample size of each pair's correlation, between 4 and n.

    ``trials``: standardized (n_k, d); autocorrelations pooled over trials, each lagged product
    inside its trial, to lag ``n / 10`` of the longest trial."""
    n = sum(len(x) for x in trials)
    max_lag = max(1, max(len(x) for x in trials) // _BARTLETT_FRACTION)
    rho = np.zeros((max_lag, trials[0].shape[1]))
    for k in range(1, max_lag + 1):
        pairs = [x[k:] * x[:-k] for x in trials if len(x) > k]
        rho[k - 1] = np.sum([q.sum(axis=0) for q in pairs], axis=0) / sum(len(q) for q in pairs)
    return np.clip(n / (1.0 + 2.0 * rho.T @ rho), 4.0, n)


def window_r2(trials: list[np.ndarray], window: int, step: int) -> np.ndarray:
    """(d, d) ``[i, j]``: R^2 of ``x_j(t)`` on ``x_i(t + k)``, ``k = -window, -window + step,
    .., window`` and an intercept; rows are the samples of every trial with the whole window
    inside it. 0 on the diagonal."""
    offsets = np.arange(-window, window + 1, step)
    parts = [(np.stack([x[window + k: len(x) - window + k] for k in offsets], axis=2),
              x[window: len(x) - window]) for x in trials if len(x) > 2 * window]
    windows = np.concatenate([w for w, _ in parts])  # (rows, d, taps)
    y = np.concatenate([target for _, target in parts])  # (rows, d)
    rows, d = y.shape
    r2 = np.zeros((d, d))
    for i in range(d):
        design = np.column_stack([np.ones(rows), windows[:, i, :]])
        gram = design.T @ design + _RIDGE * rows * np.eye(design.shape[1])
        residual = y - design @ np.linalg.solve(gram, design.T @ y)
        r2[i] = 1.0 - residual.var(axis=0) / y.var(axis=0)
    np.fill_diagonal(r2, 0.0)
    return r2

