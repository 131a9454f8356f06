"""PCMCI (Runge et al., Science Advances 2019): PC1 condition selection, then MCI tests.

Nodes are variables at lags: ``(i, lag)`` is ``x_i(t - lag)``, and the candidate parents of every
target ``x_j(t)`` are all ``(i, lag)`` with ``tau_min <= lag <= max_lag`` (self-lags included).

1. PC1 (per target, all targets in one batch per round): start from every candidate; in round
   ``k = 0, 1, ...`` test each remaining candidate ``c`` against the target given the first
   ``max_combinations`` size-``k`` subsets (in lexicographic order) of the other remaining
   candidates, which are kept sorted strongest first, so with the default of one subset the
   condition is "the k strongest other candidates". A candidate with ``p > pc_alpha`` for any
   tested subset is dropped after the round; survivors are re-sorted by their smallest absolute
   statistic so far (ties in candidate order). A target is done when fewer than ``k + 1``
   candidates remain or ``k`` passes ``max_conds_dim``.
2. MCI: every candidate link ``(i, lag) -> (j, 0)`` is tested given the PC1 parents of ``j``
   (without the tested node) and the PC1 parents of ``i`` shifted back by ``lag``. Conditions
   reach back ``2 * max_lag``.

This is tigramite 5.2's ``PCMCI.run_pcmci`` step for step (same candidate order, tie-breaking,
subsets and sample alignment), so with ParCorr the p-values agree with tigramite's to rounding.
Contemporaneous (lag-0) links are tested by ``--method pcmciplus`` (pcmciplus.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dynid.causal.base import CausalMethod, CausalSettings
from dynid.causal.citests import CITest
from dynid.causal.common import (
    check_columns_after_lags,
    check_whole,
    not_separable,
    report_self_predicted,
    self_predicted_columns,
)
from dynid.causal.fdr import adjust_pvalues
from dynid.causal.graph import CausalGraph, lagged_edges, pair_scores
from dynid.causal.pc import (
    CITestParams,
    check_data,
    check_pc_alpha,
    lagged_candidates,
    make_test,
    node_matrix,
    pc1,
)
from dynid.data.dataset import Dataset
from dynid.errors import UsageError
from dynid.params import param
from dynid.runtime import Steps

__all__ = ["PCMCI", "PCMCIParams", "node_matrix", "pcmci"]


@dataclass(frozen=True)
class PCMCIParams(CITestParams):
    """PCMCI's options (``-p key=value``); lags are in samples."""

    pc_alpha: float = param(
        0.2,
        "PC1 keeps a candidate parent while its p-value is <= pc_alpha (tigramite's default "
        "when not optimised); loose on purpose: PC1 only picks conditions for the MCI tests",
    )
    tau_min: int = param(1, "smallest lag tested, in samples (>= 1; at most --max-lag)")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_pc_alpha(self.pc_alpha)
        check_whole("tau_min", self.tau_min, 1)


class PCMCI(CausalMethod):
    """``--method pcmci``: PC1 condition selection then MCI tests, ParCorr or CMIknn."""

    name = "pcmci"
    reports_progress = True
    use_when = (
        "many autocorrelated variables with common drivers and lagged links; parcorr for linear, cmiknn for nonlinear dependence"
    )
    summary = "PCMCI: PC1 condition selection, then momentary conditional independence tests"
    Params = PCMCIParams

    def discover(self, data: Dataset, settings: CausalSettings) -> CausalGraph:
        assert isinstance(self.params, PCMCIParams)
        return pcmci(data, self.params, settings)


def pcmci(data: Dataset, params: PCMCIParams, settings: CausalSettings) -> CausalGraph:
    """PCMCI over ``data``'s variables, lags ``params.tau_min .. settings.max_lag``.

    Samples: each trial of n samples gives rows ``t = 2 * max_lag .. n - 1`` (tigramite's
    ``cut_off='2xtau_max'``: every test, whatever its conditions, uses the same rows), and the
    trials' rows are pooled; no lag reaches across a trial boundary.

    Result: one ``Edge`` per (source, target, lag), ``source != target``, lag in
    ``tau_min..max_lag``. ``p_value`` is the MCI p-value adjusted by ``settings.correction`` over
    those ``d * (d - 1) * n_lags`` cross-links. tigramite's ``fdr_method='fdr_bh'`` adjusts over
    the ``d * n_lags`` self-links too; autodependence usually makes those highly significant,
    which lifts the cross-links' BH ranks, so its q-values tend to be smaller and it can report a
    few more cross-links. The raw p-values are the same. ``strength``: the MCI partial correlation in [-1, 1] (parcorr) or the MCI
    conditional mutual information in nats (cmiknn; unsigned, near 0 or slightly below for
    independent nodes). ``score_matrix[s, t]`` is
    ``-log10`` of the smallest adjusted p-value over lags, capped at 300, diagonal 0.
    ``extra``: ``ci_test``, ``pc_alpha``, ``tau_min``, ``correction``, ``strength_kind``,
    ``n_rows``, ``n_tests`` (distinct CI tests run), ``dt``, ``parents`` (per target, the PC1
    parents strongest first, as ``{"source", "lag"}``), and ``val_matrix`` / ``p_matrix``
    (d, d, max_lag + 1), ``[source][target][lag]``, the MCI statistics and raw p-values of every
    tested link, self-links (the diagonal) included; untested lags (< tau_min) are NaN.

    Self-predicted columns (``common.self_predicted_columns``, e.g. a clean sinusoid, exactly a
    linear function of its own last ``order`` values) are not candidates at lags beyond
    ``order`` and have no parents (nothing to condition on: they are exogenous drivers); the
    links that cannot be tested (every link into one, every link from its lags beyond ``order``)
    have ``p_value`` 1, ``strength`` 0 (also in ``val_matrix`` / ``p_matrix``), outside the
    correction's family, with one warning each (``extra["warnings"]``, ``extra["self_predicted"]``
    lists ``{"column", "order"}``).

    Raises UsageError if ``tau_min > max_lag``, DataError for data that cannot be tested (missing
    values, constant columns, too few samples, irregular sampling).
    """
    max_lag, d = settings.max_lag, data.n_variables
    if params.tau_min > max_lag:
        raise UsageError(f"-p tau_min={params.tau_min} exceeds --max-lag {max_lag}")
    lags = range(params.tau_min, max_lag + 1)
    # The largest MCI conditioning set: both nodes' candidates but the tested one.
    check_data(data, "PCMCI", max_lag, 2 * d * len(lags) - 1)
    columns = node_matrix([trial.x for trial in data.trials], 2 * max_lag)
    check_columns_after_lags(data, columns, 2 * max_lag)
    test = make_test(columns, params, settings)
    self_predicted = self_predicted_columns(data, max_lag, test.exact_fit)
    untestable = not_separable(self_predicted, d, max_lag)

    candidates = lagged_candidates(d, lags, self_predicted)
    max_conds = d * len(lags) if params.max_conds_dim is None else params.max_conds_dim
    steps = Steps(settings.training.progress, 2)
    steps.start("pcmci: PC1 condition selection")
    parents = pc1(
        test, d, candidates, params.pc_alpha, max_conds, params.max_combinations,
        frozenset(item.column for item in self_predicted),
    ).parents
    steps.finish("pcmci: PC1 condition selection")
    steps.start("pcmci: MCI tests")
    val, p_raw = mci(test, d, candidates, parents, max_lag)
    steps.finish("pcmci: MCI tests")

    off_diagonal = ~np.eye(d, dtype=bool)
    cross = off_diagonal[:, :, None] & (np.arange(max_lag + 1) >= params.tau_min)
    untestable &= cross
    val[untestable], p_raw[untestable] = 0.0, 1.0
    tested = cross & ~untestable
    p_adj = np.where(untestable, 1.0, np.nan)
    p_adj[tested] = adjust_pvalues(p_raw[tested], settings.correction)  # type: ignore[arg-type]
    significant = cross & (np.nan_to_num(p_adj, nan=1.0) <= settings.alpha)

    names = data.variables
    edges = lagged_edges(names, val[:, :, lags], p_adj[:, :, lags], significant[:, :, lags], lags)
    score = pair_scores(p_adj[:, :, lags])
    return CausalGraph(
        variables=names,
        method="pcmci",
        max_lag=max_lag,
        alpha=float(settings.alpha),
        edges=edges,
        score_matrix=score,
        adjacency=significant.any(axis=2).astype(np.int8),
        extra={
            "ci_test": params.ci_test,
            "pc_alpha": float(params.pc_alpha),
            "tau_min": int(params.tau_min),
            "correction": settings.correction,
            "strength_kind": "partial_correlation" if test.signed else "cmi_nats",
            "n_rows": int(columns.shape[0]),
            "n_tests": int(test.n_computed),
            "dt": data.dt,
            "parents": {
                names[j]: [{"source": names[q % d], "lag": int(q // d)} for q in parents[j]]
                for j in range(d)
            },
            "val_matrix": val,
            "p_matrix": p_raw,
            **report_self_predicted(data, self_predicted),
        },
    )


def mci(
    test: CITest, d: int, candidates: list[int], parents: list[list[int]], max_lag: int
) -> tuple[np.ndarray, np.ndarray]:
    """MCI statistics and p-values (d, d, max_lag + 1) ``[source][target][lag]``, NaN untested."""
    batch, links = [], []
    for j in range(d):
        for node in candidates:
            i, lag = node % d, node // d
            conditions = [q for q in parents[j] if q != node]
            seen = set(conditions)
            # The source's parents, shifted back by the link's lag (node + lag * d is lag more).
            conditions += [q + lag * d for q in parents[i] if q + lag * d not in seen]
            batch.append((node, j, tuple(conditions)))
            links.append((i, j, lag))
    values, pvalues = test.run(batch)
    val = np.full((d, d, max_lag + 1), np.nan)
    p = np.full((d, d, max_lag + 1), np.nan)
    i, j, lag = (np.array(index) for index in zip(*links))
    val[i, j, lag], p[i, j, lag] = values, pvalues
    return val, p
