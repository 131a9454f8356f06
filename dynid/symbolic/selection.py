"""Model selection for one equation: which sparse support, chosen by an information criterion.

`select` gathers candidate supports (the STLSQ threshold path and exact best subsets, see
`dynid.symbolic.solvers`), refits each by least squares on the training rows, scores it on the
held-out rows (or the training rows when none are given) and keeps the one with the lowest
criterion. No threshold needs tuning: the criterion trades the residual against the number of
terms. With n scored rows, k = number of terms and MSE the mean squared residual on them::

    AICc = n ln(MSE) + 2k + 2k(k + 1) / (n - k - 1)      (+inf when n <= k + 1)
    BIC  = n ln(MSE) + k ln(n)

(Hurvich & Tsai 1989; Schwarz 1978; scoring held-out rows as in Mangan et al. 2017). MSEs below
(1e-10 RMS(y))^2 count as round-off and are raised to it, so on noise-free data every exact model
ties on the first term and the one with fewest terms wins.

Rows of a time series are not independent: a smoothed derivative's errors are correlated over
the smoothing window, weak-form rows over overlapping test functions. Counting every row as
independent evidence makes tiny improvements look significant and lets spurious terms in. So
n is the effective number of rows, n / tau, with tau the integrated autocorrelation time of the
targets' noise (Sokal's windowed estimate, within contiguous blocks). The caller that knows how
the targets were made passes it (``identify`` propagates white noise through the derivative or
the weak-form operator); otherwise it is estimated from the held-out residuals of the best model.
tau must be the same for every model that is compared: residuals of a model that lacks a term
are smooth (large tau, few effective rows) while an over-fitted one leaves whiter residuals, so a
per-model tau would scale the criteria differently and reward the wrong model (an example is
recorded in benchmarks/README.md, "Symbolic design experiments").
"""

from __future__ import annotations

import hashlib
from math import comb, log
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from dynid.errors import DataError, UsageError
from dynid.symbolic.cache import CACHE
from dynid.symbolic.autocorrelation import autocorrelation_time
from dynid.symbolic.solvers import (
    MAX_EXACT_P,
    MAX_NODES,
    RegressionProblem,
    as_regression,
    describe_subset_search,
    iter_best_subsets,
    stlsq_path,
)

Criterion = Literal["aicc", "bic"]
# Best subsets grow one size at a time until this many sizes in a row have not improved the
# best criterion among them: beyond the true model each term adds ~2 (AICc) to the criterion,
# so three sizes without improvement make a later win unlikely, and the search stays
# proportional to the model's size rather than the library's.
PATIENCE = 3
_ROUND_OFF = 1e-10


def model_space_penalty(p: int, k: int) -> float:
    """2 ln C(p, k), added to the criterion of the best k of p terms: choosing k terms out of
    a library of p is a search over C(p, k) supports, and the best of many fits noise by
    chance (risk inflation, Foster & George 1994; the extended-BIC model-space term of Chen &
    Chen 2008). Without it a richer ODE library (trig terms approximating a polynomial, say)
    wins on held-out rows by a margin its size does not justify, and the PDE path's bootstrap
    bags, whose out-of-bag rows are many, kept a spurious higher-derivative term in 35-50% of
    the bags at 1% noise (Burgers, KdV; at most 20% with it)."""
    return 2.0 * log(comb(p, k))



@dataclass(frozen=True, eq=False)
class Candidate:
    """One scored support.

    ``support`` (p,) bool; ``coef`` (p,) least-squares refit on the training rows, in units of y
    per unit of each library column, 0 off the support; ``n_terms`` = support.sum();
    ``train_error`` / ``val_error`` root-mean-square residuals on the training / held-out rows
    (units of y; val_error = train_error when there are no held-out rows); ``criterion`` the
    AICc or BIC value on the scored rows (lower is better).
    """

    support: np.ndarray
    coef: np.ndarray
    n_terms: int
    train_error: float
    val_error: float
    criterion: float


@dataclass(frozen=True, eq=False)
class Selection:
    """The outcome of `select`.

    ``best`` minimises the criterion (ties: fewer terms); ``pareto`` are the candidates no other
    one beats on both number of terms and validation error, by increasing size; ``all`` every
    scored candidate (including the empty model), by increasing size. ``scored_on`` is
    "validation" or "training"; ``subset_search`` says how best subsets were found (exact or a
    named heuristic) and for which sizes, for the output.
    """

    best: Candidate
    pareto: list[Candidate]
    criterion: str
    all: list[Candidate]
    scored_on: str = "training"
    subset_search: str = ""


def information_criterion(mse: float, n: int, k: int, criterion: Criterion) -> float:
    """AICc or BIC (module doc) of a k-term model with mean squared residual ``mse`` on n rows."""
    if criterion == "aicc":
        if n - k - 1 <= 0:
            return np.inf
        return n * np.log(mse) + 2 * k + 2 * k * (k + 1) / (n - k - 1)
    if criterion == "bic":
        return n * np.log(mse) + k * np.log(n)
    raise UsageError(f"criterion {criterion!r}: expected 'aicc' or 'bic'")


def select(
    theta: np.ndarray,
    y: np.ndarray,
    *,
    theta_val: np.ndarray | None = None,
    y_val: np.ndarray | None = None,
    criterion: Criterion = "aicc",
    max_terms: int | None = None,
    error_floor: float = 0.0,
    val_blocks: np.ndarray | None = None,
    tau: float | None = None,
) -> Selection:
    """Choose the sparse support of one equation y ≈ theta @ coef by an information criterion.

    ``theta`` (n, p) and ``y`` (n,) are the training rows; ``theta_val`` (m, p) and ``y_val``
    (m,) optional held-out rows (`train_validation_split`), on which the criterion is computed
    when given (n = m there). Candidates: the empty model, the STLSQ threshold path and the best
    subsets of sizes 1, 2, ... until ``PATIENCE`` sizes in a row brought no improvement, or
    ``max_terms`` (a cap on the best-subset size; default: no cap but p).

    ``val_blocks``: (m,) label of the contiguous block each held-out row belongs to, so that
    residual autocorrelations are not taken across block boundaries (default: one block).
    ``tau``: autocorrelation time (>= 1, rows) of the held-out targets' noise, for the
    effective number of rows (module doc); default: estimated from the leading model's
    held-out residuals.
    ``error_floor``: RMS error of the targets themselves that is not noise, e.g. the truncation
    error of a finite-difference derivative (units of y). Residuals below it carry no
    information, so the criterion never rewards an MSE below ``error_floor**2``: without it,
    extra terms that fit the (smooth, systematic) derivative error would win on noise-free data.

    Pass held-out rows. On training rows the criterion is biased towards extra terms, because the
    best-subset search has already picked, among all the noise columns, the ones that happen to
    fit best (measured: benchmarks/README.md, "Symbolic design experiments").
    """
    if criterion not in ("aicc", "bic"):
        raise UsageError(f"criterion {criterion!r}: expected 'aicc' or 'bic'")
    problem = RegressionProblem.from_data(theta, y)
    scorer = _Scorer(problem, theta_val, y_val, criterion, error_floor)
    scored: dict[bytes, Candidate] = {}

    def score(support: np.ndarray) -> Candidate:
        key = support.tobytes()
        if key not in scored:
            scored[key] = scorer(support)
        return scored[key]

    score(np.zeros(problem.p, dtype=bool))
    for support in stlsq_path(problem):
        score(support)
    limit = problem.p if max_terms is None else min(int(max_terms), problem.p)
    best_so_far, stale, exact, largest = np.inf, 0, True, 0
    for found in iter_best_subsets(problem, limit):
        exact &= found.exact
        largest += 1
        value = score(found.support).criterion
        if value < best_so_far:
            best_so_far, stale = value, 0
        else:
            stale += 1
            if stale >= PATIENCE:
                break

    candidates = sorted(scored.values(), key=lambda c: (c.n_terms, c.criterion))
    if theta_val is not None:
        if tau is None:
            leader = min(candidates, key=lambda c: (c.criterion, c.n_terms))
            tau = autocorrelation_time(scorer.residual(leader.support), val_blocks)
        if tau > 1.0:
            candidates = [scorer.rescored(c, tau) for c in candidates]
    return Selection(
        best=min(candidates, key=lambda c: (c.criterion, c.n_terms)),
        pareto=pareto_front(candidates),
        criterion=criterion,
        all=candidates,
        scored_on="training" if theta_val is None else "validation",
        subset_search=describe_subset_search(problem.p, exact, MAX_NODES, MAX_EXACT_P)
        + f", sizes 1-{largest}",
    )


def select_folds(
    theta: np.ndarray,
    y: np.ndarray,
    folds: list[tuple[np.ndarray, np.ndarray]],
    *,
    criterion: Criterion = "aicc",
    max_terms: int | None = None,
    error_floor: float = 0.0,
    tau: float = 1.0,
) -> Selection:
    """Blocked cross-validated choice of the number of terms; the support from the first fold.

    theta (N, p), y (N,): all regression rows; ``folds``: [(train, val), ...] boolean (N,) masks
    with disjoint held-out sets (``train_validation_split(fold=j)``). In every fold `select`
    searches its candidates on the training rows only, and the best one of each size k (the
    smallest training error) is scored on that fold's held-out rows, so no row scores a support
    it helped choose. The criterion of size k takes the held-out squared errors pooled over all
    folds: every row is held out once, so a term that acts only in part of the record (a spike,
    a transient) is judged on those rows whichever fold they fall in, and the estimate does not
    hinge on which 20% happen to be held out.

    The evidence is counted as one fold's held-out rows (mean held-out rows per fold / ``tau``):
    the K estimates come from training sets that overlap by (K - 2) / (K - 1) and from the same
    search, so they are not K independent tests. Counting every row (K times the evidence) makes
    the small systematic gains of spurious terms on long records (errors in the variables of the
    weak form, finite-difference error) "significant" (measured: benchmarks/README.md,
    "Symbolic design experiments").

    The returned ``best`` is the first fold's best subset of the chosen size, with the pooled
    held-out error and criterion; ``all`` / ``pareto`` list one such model per size.
    """
    if not folds:
        raise UsageError("select_folds needs at least one (train, validation) fold")
    theta, y = np.asarray(theta, dtype=float), np.asarray(y, dtype=float)
    key = hashlib.blake2b(theta.tobytes() + y.tobytes() + repr((theta.shape, criterion, max_terms, error_floor)).encode())
    for train, val in folds:
        key.update(np.packbits(train).tobytes() + np.packbits(val).tobytes())
    per_size, held_rows, subset_search = CACHE.get(
        "folds", key.digest(), lambda: _fold_scores(theta, y, folds, criterion, max_terms, error_floor)
    )
    held = np.zeros(y.size, dtype=bool)
    for _, val in folds:
        held |= val
    mse_floor = max(_ROUND_OFF**2 * float(np.mean(y[held] ** 2)), error_floor**2, np.finfo(float).tiny)
    n = max(int(round(held_rows / len(folds) / max(tau, 1.0))), 1)
    common = sorted(set.intersection(*(set(sizes) for sizes in per_size)))
    pooled = []
    for k in common:
        mse = sum(sizes[k][1] for sizes in per_size) / held_rows
        value = information_criterion(max(mse, mse_floor), n, k, criterion)
        pooled.append(
            replace(per_size[0][k][0], val_error=float(np.sqrt(mse)), criterion=float(value))
        )
    return Selection(
        best=min(pooled, key=lambda c: (c.criterion, c.n_terms)),
        pareto=pareto_front(pooled),
        criterion=criterion,
        all=pooled,
        scored_on=f"{len(folds)}-fold blocked cross-validation",
        subset_search=subset_search,
    )


FoldScores = tuple[list[dict[int, tuple[Candidate, float]]], int, str]


def _fold_scores(
    theta: np.ndarray, y: np.ndarray, folds: list[tuple[np.ndarray, np.ndarray]],
    criterion: Criterion, max_terms: int | None, error_floor: float,
) -> FoldScores:
    """What ``select_folds`` pools, whatever tau: per fold {size k: (the candidate of k terms
    with the smallest training error, its held-out sum of squared residuals)}, the held-out
    rows of all folds, and how the first fold's subsets were searched. Remembered in
    ``cache.CACHE``: ``choice`` scores every library again with the residuals' tau."""
    per_size: list[dict[int, tuple[Candidate, float]]] = []
    held_rows, first = 0, None
    for train, val in folds:
        # tau only rescales criteria, which are recomputed from the pooled errors.
        chosen = select(
            theta[train], y[train], theta_val=theta[val], y_val=y[val],
            criterion=criterion, max_terms=max_terms, error_floor=error_floor, tau=1.0,
        )
        if first is None:
            # Only sizes that every fold scores are compared: later folds stop at the first's.
            first = chosen
            max_terms = max(c.n_terms for c in chosen.all)
        sizes: dict[int, tuple[Candidate, float]] = {}
        for candidate in chosen.all:
            known = sizes.get(candidate.n_terms)
            if known is None or candidate.train_error < known[0].train_error:
                sizes[candidate.n_terms] = (candidate, candidate.val_error**2 * int(val.sum()))
        per_size.append(sizes)
        held_rows += int(val.sum())
    return per_size, held_rows, first.subset_search


def pareto_front(candidates: list[Candidate]) -> list[Candidate]:
    """The candidates not dominated in (n_terms, val_error), by increasing n_terms.

    A candidate is dominated when another has no more terms and no larger error, and is better
    in one of the two; equal-error ties keep the smaller model.
    """
    front: list[Candidate] = []
    for candidate in sorted(candidates, key=lambda c: (c.n_terms, c.val_error)):
        # front[-1] has the lowest error among all candidates seen, none larger than this one
        if not front or candidate.val_error < front[-1].val_error:
            front.append(candidate)
    return front


class _Scorer:
    """Refit a support on the training rows and score it (see `select`)."""

    def __init__(self, problem, theta_val, y_val, criterion: Criterion, error_floor: float = 0.0):
        if (theta_val is None) != (y_val is None):
            raise UsageError("held-out rows need both theta_val and y_val")
        if theta_val is not None:
            theta_val, y_val = as_regression(theta_val, y_val)
            if theta_val.shape[1] != problem.p:
                raise DataError(
                    f"held-out rows have {theta_val.shape[1]} library terms, "
                    f"training rows {problem.p}"
                )
        self.problem = problem
        self.theta_val, self.y_val = theta_val, y_val
        self.criterion = criterion
        scored_y = problem.y_norm**2 / problem.n_rows if y_val is None else np.mean(y_val**2)
        self.mse_floor = max(_ROUND_OFF**2 * scored_y, error_floor**2, np.finfo(float).tiny)

    def residual(self, support: np.ndarray) -> np.ndarray:
        """Held-out residuals (m,) of the support's training-row fit."""
        coef = self.problem.to_coef(self.problem.fit(support))
        return self.y_val - self.theta_val @ coef

    def rescored(self, candidate: Candidate, tau: float) -> Candidate:
        """``candidate`` with its criterion recomputed on n / tau effective rows."""
        n = self.y_val.size / tau
        mse = max(candidate.val_error**2, self.mse_floor)
        value = information_criterion(mse, max(int(round(n)), 1), candidate.n_terms, self.criterion)
        return replace(candidate, criterion=float(value))

    def __call__(self, support: np.ndarray) -> Candidate:
        problem = self.problem
        w = problem.fit(support)
        coef = problem.to_coef(w)
        train_mse = problem.rss(w) * problem.y_norm**2 / problem.n_rows
        if self.y_val is None:
            mse, n = train_mse, problem.n_rows
        else:
            residual = self.y_val - self.theta_val @ coef
            mse, n = float(residual @ residual) / residual.size, residual.size
        k = int(support.sum())
        return Candidate(
            support=support,
            coef=coef,
            n_terms=k,
            train_error=float(np.sqrt(train_mse)),
            val_error=float(np.sqrt(mse)),
            criterion=float(
                information_criterion(max(mse, self.mse_floor), n, k, self.criterion)
            ),
        )
