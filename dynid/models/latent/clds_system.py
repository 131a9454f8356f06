"""The conditionally linear system of ``clds`` (``clds.py``) as arrays: the Fourier weights of
A(u) and b(u), the shared observation and first state, and the change of latent coordinates
that keeps the latent noise the identity.

Why Q = I rather than a fitted Q (an INFERRED departure from the brief's code): the likelihood
is unchanged by a linear change of latent coordinates, so Q = I only fixes the coordinates (it
whitens them, as the brief whitens by Q before comparing fixed points); with Q free, the prior
on b would keep shrinking the latent scale (z -> s z, b -> s b, C -> C / s, Q -> s^2 Q leaves the
likelihood alone and lowers ||W_b||), an objective with no maximum.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from dynid.linear.kalman import Course, StateSpace
from dynid.models.latent.fourier import FourierBasis


@dataclass(frozen=True)
class ConditionalSystem:
    """weights (L, n + 1, n): [A(u) beta^-1 b(u)]^T = sum_l phi_l(u) weights[l], beta =
    ``drive_scale`` (b's prior sd over A's); c (p, n), offset (p,), r (p,) the observation;
    m0 (n,), p0 (n, n) the first state; basis the features phi."""

    weights: np.ndarray
    c: np.ndarray
    offset: np.ndarray
    r: np.ndarray
    m0: np.ndarray
    p0: np.ndarray
    basis: FourierBasis
    drive_scale: float

    @property
    def n_latent(self) -> int:
        return int(self.weights.shape[2])

    def dynamics(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A(u) (G, n, n) and b(u) (G, n) at conditions u (G, M)."""
        n = self.n_latent
        stacked = np.einsum("gl,lij->gji", self.basis.features(u), self.weights)  # (G, n, n + 1)
        return stacked[:, :, :n], self.drive_scale * stacked[:, :, n]

    def at(self, u: np.ndarray) -> StateSpace:
        """The LDS at condition u (M,); its one input is the constant 1, which b(u) multiplies."""
        a, b = self.dynamics(u[None, :])
        n, p = self.n_latent, self.c.shape[0]
        return StateSpace(a=a[0], b=b[0][:, None], c=self.c, d=np.zeros((p, 1)), offset=self.offset,
                          q=np.eye(n), r=self.r, m0=self.m0, p0=self.p0)

    def log_prior(self) -> float:
        """log p(W) up to its constant."""
        return -0.5 * float(np.sum(self.weights**2))


@dataclass(frozen=True)
class ConditionDynamics:
    """A fitted model's dynamics against the condition: names (M,) of the condition columns;
    over the grid (G, M): eigenvalues (G, n) of A(u) per step dt, by decreasing modulus;
    fixed_points (G, n) latent z*(u), NaN where I - A(u) is singular; fixed_observations
    (G, p) C z*(u) + c; training (K, M) the training trials' conditions."""

    names: tuple[str, ...]
    grid: np.ndarray
    eigenvalues: np.ndarray
    fixed_points: np.ndarray
    fixed_observations: np.ndarray
    training: np.ndarray


def course(model: StateSpace, steps: int) -> Course:
    """``model`` (from ``ConditionalSystem.at``) over ``steps`` samples."""
    return model.course(steps, np.ones((steps, 1)))


def whitened(system: ConditionalSystem, q: np.ndarray) -> ConditionalSystem:
    """The same model in coordinates z' = L^-1 z where q = L L^T is the noise covariance of z,
    so that the noise of z' is I: A' = L^-1 A L, b' = L^-1 b, C' = C L."""
    root = np.linalg.cholesky(q)
    inverse = np.linalg.inv(root)
    n = system.n_latent
    lift = np.eye(n + 1)
    lift[:n, :n] = root.T
    return replace(
        system, weights=lift @ system.weights @ inverse.T, c=system.c @ root,
        m0=inverse @ system.m0, p0=inverse @ system.p0 @ inverse.T,
    )
