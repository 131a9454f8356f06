"""k-nearest-neighbour information estimators (max-norm, nats) and their permutation tests.

``mi_ksg``: the Kraskov-Stoegbauer-Grassberger estimator 1 of mutual information (Phys. Rev. E
69:066138, 2004); ``cmi_ksg``: its conditional form by Frenzel and Pompe (Phys. Rev. Lett.
99:204101, 2007); ``cmi_permutation_test``: their significance, with the local permutation test
of Runge (AISTATS 2018) when there is a conditioning set. ``CMIEstimator`` does the same for many
``x`` against one fixed ``(y, z)``, reusing what does not depend on ``x`` (what transfer
entropy and PCMCI need).

Every column is standardised (zero mean, unit variance; constant columns are only centred) so the
max-norm balls weigh each coordinate alike. Estimates are not clipped: the estimator's bias can
make them slightly negative when the true value is 0.

Ties. The estimators assume continuous data: counts are of points strictly closer than the
distance to the k-th joint neighbour, and exactly repeated values make that distance zero or sit
on the ball's edge. So a column with repeated values (and only such a column) gets a jitter of
``JITTER`` standard deviations, uniform noise from a generator with a fixed seed: the result stays
a deterministic function of the data, and continuous data is left untouched.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import special
from scipy.spatial import cKDTree

# Jitter scale, in standard deviations, for columns with repeated values (see module docstring).
JITTER = 1e-10
_JITTER_SEED = 20180409
_X, _Y, _Z = 0, 1, 2  # roles, so that x, y and z columns never get the same jitter
# Nearest rows in yz-space listed per row (knn_search.py): enough for the joint k-th neighbour
# and the yz count of most rows at k <= 10; rows needing more are scanned. n x 128 x 16 bytes.
_NEAR_LIST = 128

Rng = np.random.Generator | int | None


def mi_ksg(x: np.ndarray, y: np.ndarray, k: int = 5) -> float:
    """Mutual information I(x; y) in nats, KSG estimator 1.

    x: (n, dx) or (n,); y: (n, dy) or (n,); k: neighbours in the joint space (k < n).
    """
    return cmi_ksg(x, y, None, k)


def cmi_ksg(x: np.ndarray, y: np.ndarray, z: np.ndarray | None = None, k: int = 5) -> float:
    """Conditional mutual information I(x; y | z) in nats (Frenzel-Pompe); ``z=None`` gives MI.

    x: (n, dx), y: (n, dy), z: (n, dz) or None (1-D arrays count as one column); k: neighbours
    in the joint space.
    """
    return CMIEstimator(y, z, k).estimate(x)


def cmi_permutation_test(
    x: np.ndarray,
    y: np.ndarray,
    z: np.ndarray | None,
    *,
    k: int = 5,
    k_perm: int = 5,
    n_permutations: int = 200,
    rng: Rng,
    stop_after: int | None = None,
) -> tuple[float, float]:
    """(estimate, p_value) of I(x; y | z) against the null of conditional independence.

    Null samples permute the rows of ``x``: without ``z`` freely; with ``z`` only among the
    ``k_perm`` nearest neighbours in z-space (the sample itself included), by Runge's restricted
    permutation, which keeps the x-z dependence the null must preserve.
    ``p = (1 + #{null >= estimate}) / (1 + n_permutations)``, so it is never below
    ``1 / (1 + n_permutations)``. ``rng``: a Generator or a seed. ``stop_after``: stop as soon as
    that many null values reach the estimate and return Besag and Clifford's sequential p-value
    ``stop_after / permutations_done`` (valid, and far cheaper for clearly null links); None runs
    all ``n_permutations``.
    """
    estimator = CMIEstimator(y, z, k)
    return estimator.permutation_test(
        x, k_perm=k_perm, n_permutations=n_permutations, rng=rng, stop_after=stop_after
    )


class CMIEstimator:
    """I(x; y | z) for a fixed ``(y, z)`` and any number of ``x``.

    y: (n, dy); z: (n, dz) or None; k: joint-space neighbours. The neighbour lists and sorted
    orders of the (y, z) and z spaces that the searches use (``knn_search.py``) and the
    z-space neighbours used by local permutations are built once.
    """

    def __init__(self, y: np.ndarray, z: np.ndarray | None, k: int = 5) -> None:
        self.y = _prepare(y, _Y)
        self.n = self.y.shape[0]
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k < self.n:
            raise ValueError(f"k must be a whole number in 1..n-1 = {self.n - 1}, got {k!r}")
        self.k = int(k)
        self.z = None if z is None else _prepare(z, _Z)
        if self.z is not None and self.z.shape[0] != self.n:
            raise ValueError(f"y and z have different numbers of rows: {self.n}, {self.z.shape[0]}")
        self._yz = self.y if self.z is None else np.hstack([self.y, self.z])
        # What the searches of every permutation of x share (knn_search.py): each row's nearest
        # rows in yz-space, and the sorted orders of column 0 of y and of z.
        length = min(self.n, _NEAR_LIST)
        self._near_distance, near = cKDTree(self._yz).query(self._yz, k=length, p=np.inf)
        self._near = near.astype(np.intp).reshape(self.n, length)
        self._near_distance = self._near_distance.reshape(self.n, length)
        self._yz_order = _SortedOrder(self._yz[:, 0])
        self._z_order = None if self.z is None else _SortedOrder(self.z[:, 0])
        # z's rows in that order, so that the z and xz counts scan contiguous windows
        self._z_sorted = None if self.z is None else self.z[self._z_order.order]
        # digamma of every count 0..n (the same values as digamma of the counts themselves)
        self._digamma = special.digamma(np.arange(self.n + 1, dtype=float))
        self._z_tree = None if self.z is None else cKDTree(self.z)
        self._z_neighbours: dict[int, np.ndarray] = {}

    def estimate(self, x: np.ndarray) -> float:
        """I(x; y | z) in nats for x of shape (n, dx) or (n,)."""
        return self._estimate_prepared(self._prepare_x(x))

    def permutation_test(
        self,
        x: np.ndarray,
        *,
        k_perm: int = 5,
        n_permutations: int = 200,
        rng: Rng,
        stop_after: int | None = None,
    ) -> tuple[float, float]:
        """(estimate, p_value) as ``cmi_permutation_test`` describes."""
        if n_permutations < 1:
            raise ValueError(f"n_permutations must be >= 1, got {n_permutations!r}")
        if stop_after is not None and stop_after < 1:
            raise ValueError(f"stop_after must be >= 1 or None, got {stop_after!r}")
        null = self.null_sampler(x, k_perm=k_perm, rng=rng)
        exceed, done = null.run(n_permutations, stop_after or n_permutations + 1)
        if stop_after is not None and exceed >= stop_after:
            return null.observed, exceed / done
        return null.observed, (1 + exceed) / (1 + n_permutations)

    def null_sampler(self, x: np.ndarray, *, k_perm: int = 5, rng: Rng) -> NullSampler:
        """The estimate for ``x`` and a source of its permutation null values, drawn on demand
        (for sequential tests, ``montecarlo.py``)."""
        xp = self._prepare_x(x)
        return NullSampler(self, xp, self._estimate_prepared(xp), k_perm, np.random.default_rng(rng))

    def _prepare_x(self, x: np.ndarray) -> np.ndarray:
        xp = _prepare(x, _X)
        if xp.shape[0] != self.n:
            raise ValueError(f"x and y have different numbers of rows: {xp.shape[0]}, {self.n}")
        return xp

    def _estimate_prepared(self, x: np.ndarray) -> float:
        from dynid.causal import knn_search

        if self.z is None:  # the x-space count, by the z-space count's window search
            x_order = _SortedOrder(x[:, 0])
            z_sorted, x_by_z, z_rank = x[x_order.order], x[:, :0], x_order.rank
        else:
            assert self._z_order is not None and self._z_sorted is not None
            z_sorted, x_by_z, z_rank = self._z_sorted, x[self._z_order.order], self._z_order.rank
        n_yz, n_z, n_zx = knn_search.ksg_counts(
            np.hstack([self._yz, x]), self._yz.shape[1], self._near, self._near_distance,
            self._yz_order.order, self._yz_order.rank, self.k, z_sorted, x_by_z, z_rank)
        # The counts include the point itself, so they are the estimator's n_. + 1.
        psi = self._digamma
        if self.z is None:
            n_xz, psi_z = n_z, psi[self.n]  # every point lies in the empty z-space ball
        else:
            n_xz, psi_z = n_zx, psi[n_z]
        return float(special.digamma(self.k) - np.mean(psi[n_xz] + psi[n_yz] - psi_z))

    def _shuffler(self, k_perm: int, rng: np.random.Generator) -> Callable[[], np.ndarray]:
        """A function returning one null permutation of the rows per call."""
        if self.z is None:
            return lambda: rng.permutation(self.n)
        if isinstance(k_perm, bool) or not isinstance(k_perm, (int, np.integer)) or k_perm < 1:
            raise ValueError(f"k_perm must be a whole number >= 1, got {k_perm!r}")
        k_perm = min(int(k_perm), self.n)
        if k_perm not in self._z_neighbours:
            assert self._z_tree is not None
            self._z_neighbours[k_perm] = self._z_tree.query(self.z, k=[*range(1, k_perm + 1)],
                                                            p=np.inf)[1]
        neighbours = self._z_neighbours[k_perm]
        return lambda: restricted_permutation(neighbours, rng)


class NullSampler:
    """Permutation null values of one estimate: ``observed``, ``run`` and ``values``."""

    def __init__(self, estimator: CMIEstimator, x: np.ndarray, observed: float, k_perm: int,
                 rng: np.random.Generator) -> None:
        self.estimator, self.x, self.observed, self.k_perm = estimator, x, observed, k_perm
        self.shuffle = estimator._shuffler(k_perm, rng)

    def run(self, count: int, need: int) -> tuple[int, int]:
        """(exceedances, permutations done): up to ``count`` permutations, stopping once
        ``need`` null values reached ``observed``."""
        values = self.values(count, need)
        return int(np.sum(values >= self.observed)), values.size

    def values(self, count: int, need: int, rng: np.random.Generator | None = None) -> np.ndarray:
        """Up to ``count`` null values (permutations of ``x``), stopping after the one with which
        ``need`` of them reached ``observed``; drawn with ``rng`` (default: the sampler's own)."""
        shuffle = self.shuffle if rng is None else self.estimator._shuffler(self.k_perm, rng)
        out = np.empty(count)
        exceed = 0
        for done in range(count):
            out[done] = self.estimator._estimate_prepared(self.x[shuffle()])
            exceed += out[done] >= self.observed
            if exceed >= need:
                return out[: done + 1]
        return out


def restricted_permutation(neighbours: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One local permutation (Runge 2018, Algorithm 1) as a row index array of shape (n,).

    neighbours: (n, k_perm) row indices, row i holding the k_perm nearest neighbours of z_i
    (itself included). Rows are visited in random order; each takes the first not-yet-used index
    of its shuffled neighbour list, or the last one if all are used, so the draw is without
    replacement wherever the neighbourhoods allow it.
    """
    from dynid.causal import knn_search

    candidates = rng.permuted(neighbours, axis=1)
    return knn_search.take_unused(np.ascontiguousarray(candidates, dtype=np.intp),
                                  rng.permutation(neighbours.shape[0]))


class _SortedOrder:
    """The sorted order of one coordinate (n,) and each row's position in it, for the scans and
    windows of ``knn_search``."""

    def __init__(self, column: np.ndarray) -> None:
        self.order = np.argsort(column, kind="stable")
        self.rank = np.empty_like(self.order)
        self.rank[self.order] = np.arange(self.order.size)


def _prepare(a: np.ndarray, role: int) -> np.ndarray:
    """``a`` as a standardised float (n, d) array, with tie-breaking jitter where values repeat."""
    a = np.asarray(a, dtype=float)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2 or a.shape[0] < 2:
        raise ValueError(f"expected an (n, d) array with n >= 2, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError("the estimators need finite values; remove missing values first")
    std = a.std(axis=0)
    a = (a - a.mean(axis=0)) / np.where(std > 0, std, 1.0)
    tied = [j for j in range(a.shape[1]) if np.unique(a[:, j]).size < a.shape[0]]
    if tied:
        generator = np.random.default_rng((_JITTER_SEED, role))
        a[:, tied] += JITTER * generator.uniform(-1.0, 1.0, (a.shape[0], len(tied)))
    return a
