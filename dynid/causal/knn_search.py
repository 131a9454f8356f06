"""Exact max-norm neighbour searches behind the kNN estimators (``knn.py``), compiled with numba.

A permutation test evaluates the KSG estimate hundreds of times per link, so these searches are
the whole cost of ``te`` and of ``cmiknn``. The estimators hold ``(y, z)`` fixed and permute only
``x``, so everything about the fixed spaces is prepared once per estimator and reused for every
permutation:

- each row's ``L`` nearest rows in yz-space, with their distances (ascending). The joint-space
  k-th neighbour of row i lies among the rows whose yz-distance is below it, so a search walks
  that list and stops at the first yz-distance that already exceeds the k-th best so far; and
  the yz-space count is a binary search in the list.
- the sorted order of one coordinate (column 0) of each fixed space. Where a list is too short
  for a row, or for the z-space and xz-space counts, a search scans outward from the row along
  that order and stops where column 0 alone rules out every further row: it touches only the rows
  inside the ball's projection on that coordinate, never all ``n``.

Distances are computed as scipy's ``cKDTree`` computes them for ``p=inf`` (the largest absolute
coordinate difference), so the results equal tree queries exactly, ties included.

One thread, like torch's default (``runtime.DEFAULT_TORCH_THREADS``): a call is 1-2 ms of work,
and with ``prange`` over rows on the busy 2-core development machine (load 14) the kth search
took 35 ms wall and twice the CPU against 19 ms on one thread, threads waiting for a core that
another process holds. Compiling the parallel versions also took 54 s against 29 s (load
15-20); numba's cache (``cache=True``) spares later processes the compile, leaving ~3 s for the
first call (mostly importing numba).
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def _insert(best: np.ndarray, d: float) -> None:
    """Put ``d`` into ``best`` (ascending, fixed length), dropping its largest value."""
    m = best.size - 1
    while m > 0 and best[m - 1] > d:
        best[m] = best[m - 1]
        m -= 1
    best[m] = d


@numba.njit(cache=True)
def _distance_below(points: np.ndarray, i: int, j: int, first: int, start: float,
                    bound: float) -> float:
    """max(start, |points[i, c] - points[j, c]| for c >= first); stops once it reaches ``bound``."""
    d = start
    for c in range(first, points.shape[1]):
        d = max(d, abs(points[i, c] - points[j, c]))
        if d >= bound:
            break
    return d


@numba.njit(cache=True)
def _kth_by_scan(points: np.ndarray, order: np.ndarray, rank: np.ndarray, k: int,
                 i: int) -> float:
    """Distance from row i to its k-th nearest other row, scanning outward along ``order``
    (rows sorted by column 0), nearer side first."""
    n = points.shape[0]
    best = np.full(k, np.inf)
    lo, hi = rank[i] - 1, rank[i] + 1
    v = points[i, 0]
    while lo >= 0 or hi < n:
        gap_lo = v - points[order[lo], 0] if lo >= 0 else np.inf
        gap_hi = points[order[hi], 0] - v if hi < n else np.inf
        if gap_lo <= gap_hi:
            gap, j = gap_lo, order[lo]
            lo -= 1
        else:
            gap, j = gap_hi, order[hi]
            hi += 1
        # Every row further out is at least ``gap`` away along column 0 alone.
        if gap >= best[k - 1]:
            break
        d = _distance_below(points, i, j, 1, gap, best[k - 1])
        if d < best[k - 1]:
            _insert(best, d)
    return best[k - 1]


@numba.njit(cache=True)
def _count_by_scan(points: np.ndarray, order: np.ndarray, rank: np.ndarray, r: float,
                   i: int) -> int:
    """Rows within max-norm ``r`` (<=) of row i, i included, scanning outward along ``order``."""
    n = points.shape[0]
    found = 0
    v = points[i, 0]
    for step in (-1, 1):
        q = rank[i] if step == 1 else rank[i] - 1
        while 0 <= q < n:
            j = order[q]
            if abs(points[j, 0] - v) > r:
                break
            if _distance_below(points, i, j, 1, 0.0, np.inf) <= r:
                found += 1
            q += step
    return found


@numba.njit(cache=True)
def kth_neighbour_distance(points: np.ndarray, order: np.ndarray, rank: np.ndarray,
                           k: int) -> np.ndarray:
    """(n,): max-norm distance from each row of ``points`` (n, D) to its k-th nearest other row.

    order: (n,) row indices sorting ``points[:, 0]``; rank: (n,) position of each row in
    ``order``; 1 <= k < n. Other rows at distance 0 (duplicates) count as neighbours.
    """
    n = points.shape[0]
    eps = np.empty(n)
    for i in range(n):
        eps[i] = _kth_by_scan(points, order, rank, k, i)
    return eps


@numba.njit(cache=True)
def count_within(points: np.ndarray, order: np.ndarray, rank: np.ndarray,
                 radius: np.ndarray) -> np.ndarray:
    """(n,): rows of ``points`` (n, D) within max-norm ``radius[i]`` (<=) of row i, i included.

    order, rank: as for ``kth_neighbour_distance``.
    """
    n = points.shape[0]
    counts = np.empty(n, dtype=np.int64)
    for i in range(n):
        counts[i] = _count_by_scan(points, order, rank, radius[i], i)
    return counts


@numba.njit(cache=True)
def joint_kth_distance(joint: np.ndarray, fixed: int, near: np.ndarray, near_distance: np.ndarray,
                       order: np.ndarray, rank: np.ndarray, k: int) -> np.ndarray:
    """(n,): max-norm distance from each row of ``joint`` (n, D) to its k-th nearest other row.

    joint: the fixed space in columns ``[0, fixed)``, the permuted one after them. near,
    near_distance: (n, L) each row's L nearest rows in the fixed space and their distances,
    ascending (a row may or may not list itself). order, rank: rows sorted by column 0, for rows
    whose list is too short.
    """
    n, length = near.shape
    eps = np.empty(n)
    for i in range(n):
        best = np.full(k, np.inf)
        settled = length == n
        for m in range(length):
            fixed_distance = near_distance[i, m]
            # Rows further down the list are at least this far in the fixed space alone.
            if fixed_distance >= best[k - 1]:
                settled = True
                break
            j = near[i, m]
            if j == i:
                continue
            d = _distance_below(joint, i, j, fixed, fixed_distance, best[k - 1])
            if d < best[k - 1]:
                _insert(best, d)
        if settled or best[k - 1] <= near_distance[i, length - 1]:
            eps[i] = best[k - 1]
        else:
            eps[i] = _kth_by_scan(joint, order, rank, k, i)
    return eps


@numba.njit(cache=True)
def count_in_list(points: np.ndarray, near_distance: np.ndarray, order: np.ndarray,
                  rank: np.ndarray, radius: np.ndarray) -> np.ndarray:
    """(n,): rows of ``points`` (n, D) within ``radius[i]`` (<=) of row i, i included, from
    each row's ``near_distance`` list (n, L) as for ``joint_kth_distance``; rows whose ball
    reaches past their list are counted by a scan along ``order``."""
    n, length = near_distance.shape
    counts = np.empty(n, dtype=np.int64)
    for i in range(n):
        r = radius[i]
        if length == n or near_distance[i, length - 1] > r:
            counts[i] = np.searchsorted(near_distance[i], r, side="right")
        else:
            counts[i] = _count_by_scan(points, order, rank, r, i)
    return counts


@numba.njit(cache=True)
def count_z_and_xz(zx: np.ndarray, fixed: int, order: np.ndarray, rank: np.ndarray,
                   radius: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """((n,), (n,)): rows within ``radius[i]`` (<=) of row i, i included, in the space of the
    first ``fixed`` columns of ``zx`` (n, D) and in the space of all its columns, by one scan
    along ``order`` (rows sorted by column 0)."""
    n = zx.shape[0]
    n_z = np.empty(n, dtype=np.int64)
    n_zx = np.empty(n, dtype=np.int64)
    for i in range(n):
        r = radius[i]
        v = zx[i, 0]
        in_z = 0
        in_zx = 0
        for step in (-1, 1):
            q = rank[i] if step == 1 else rank[i] - 1
            while 0 <= q < n:
                j = order[q]
                if abs(zx[j, 0] - v) > r:
                    break
                q += step
                inside = True
                for c in range(1, fixed):
                    if abs(zx[i, c] - zx[j, c]) > r:
                        inside = False
                        break
                if not inside:
                    continue
                in_z += 1
                if _distance_below(zx, i, j, fixed, 0.0, np.inf) <= r:
                    in_zx += 1
        n_z[i] = in_z
        n_zx[i] = in_zx
    return n_z, n_zx


@numba.njit(cache=True)
def take_unused(candidates: np.ndarray, visit: np.ndarray) -> np.ndarray:
    """(n,): the row each row takes in Runge's restricted permutation (see
    ``knn.restricted_permutation``). candidates: (n, k_perm) shuffled neighbour lists; visit: (n,)
    the order rows choose in."""
    n, k_perm = candidates.shape
    used = np.zeros(n, dtype=np.bool_)
    result = np.empty(n, dtype=np.intp)
    for i in visit:
        pick = candidates[i, k_perm - 1]
        for m in range(k_perm):
            if not used[candidates[i, m]]:
                pick = candidates[i, m]
                break
        result[i] = pick
        used[pick] = True
    return result
