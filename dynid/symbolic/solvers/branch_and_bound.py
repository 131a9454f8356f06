"""Exact best subsets of one size by branch and bound on the Gram matrix of the normalised
columns (the method is described in ``best_subsets.iter_best_subsets``)."""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterator

import numpy as np
from scipy.linalg import lapack

from dynid.symbolic.solvers.problem import REDUNDANT

# Subsets whose residual differs by less than this fraction of ||y||^2 count as ties.
_TIE = 1e-12
# A branch-and-bound node finishes by scoring all remaining m-subsets of its candidates at once
# when there are at most this many (a batched solve beats further branching in Python).
_BATCH = 512


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
        pairs = np.triu(det > REDUNDANT * np.outer(diag, diag), 1)
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


def branch_and_bound_sizes(
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
            useful = diag > REDUNDANT
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
