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
    m0 (n,), p0 (n, n) the first state; basis the features phi.

    With a read-out that depends on the condition (``condition_readout``): readout (L, p, n)
    and readout_sd (p,), C(u) = c + sum_l phi_l(u) / sd readout[l] (sd the basis's prior sd, so
    the features have k(u, u) = 1), each entry of row i of ``readout`` with prior N(0,
    readout_sd[i]^2); c has a flat prior (the GP's unknown constant mean). None: C(u) = c."""

    weights: np.ndarray
    c: np.ndarray
    offset: np.ndarray
    r: np.ndarray
    m0: np.ndarray
    p0: np.ndarray
    basis: FourierBasis
    drive_scale: float
    readout: np.ndarray | None = None
    readout_sd: np.ndarray | None = None

    @property
    def n_latent(self) -> int:
        return int(self.weights.shape[2])

    def dynamics(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A(u) (G, n, n) and b(u) (G, n) at conditions u (G, M)."""
        n = self.n_latent
        stacked = np.einsum("gl,lij->gji", self.basis.features(u), self.weights)  # (G, n, n + 1)
        return stacked[:, :, :n], self.drive_scale * stacked[:, :, n]

    def unit_features(self, u: np.ndarray) -> np.ndarray:
        """phi(u) / sd (G, L): the features of a GP of prior sd 1, the read-out's."""
        return self.basis.features(u) / self.basis.sd

    def observation(self, u: np.ndarray) -> np.ndarray:
        """C(u) (G, p, n) at conditions u (G, M)."""
        shared = np.broadcast_to(self.c, (u.shape[0], *self.c.shape))
        if self.readout is None:
            return shared
        return shared + np.einsum("gl,lij->gij", self.unit_features(u), self.readout)

    def at(self, u: np.ndarray) -> StateSpace:
        """The LDS at condition u (M,); its one input is the constant 1, which b(u) multiplies."""
        a, b = self.dynamics(u[None, :])
        n, p = self.n_latent, self.c.shape[0]
        return StateSpace(a=a[0], b=b[0][:, None], c=self.observation(u[None, :])[0], d=np.zeros((p, 1)),
                          offset=self.offset, q=np.eye(n), r=self.r, m0=self.m0, p0=self.p0)

    def log_prior(self) -> float:
        """log p(W) (and of the read-out's weights) up to its constant."""
        total = -0.5 * float(np.sum(self.weights**2))
        if self.readout is not None and self.readout_sd is not None:
            total -= 0.5 * float(np.sum((self.readout / self.readout_sd[None, :, None]) ** 2))
        return total


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
    so that the noise of z' is I: A' = L^-1 A L, b' = L^-1 b, C(u)' = C(u) L (the read-out's
    prior sds scaled with the rows of C)."""
    root = np.linalg.cholesky(q)
    inverse = np.linalg.inv(root)
    n = system.n_latent
    lift = np.eye(n + 1)
    lift[:n, :n] = root.T
    c = system.c @ root
    readout, readout_sd = system.readout, system.readout_sd
    if readout is not None and readout_sd is not None:
        # The read-out's prior sd stays the same fraction of its row of C (clds_readout.py).
        readout_sd = readout_sd * np.linalg.norm(c, axis=1) / np.linalg.norm(system.c, axis=1)
        readout = readout @ root
    return replace(
        system, weights=lift @ system.weights @ inverse.T, c=c, readout=readout, readout_sd=readout_sd,
        m0=inverse @ system.m0, p0=inverse @ system.p0 @ inverse.T,
    )
