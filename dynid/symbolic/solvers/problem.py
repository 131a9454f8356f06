"""One equation's least-squares problem, normalised and reduced to p rows (``RegressionProblem``),
and the plain least-squares fit on a given support.

Thresholds of every solver act on *normalised* coefficients (see the package docstring)::

    w_j = coef_j * ||theta[:, j]|| / ||y||        (Euclidean norms over the n rows)
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
from scipy import linalg
from scipy.linalg import lapack

from dynid.errors import DataError
from dynid.symbolic.cache import CACHE

# A column whose squared distance from the span of already chosen (unit-norm) columns is below
# this is treated as redundant: it sits within ~1e-5 rad of that span, and any coefficient it
# received would only fit round-off.
REDUNDANT = 1e-10


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
    # Plain fits by support: the STLSQ path revisits supports, and scoring refits each one.
    _fits: dict[bytes, np.ndarray] = field(default_factory=dict, repr=False)

    @classmethod
    def from_data(cls, theta: np.ndarray, y: np.ndarray) -> RegressionProblem:
        """Normalise and reduce ``theta`` (n, p) and ``y`` (n,); raises DataError on bad input."""
        theta, y = as_regression(theta, y)
        n, p = theta.shape
        factor = column_factor(theta)
        y_norm = float(np.linalg.norm(y)) or 1.0
        r, z, rss_offset = _reduce(theta / factor.col_norm, y / y_norm, factor.r)
        return cls(
            col_norm=factor.col_norm,
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
        """Normalised (ridge) least-squares coefficients w (p,) on ``support``; 0 elsewhere.
        Plain fits (``ridge`` 0) are remembered and returned read-only."""
        if ridge > 0:
            return self._fit(support, ridge)
        key = np.asarray(support, dtype=bool).tobytes()
        if key not in self._fits:
            w = self._fit(support, 0.0)
            w.setflags(write=False)
            self._fits[key] = w
        return self._fits[key]

    def _fit(self, support: np.ndarray, ridge: float) -> np.ndarray:
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


@dataclass(frozen=True, eq=False)
class ColumnFactor:
    """What a regression problem needs of theta (n, p) alone, whatever the target:
    ``col_norm`` (p,) its Euclidean column norms (1 for an all-zero column) and ``r`` (p, p)
    the triangular factor of theta / col_norm by Cholesky QR2, None when theta is not tall
    (n < 2p) or too ill-conditioned for it (``_cholesky_qr2``)."""

    col_norm: np.ndarray
    r: np.ndarray | None


def column_factor(theta: np.ndarray) -> ColumnFactor:
    """``ColumnFactor`` of a finite float theta (n, p), remembered in ``cache.CACHE`` by its
    bytes: every equation is fitted on the same library and rows (each fold's training rows,
    all rows for the refit), and the factorisation, O(n p^2), is the expensive part of a
    problem while everything that depends on the target is O(n p)."""
    key = hashlib.blake2b(np.ascontiguousarray(theta).tobytes() + repr(theta.shape).encode()).digest()
    return CACHE.get("factor", key, lambda: _column_factor(theta))


def _column_factor(theta: np.ndarray) -> ColumnFactor:
    n, p = theta.shape
    col_norm = np.linalg.norm(theta, axis=0)
    col_norm[col_norm == 0] = 1.0
    r = _cholesky_qr2(theta / col_norm) if n >= 2 * p else None
    for shared in (col_norm, r):  # every problem on these columns holds them
        if shared is not None:
            shared.setflags(write=False)
    return ColumnFactor(col_norm, r)


def _reduce(a: np.ndarray, t: np.ndarray, r: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, float]:
    """r (q, p), z (q,), rss_offset with ||t - a w||^2 = ||z - r w||^2 + rss_offset for every w.

    ``a`` (n, p), ``t`` (n,), ``r`` a's Cholesky QR2 factor when it has one (``ColumnFactor``).
    Then z = r^-T a^T t and the residual of the full fit are computed directly. Otherwise
    (n < 2p, nearly dependent columns): Householder QR of [a t], whose last column gives z and
    the residual whatever the rank.
    """
    n, p = a.shape
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


def lstsq_on_support(
    theta: np.ndarray, y: np.ndarray, support: np.ndarray, ridge: float = 0.0
) -> np.ndarray:
    """Least-squares coefficients (p,) of y (n,) on the columns of theta (n, p) in ``support``.

    ``support`` is a (p,) bool mask; coefficients off it are exactly 0. ``ridge`` penalises the
    squared normalised coefficients (module doc), so it is dimensionless.
    """
    problem = RegressionProblem.from_data(theta, y)
    return problem.to_coef(problem.fit(np.asarray(support, dtype=bool), ridge))
