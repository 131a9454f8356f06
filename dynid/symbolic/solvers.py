"""Sparse regression for one equation: y ≈ theta @ coef with few nonzero coefficients.

Every solver takes a plain regression problem — ``theta`` (n, p), the term library evaluated on n
rows, and ``y`` (n,), the target of one equation (a time derivative, or an integrated weak-form
row) — so the strong and the weak formulation share them. Coefficients come back in units of
``y`` per unit of each library column, with exact zeros off the support.

Scale-free thresholds
---------------------
Thresholds act on *normalised* coefficients::

    w_j = coef_j * ||theta[:, j]|| / ||y||        (Euclidean norms over the n rows)

the coefficients of the same regression with every column and the target scaled to unit norm.
|w_j| measures term j's contribution relative to the target, so ``threshold=0.05`` drops terms
that contribute less than about 5 % of the target, whatever the units of the data or the scale of
the library columns. `stlsq`, `sr3`, `support_path` and hence `dynid.symbolic.selection` all use
this one convention; ``ridge`` is likewise applied to the normalised coefficients.

Exact best subsets
------------------
`best_subset` / `best_subsets` solve the L0-constrained problem exactly by branch and bound for
up to ``max_exact_p`` (40) columns, and by a documented beam search above that (the result says
which, see `SubsetSearch`).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
from scipy import linalg
from scipy.linalg import lapack

from dynid.errors import DataError, UsageError

# A column whose squared distance from the span of already chosen (unit-norm) columns is below
# this is treated as redundant: it sits within ~1e-5 rad of that span, and any coefficient it
# received would only fit round-off.
_REDUNDANT = 1e-10
# Subsets whose residual differs by less than this fraction of ||y||^2 count as ties.
_TIE = 1e-12
# A branch-and-bound node finishes by scoring all remaining m-subsets of its candidates at once
# when there are at most this many (a batched solve beats further branching in Python).
_BATCH = 512
MAX_EXACT_P = 40
MAX_NODES = 5_000
# Thresholds of the STLSQ path: one above each of this many largest coefficients, and a log grid.
PATH_STEPS = 40
BEAM_WIDTH = 20


@dataclass(frozen=True, eq=False)
class RegressionProblem:
    """One equation's least-squares problem, normalised (see module doc) and reduced to p rows.

    With ``theta_n = theta / ||columns||`` and ``y_n = y / ||y||``, the QR factor r of theta_n
    and z = Q^T y_n (see `_reduce`) satisfy, for every coefficient vector w (p,)::

        ||y_n - theta_n @ w||^2 = ||z - r @ w||^2 + rss_offset

    so every fit on a subset of columns costs O(p^3), whatever n is. All residual sums of squares
    of this class are in units of ||y||^2 (1 = the target itself).
    """

    col_norm: np.ndarray  # (p,) Euclidean column norms of theta; 1 for an all-zero column
    y_norm: float  # ||y||; 1 when y is all zero
    r: np.ndarray  # (q, p), q = min(n, p)
    z: np.ndarray  # (q,)
    rss_offset: float  # the part of ||y_n||^2 that no combination of columns explains
    gram: np.ndarray  # (p, p) theta_n^T theta_n = r^T r
    b: np.ndarray  # (p,) theta_n^T y_n = r^T z
    total: float  # ||y_n||^2: 1, or 0 when y is all zero
    n_rows: int

    @classmethod
    def from_data(cls, theta: np.ndarray, y: np.ndarray) -> RegressionProblem:
        """Normalise and reduce ``theta`` (n, p) and ``y`` (n,); raises DataError on bad input."""
        theta, y = as_regression(theta, y)
        n, p = theta.shape
        col_norm = np.linalg.norm(theta, axis=0)
        col_norm[col_norm == 0] = 1.0
        y_norm = float(np.linalg.norm(y)) or 1.0
        r, z, rss_offset = _reduce(theta / col_norm, y / y_norm)
        return cls(
            col_norm=col_norm,
            y_norm=y_norm,
            r=r,
            z=z,
            rss_offset=rss_offset,
            gram=r.T @ r,
            b=r.T @ z,
            total=float(z @ z) + rss_offset,
            n_rows=n,
        )

    @property
    def p(self) -> int:
        return self.col_norm.size

    def fit(self, support: np.ndarray, ridge: float = 0.0) -> np.ndarray:
        """Normalised (ridge) least-squares coefficients w (p,) on ``support``; 0 elsewhere."""
        w = np.zeros(self.p)
        columns = np.flatnonzero(support)
        if columns.size == 0:
            return w
        design, target = self.r[:, columns], self.z
        if ridge > 0:  # ||z - R w||^2 + ridge ||w||^2 as one stacked least-squares problem
            design = np.vstack([design, np.sqrt(ridge) * np.eye(columns.size)])
            target = np.concatenate([target, np.zeros(columns.size)])
        # Complete orthogonal factorisation (gelsy): the same minimum-norm solution as the SVD,
        # at half its cost; this fit runs thousands of times per selection.
        cond = np.finfo(float).eps * max(design.shape)
        w[columns] = linalg.lstsq(design, target, cond=cond, lapack_driver="gelsy", check_finite=False)[0]
        return w

    def rss(self, w: np.ndarray) -> float:
        """Residual sum of squares of normalised coefficients w (p,), in units of ||y||^2."""
        residual = self.z - self.r @ w
        return float(residual @ residual) + self.rss_offset

    def to_coef(self, w: np.ndarray) -> np.ndarray:
        """Normalised coefficients (p,) -> coefficients of the raw theta and y (p,)."""
        return w * (self.y_norm / self.col_norm)

    def to_normalised(self, coef: np.ndarray) -> np.ndarray:
        """Raw coefficients (p,) -> normalised coefficients w (p,) (see module doc)."""
        return np.asarray(coef, dtype=float) * (self.col_norm / self.y_norm)


def _reduce(a: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """r (q, p), z (q,), rss_offset with ||t - a w||^2 = ||z - r w||^2 + rss_offset for every w.

    ``a`` (n, p), ``t`` (n,). Tall, reasonably conditioned ``a`` (the usual case): r by Cholesky
    QR2 (Fukaya et al. 2014), z = r^-T a^T t and the residual of the full fit computed directly.
    Otherwise (n < 2p, nearly dependent columns): Householder QR of [a t], whose last column gives
    z and the residual whatever the rank.
    """
    n, p = a.shape
    r = _cholesky_qr2(a) if n >= 2 * p else None
    if r is not None:
        z = lapack.dtrtrs(r, a.T @ t, lower=0, trans=1)[0]
        residual = t - a @ lapack.dtrtrs(r, z, lower=0)[0]
        return r, z, float(residual @ residual)
    r_aug = np.linalg.qr(np.column_stack([a, t]), mode="r")
    q = min(n, p)
    return r_aug[:q, :p], r_aug[:q, p], float(r_aug[p, p] ** 2) if n > p else 0.0


def _cholesky_qr2(a: np.ndarray) -> np.ndarray | None:
    """Upper-triangular R (p, p) with a = QR for a (n, p) of unit-norm columns, or None.

    Cholesky of a^T a gives R1; a second pass on Q1 = a R1^-1 restores Householder accuracy
    for condition numbers up to ~1e7. Only products touch the n rows — LAPACK's QR of a tall,
    narrow matrix is memory-bound and, when BLAS threads compete for two cores, tens of times
    slower. Returns None when a column lies within ~1e-6 of the span of the others (then the
    squared condition number would defeat the Cholesky factor).
    """
    try:
        r1 = np.linalg.cholesky(a.T @ a).T
    except np.linalg.LinAlgError:
        return None
    if np.abs(np.diag(r1)).min() < 1e-6:
        return None
    # einsum runs numpy's own loop: unlike a BLAS matmul of this shape it does not spawn threads.
    q1 = np.einsum("ij,jk->ik", a, np.linalg.inv(r1))
    try:
        r2 = np.linalg.cholesky(q1.T @ q1).T
    except np.linalg.LinAlgError:
        return None
    return r2 @ r1


def as_regression(theta: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """theta (n, p) and y (n,) as float arrays; DataError if misshapen, empty or not finite."""
    theta = np.asarray(theta, dtype=float)
    y = np.asarray(y, dtype=float)
    if theta.ndim != 2 or y.ndim != 1 or theta.shape[0] != y.shape[0]:
        raise DataError(
            f"sparse regression needs theta (n, p) and y (n,); got {theta.shape} and {y.shape}"
        )
    if theta.shape[0] == 0 or theta.shape[1] == 0:
        raise DataError("sparse regression needs at least one row and one library term")
    if not (np.isfinite(theta).all() and np.isfinite(y).all()):
        raise DataError("the library or the target has NaN or infinite rows; drop them first")
    return theta, y


# --------------------------------------------------------------------------- simple solvers


def lstsq_on_support(
    theta: np.ndarray, y: np.ndarray, support: np.ndarray, ridge: float = 0.0
) -> np.ndarray:
    """Least-squares coefficients (p,) of y (n,) on the columns of theta (n, p) in ``support``.

    ``support`` is a (p,) bool mask; coefficients off it are exactly 0. ``ridge`` penalises the
    squared normalised coefficients (module doc), so it is dimensionless.
    """
    problem = RegressionProblem.from_data(theta, y)
    return problem.to_coef(problem.fit(np.asarray(support, dtype=bool), ridge))


def stlsq(
    theta: np.ndarray,
    y: np.ndarray,
    threshold: float,
    ridge: float = 0.0,
    max_iter: int = 20,
) -> np.ndarray:
    """Sequentially thresholded least squares (Brunton, Proctor & Kutz 2016), coef (p,).

    Fit all columns, drop those with normalised |w_j| < ``threshold`` (module doc), refit on the
    rest, and repeat until the support stops changing or ``max_iter`` refits were made.
    """
    problem = RegressionProblem.from_data(theta, y)
    return problem.to_coef(_stlsq(problem, threshold, ridge, max_iter))


def _stlsq(
    problem: RegressionProblem,
    threshold: float,
    ridge: float,
    max_iter: int,
    fit: Callable[[np.ndarray], np.ndarray] | None = None,
) -> np.ndarray:
    """STLSQ on the normalised problem; ``fit(support) -> w`` may be a cached problem.fit."""
    if fit is None:
        fit = functools.partial(problem.fit, ridge=ridge)
    support = np.ones(problem.p, dtype=bool)
    w = fit(support)
    for _ in range(max_iter):
        keep = support & (np.abs(w) >= threshold)
        if np.array_equal(keep, support):
            break
        support = keep
        w = fit(support)
    return w


def sr3(
    theta: np.ndarray,
    y: np.ndarray,
    threshold: float,
    nu: float = 1.0,
    max_iter: int = 1000,
    tol: float = 1e-8,
) -> np.ndarray:
    """Sparse relaxed regularised regression with an L0 penalty (Zheng et al. 2019), coef (p,).

    On the normalised problem (module doc) it minimises over xi and the relaxed variable w::

        1/2 ||y_n - theta_n xi||^2 + lam ||w||_0 + 1/(2 nu) ||xi - w||^2,   lam = threshold^2/(2 nu)

    alternating an exact xi-update (one Cholesky factor of theta_n^T theta_n + I/nu) with the L0
    prox on w, a hard threshold at sqrt(2 lam nu) = ``threshold`` — the same scale-free threshold
    as `stlsq`. ``nu`` is dimensionless because the normalised columns have unit norm. Stops when
    xi moves less than ``tol`` (relative). As pysindy's ``unbias=True`` does, the returned
    coefficients are the least-squares refit on the support of w, removing the shrinkage the
    relaxation leaves.
    """
    problem = RegressionProblem.from_data(theta, y)
    p = problem.p
    factor = np.linalg.cholesky(problem.gram + np.eye(p) / nu)

    def solve(rhs: np.ndarray) -> np.ndarray:
        return lapack.dpotrs(factor, rhs, lower=1)[0]

    xi = problem.fit(np.ones(p, dtype=bool))
    w = np.where(np.abs(xi) >= threshold, xi, 0.0)
    for _ in range(max_iter):
        xi_new = solve(problem.b + w / nu)
        w = np.where(np.abs(xi_new) >= threshold, xi_new, 0.0)
        converged = np.linalg.norm(xi_new - xi) <= tol * max(1.0, np.linalg.norm(xi_new))
        xi = xi_new
        if converged:
            break
    return problem.to_coef(problem.fit(w != 0))


# --------------------------------------------------------------------------- best subsets


@dataclass(frozen=True, eq=False)
class SubsetSearch:
    """Best subsets of every size k = 1..max_k.

    ``supports[k-1]`` is the (p,) bool support of the best k-subset (fewer than k columns when
    theta has rank < k: extra columns would only be redundant), ``rss[k-1]`` its residual sum of
    squares in units of ||y||^2. ``exact`` is True when branch and bound proved every size
    optimal; ``method`` says how they were found, for the output.
    """

    supports: list[np.ndarray]
    rss: np.ndarray
    exact: bool
    method: str


@dataclass(frozen=True, eq=False)
class BestSubset:
    """The best subset found of one size: (p,) bool ``support``, ``rss`` in units of ||y||^2,
    ``exact`` when proved optimal (see `best_subsets`)."""

    support: np.ndarray
    rss: float
    exact: bool


def best_subset(theta: np.ndarray, y: np.ndarray, k: int) -> np.ndarray:
    """The (p,) bool support of the k columns of theta (n, p) that fit y (n,) best.

    Exact (branch and bound) for p <= 40; a beam search above that, see `best_subsets`.
    """
    p = np.shape(theta)[1] if np.ndim(theta) == 2 else 0
    if not 1 <= k <= p:
        raise UsageError(f"best subset of {k} terms: must be between 1 and the {p} library terms")
    return best_subsets(theta, y, k).supports[k - 1]


def best_subsets(
    theta: np.ndarray,
    y: np.ndarray,
    max_k: int,
    *,
    max_nodes: int = MAX_NODES,
    max_exact_p: int = MAX_EXACT_P,
) -> SubsetSearch:
    """Best least-squares subsets of theta (n, p) for y (n,) of every size 1..max_k.

    p <= ``max_exact_p``: exact, by depth-first branch and bound on the normal equations (Gram
    matrix of the normalised columns). A node fixes a set F of chosen columns and a set C of
    candidates; the fit on F ∪ C bounds from below the residual of every subset of it, so the
    node is dropped when that bound cannot beat the best k-subset found so far. The node branches
    on the candidate that helps most on its own (include it first — the first leaf is the greedy
    forward solution, a good incumbent — then exclude it); choosing a column is a sweep of the
    Gram matrix, and once at most a few hundred completions remain they are all scored in one
    batched solve. The search of all sizes together visits at most ``max_nodes`` nodes (sparse
    problems need tens to hundreds; dense, strongly correlated ones thousands per size); past
    that, each remaining search only dives greedily to one subset, and the sizes concerned are
    marked not exact.

    p > ``max_exact_p``: a beam search (keep the ``BEAM_WIDTH`` best subsets of each size, grow
    each by every column) — a heuristic, reported as such in ``SubsetSearch.method``.
    """
    problem = RegressionProblem.from_data(theta, y)
    found = list(
        iter_best_subsets(problem, max_k, max_nodes=max_nodes, max_exact_p=max_exact_p)
    )
    exact = all(subset.exact for subset in found)
    return SubsetSearch(
        supports=[subset.support for subset in found],
        rss=np.array([subset.rss for subset in found]),
        exact=exact,
        method=describe_subset_search(problem.p, exact, max_nodes, max_exact_p),
    )


def describe_subset_search(
    p: int, exact: bool, max_nodes: int = MAX_NODES, max_exact_p: int = MAX_EXACT_P
) -> str:
    """One line for the output saying how best subsets of a p-term library were found."""
    if p > max_exact_p:
        return f"beam search of width {BEAM_WIDTH} (heuristic, not proved optimal: {p} terms)"
    if exact:
        return "exact branch and bound"
    return f"branch and bound out of its {max_nodes}-node budget (larger sizes not proved optimal)"


def iter_best_subsets(
    problem: RegressionProblem,
    max_k: int,
    *,
    max_nodes: int = MAX_NODES,
    max_exact_p: int = MAX_EXACT_P,
) -> Iterator[BestSubset]:
    """`BestSubset` of sizes 1, 2, ..., min(max_k, p), computed lazily one size at a time.

    The last ``SEARCH_MEMORY`` searches are remembered by their problem (Gram matrix, b and
    ||y||^2) and resumed where they stopped: model selection asks for the same library on the same
    rows again (a second pass with another effective row count, refinement rounds that leave the
    constants unchanged), and the exact search is the expensive part. Same answers, less time.
    """
    max_k = min(int(max_k), problem.p)
    key = hashlib.blake2b(
        problem.gram.tobytes() + problem.b.tobytes() + repr((problem.total, max_nodes, max_exact_p)).encode()
    ).digest()
    entry = _SEARCHES.pop(key, None) or ([], _searches(problem, max_nodes, max_exact_p))
    _SEARCHES[key] = entry
    while len(_SEARCHES) > SEARCH_MEMORY:
        _SEARCHES.popitem(last=False)
    done, pending = entry
    for k in range(max_k):
        if k == len(done):
            found = next(pending, None)
            if found is None:
                return
            done.append(found)
        yield done[k]


def _searches(problem: RegressionProblem, max_nodes: int, max_exact_p: int) -> Iterator[BestSubset]:
    p = problem.p
    if p > max_exact_p:
        found = _beam_search(problem.gram, problem.b, p, BEAM_WIDTH)
    else:
        found = _branch_and_bound_sizes(problem.gram, problem.b, p, max_nodes)
    for search in found:
        support = np.zeros(p, dtype=bool)
        support[list(search.best)] = True
        support.setflags(write=False)  # shared by every caller of a remembered search
        yield BestSubset(support, problem.total - search.best_gain, search.complete)


# Searches remembered by iter_best_subsets (least recently used dropped first).
SEARCH_MEMORY = 64
_SEARCHES: OrderedDict[bytes, tuple[list[BestSubset], Iterator[BestSubset]]] = OrderedDict()


def _explained(g: np.ndarray, h: np.ndarray) -> float:
    """h^T g^+ h: the squared norm of the target explained by columns with Gram g and b = h."""
    if h.size == 0:
        return 0.0
    chol, info = lapack.dpotrf(g, lower=1, clean=1)
    if info == 0:
        v, info = lapack.dtrtrs(chol, h, lower=1)
        if info == 0:
            return float(v @ v)
    return float(h @ np.linalg.lstsq(g, h, rcond=None)[0])  # singular: project with lstsq


@functools.lru_cache(maxsize=256)
def _combinations(c: int, m: int) -> np.ndarray:
    return np.array(list(itertools.combinations(range(c), m)), dtype=np.intp).reshape(-1, m)


def _best_completion(g: np.ndarray, h: np.ndarray, m: int) -> tuple[np.ndarray, float]:
    """Among all m-subsets of the candidates (Gram g, b = h), the one explaining most, batched."""
    diag = np.diag(g)
    if m == 1:
        gains = h * h / diag
        best = int(np.argmax(gains))
        return np.array([best]), float(gains[best])
    if m == 2:  # closed-form 2x2 solves for every pair at once
        det = np.outer(diag, diag) - g * g
        num = np.outer(h * h, diag)
        num = num + num.T - 2 * np.outer(h, h) * g
        pairs = np.triu(det > _REDUNDANT * np.outer(diag, diag), 1)
        gains = np.where(pairs, num / np.where(pairs, det, 1.0), -np.inf)
        i, j = np.unravel_index(int(np.argmax(gains)), gains.shape)
        if np.isfinite(gains[i, j]):
            return np.array([i, j]), float(gains[i, j])
    combos = _combinations(h.size, m)
    sub_g = g[combos[:, :, None], combos[:, None, :]]
    sub_h = h[combos]
    try:
        coef = np.linalg.solve(sub_g, sub_h[:, :, None])[:, :, 0]
    except np.linalg.LinAlgError:  # some subset is singular: the pseudo-inverse still projects
        coef = np.einsum("nij,nj->ni", np.linalg.pinv(sub_g), sub_h)
    explained = np.einsum("ni,ni->n", sub_h, coef)
    best = int(np.argmax(explained))
    return combos[best], float(explained[best])


def _branch_and_bound_sizes(
    gram: np.ndarray, b: np.ndarray, max_k: int, max_nodes: int
) -> Iterator[_BranchAndBound]:
    """Branch and bound for sizes 1..max_k sharing one budget of ``max_nodes`` nodes."""
    budget = max_nodes
    for k in range(1, max_k + 1):
        search = _BranchAndBound(gram, b, k, budget)
        budget -= search.nodes
        yield search


class _BranchAndBound:
    """Exact best k-subset on a Gram matrix (p, p) of unit-norm columns and b (p,).

    Works with the explained part of ||y_n||^2 (largest wins) rather than the residual; after
    choosing a set F, ``g`` and ``h`` are the Gram matrix and b of the candidates with F
    regressed out, so single-column gains are h_j^2 / g_jj.
    """

    def __init__(self, gram: np.ndarray, b: np.ndarray, k: int, max_nodes: int):
        self.best: tuple[int, ...] = ()
        self.best_gain = 0.0
        self.nodes = 0
        self.max_nodes = max_nodes
        self.complete = True
        self._visit((), np.arange(b.size), gram, b, 0.0, k)

    def _offer(self, columns: tuple[int, ...], gain: float) -> None:
        if gain > self.best_gain + _TIE or not self.best:
            self.best, self.best_gain = columns, gain

    def _visit(self, chosen, cand, g, h, gain, m) -> None:
        while True:
            diag = np.diag(g)
            useful = diag > _REDUNDANT
            if not useful.all():  # columns in the span of F can never add anything
                cand, g, h, diag = cand[useful], g[np.ix_(useful, useful)], h[useful], diag[useful]
            if cand.size <= m:
                self._offer(chosen + tuple(int(c) for c in cand), gain + _explained(g, h))
                return
            # Out of budget, the search only dives greedily (include branches) to a subset.
            exhausted = self.nodes >= self.max_nodes
            if exhausted:
                self.complete = False
            else:
                self.nodes += 1
                if gain + _explained(g, h) <= self.best_gain + _TIE and self.best:
                    return  # even all candidates together cannot beat the incumbent
            if math.comb(cand.size, m) <= _BATCH:
                picks, extra = _best_completion(g, h, m)
                self._offer(chosen + tuple(int(c) for c in cand[picks]), gain + extra)
                return
            a = int(np.argmax(h * h / diag))
            pivot = g[:, a]
            rest = np.arange(cand.size) != a
            # Include column a: sweep it out of the Gram matrix (regress it out of the others).
            g_in = g - np.outer(pivot, pivot / diag[a])
            h_in = h - pivot * (h[a] / diag[a])
            self._visit(
                chosen + (int(cand[a]),),
                cand[rest],
                g_in[np.ix_(rest, rest)],
                h_in[rest],
                gain + h[a] ** 2 / diag[a],
                m - 1,
            )
            if exhausted:
                return
            # Exclude column a and continue with the same node.
            cand, g, h = cand[rest], g[np.ix_(rest, rest)], h[rest]


@dataclass(frozen=True)
class _Found:
    """What a search of one size reports (``_BranchAndBound`` has the same attributes)."""

    best: tuple[int, ...]
    best_gain: float
    complete: bool = False


def _beam_search(gram: np.ndarray, b: np.ndarray, max_k: int, width: int) -> Iterator[_Found]:
    """Heuristic best subsets for large p: grow the ``width`` best subsets one column at a time."""
    beam: list[tuple[tuple[int, ...], float]] = [((), 0.0)]
    for _ in range(max_k):
        proposals: dict[frozenset, tuple[tuple[int, ...], float]] = {}
        for columns, gain in beam:
            idx = list(columns)
            if idx:  # regress the chosen columns out of all the others
                proj = np.linalg.lstsq(gram[np.ix_(idx, idx)], gram[idx], rcond=None)[0]
                diag = np.diag(gram) - np.einsum("ij,ij->j", gram[idx], proj)
                h = b - proj.T @ b[idx]
            else:
                diag, h = np.diag(gram).copy(), b.copy()
            single = np.where(diag > _REDUNDANT, h * h / np.maximum(diag, _REDUNDANT), -np.inf)
            single[idx] = -np.inf
            for j in np.argsort(single)[::-1][:width]:
                if np.isfinite(single[j]):
                    key = frozenset((*columns, int(j)))
                    if key not in proposals or proposals[key][1] < gain + single[j]:
                        proposals[key] = ((*columns, int(j)), gain + float(single[j]))
        if proposals:  # else the rank is exhausted: larger subsets cannot explain more
            beam = sorted(proposals.values(), key=lambda item: -item[1])[:width]
        yield _Found(*beam[0])


# --------------------------------------------------------------------------- candidate path


def support_path(
    theta: np.ndarray, y: np.ndarray, *, max_terms: int | None = None
) -> list[np.ndarray]:
    """Candidate supports (each (p,) bool, nonempty) of increasing size, deduplicated.

    The union of the STLSQ threshold path (`stlsq_path`) and the best subsets of sizes
    1..max_terms (default min(p, 10): larger exact searches get expensive, and the STLSQ path
    still supplies larger candidates).
    """
    problem = RegressionProblem.from_data(theta, y)
    max_terms = min(problem.p, 10) if max_terms is None else max_terms
    subsets = [found.support for found in iter_best_subsets(problem, max_terms)]
    return unique_supports(stlsq_path(problem) + subsets)


def stlsq_path(problem: RegressionProblem) -> list[np.ndarray]:
    """STLSQ supports (each (p,) bool) along a threshold path spanning the whole model range.

    Thresholds: just above each of the ``PATH_STEPS`` largest |w_j| of the full normalised
    least-squares fit (so each one removes at least that term and all smaller ones at the first
    pass) plus ``PATH_STEPS`` log-spaced values between the smallest and the largest |w_j|; the
    path runs from the full model down to a single term. For p <= PATH_STEPS that is every |w_j|;
    in larger libraries the supports of more than ~PATH_STEPS terms, which no criterion would
    pick, are only visited on the log grid (each of those first fits costs O(p^3)).
    """
    full = np.abs(problem.fit(np.ones(problem.p, dtype=bool)))
    nonzero = full[full > 0]
    if nonzero.size == 0:
        return []
    grid = np.geomspace(nonzero.min(), nonzero.max(), PATH_STEPS)
    largest = np.sort(nonzero)[-PATH_STEPS:]
    thresholds = np.unique(np.concatenate([np.nextafter(largest, np.inf), grid]))
    fits: dict[bytes, np.ndarray] = {}  # thresholds often revisit the same supports

    def fit(support: np.ndarray) -> np.ndarray:
        key = support.tobytes()
        if key not in fits:
            fits[key] = problem.fit(support)
        return fits[key]

    return [full != 0] + [_stlsq(problem, t, 0.0, 20, fit) != 0 for t in thresholds]


def unique_supports(supports: list[np.ndarray]) -> list[np.ndarray]:
    """Distinct nonempty supports, sorted by size (then by the columns they use)."""
    unique = {s.tobytes(): s for s in supports if s.any()}
    return sorted(unique.values(), key=lambda s: (int(s.sum()), tuple(np.flatnonzero(s))))
