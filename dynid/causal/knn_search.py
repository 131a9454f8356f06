"""Exact max-norm neighbour searches behind the kNN estimators (``knn.py``), compiled with numba.

A permutation test evaluates the KSG estimate hundreds of times per link, so these searches are
the whole cost of ``te`` and of ``cmiknn``. The estimators hold ``(y, z)`` fixed and permute only
``x``, so everything about the fixed spaces is prepared once per estimator and reused for every
permutation:

- each row's ``L`` nearest rows in yz-space, with their distances (ascending). The joint-space
  k-th neighbour of row i lies among the rows whose yz-distance is below it, so a search walks
  that list and stops at the first yz-distance that already exceeds the k-th best so far; and
  the yz-space count is a binary search in the part of the list just walked.
- the rows of z sorted by its column 0. The z-space and zx-space balls of row i lie inside the
  contiguous window of sorted rows whose column 0 is within the radius, found by two binary
  searches; only that window is scanned (with one z and one x column, the z count is its length
  and the zx count a branch-free pass over contiguous memory).
- the sorted order of column 0 of the yz-space. Where a row's list is too short, a search scans
  outward from the row along that order and stops where column 0 alone rules out every further
  row: it touches only the rows inside the ball's projection on that coordinate, never all ``n``.

``ksg_counts`` does all of this for every row in one compiled pass. Per permutation of x
(Lorenz-96, 995 rows, one y, z and x column, k=5; CPU time, interleaved runs on the shared
2-core machine) an estimate with its permutation went from 2.9-3.6 ms (the kth search, the
yz counts and a scan for the z and zx counts, separately) to 1.4-1.7 ms.

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
def ksg_counts(joint: np.ndarray, fixed: int, near: np.ndarray, near_distance: np.ndarray,
               order: np.ndarray, rank: np.ndarray, k: int, z_sorted: np.ndarray,
               x_by_z: np.ndarray, z_rank: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """((n,), (n,), (n,)): for each row i of ``joint`` (n, D), the rows strictly closer than
    ``eps_i``, its max-norm distance to its k-th nearest other row, in yz-space, z-space and
    (z, x)-space, row i included (the Frenzel-Pompe counts plus one), in one pass over the rows.

    joint: the fixed (y, z) space in columns ``[0, fixed)``, the permuted x after them. near,
    near_distance: (n, L) each row's L nearest rows in yz-space and their distances, ascending
    (a row may or may not list itself). order, rank: rows sorted by joint's column 0 and each
    row's position in that order, for rows whose list is too short. z_sorted: (n, dz) the rows of
    z sorted by its column 0; x_by_z: (n, dx) the rows of x in the same order; z_rank: (n,) the
    position of row i in that order. With no z, pass x sorted by its column 0 as ``z_sorted``
    and an (n, 0) ``x_by_z``: the z count is then the x count.

    Row i walks its yz list while the yz-distance is below its k-th best joint distance so far
    (rows further down are at least that far); the yz count is a binary search in the part just
    walked, and the z and zx counts look only at the contiguous window of ``z_sorted`` inside
    the ball's projection on z's column 0, found by binary search.
    """
    n, length = near.shape
    width = joint.shape[1]
    # Contiguous copies of the columns the inner loops read: with a single x column (te, PCMCI)
    # the distance is one subtraction, and the zx count a branch-free pass.
    one_x = width - fixed == 1
    x_column = joint[:, fixed].copy() if one_x else np.empty(0)
    column = z_sorted[:, 0].copy()
    x_by_z_column = x_by_z[:, 0].copy() if z_sorted.shape[1] == 1 and x_by_z.shape[1] == 1 \
        else np.empty(0)
    n_yz = np.empty(n, dtype=np.int64)
    n_z = np.empty(n, dtype=np.int64)
    n_zx = np.empty(n, dtype=np.int64)
    best = np.empty(k)  # the k smallest joint distances so far, ascending
    for i in range(n):
        best[:] = np.inf
        kth = np.inf  # best[k - 1], kept in a register
        walked = length
        for m in range(length):
            fixed_distance = near_distance[i, m]
            # Rows further down the list are at least this far in the fixed space alone.
            if fixed_distance >= kth:
                walked = m
                break
            j = near[i, m]
            if j == i:
                continue
            d = fixed_distance
            if one_x:
                d = max(d, abs(x_column[i] - x_column[j]))
            else:
                for c in range(fixed, width):  # the permuted space has few columns: no early exit
                    d = max(d, abs(joint[i, c] - joint[j, c]))
            if d < kth:
                _insert(best, d)
                kth = best[k - 1]
        if walked < length or length == n or kth <= near_distance[i, length - 1]:
            eps = kth
        else:
            eps = _kth_by_scan(joint, order, rank, k, i)
        # Strictly closer than eps: within the largest float below it.
        r = np.nextafter(eps, 0.0)
        if length == n or near_distance[i, length - 1] > r:
            # the rows past ``walked`` are at least eps away in yz-space
            n_yz[i] = np.searchsorted(near_distance[i, :walked], r, side="right")
        else:
            n_yz[i] = _count_by_scan(joint[:, :fixed], order, rank, r, i)
        n_z[i], n_zx[i] = _window_counts(z_sorted, x_by_z, column, x_by_z_column, z_rank[i],
                                         r)
    return n_yz, n_z, n_zx


@numba.njit(cache=True)
def _window_counts(z_sorted: np.ndarray, x_by_z: np.ndarray, column: np.ndarray,
                   x_by_z_column: np.ndarray, p: int, r: float) -> tuple[int, int]:
    """(rows within max-norm ``r`` of row ``p`` of ``z_sorted`` in z-space, and in (z, x)-space),
    row p included; arrays as for ``ksg_counts``, ``column`` = ``z_sorted[:, 0]``, and with one z
    and one x column ``x_by_z_column`` = ``x_by_z[:, 0]``: then the z count is the window's
    length and the zx count a branch-free pass."""
    lo, hi = _window(column, p, r)
    in_zx = 0
    if x_by_z_column.size:
        v = x_by_z_column[p]
        for q in range(lo, hi):
            in_zx += abs(x_by_z_column[q] - v) <= r
        return hi - lo, in_zx
    dz, dx = z_sorted.shape[1], x_by_z.shape[1]
    in_z = 0
    for q in range(lo, hi):
        inside = True
        for c in range(1, dz):
            if abs(z_sorted[p, c] - z_sorted[q, c]) > r:
                inside = False
                break
        if not inside:
            continue
        in_z += 1
        for c in range(dx):
            if abs(x_by_z[p, c] - x_by_z[q, c]) > r:
                inside = False
                break
        in_zx += inside
    return in_z, in_zx


@numba.njit(cache=True)
def _window(column: np.ndarray, p: int, r: float) -> tuple[int, int]:
    """[lo, hi): the positions q of the sorted ``column`` (n,) with ``|column[q] - column[p]| <=
    r``, by two binary searches. The rounded difference is monotone in ``column[q]`` on each side
    of ``p``, so this is exactly the set that a scan outward from ``p`` with that test finds."""
    v = column[p]
    a, b = 0, p
    while a < b:  # first q <= p inside
        mid = (a + b) // 2
        if abs(column[mid] - v) <= r:
            b = mid
        else:
            a = mid + 1
    lo = a
    a, b = p + 1, column.size
    while a < b:  # first q > p outside
        mid = (a + b) // 2
        if abs(column[mid] - v) <= r:
            a = mid + 1
        else:
            b = mid
    return lo, a


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
