"""The continuous-time linear-Gaussian state-space model sampled at arbitrary times

    dz = (F z + G u) dt + dW,   E[dW dW^T] = Sigma dt        (time in units of the time column)
    y(t_k) = C z(t_k) + D u(t_k) + c + v_k,   v_k ~ N(0, diag(r))

and its exact discretisation over an interval h, with u held constant over the interval (zero
order hold from the sample at its start):

    A(h) = e^{F h},   B(h) = int_0^h e^{F s} ds G,   Q(h) = int_0^h e^{F s} Sigma e^{F^T s} ds.

A and B are blocks of one matrix exponential, Q comes from Van Loan's (1978) block exponential
(or all three from F's eigendecomposition, which is faster).
Torch computes them, for a whole batch of intervals at once and differentiably, so that EM's
M-step can maximise over F, G and Sigma (``dynid.models.latent.continuous_em``); torch is
imported inside the functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dynid.linear.kalman import Course, StateSpace, input_rows

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class ContinuousStateSpace:
    """Parameters: f (n, n) the generator, g (n, m) the inputs' rate, sigma (n, n) the diffusion
    (noise covariance per unit of time); c (p, n), d (p, m), offset (p,), r (p,), m0 (n,), p0
    (n, n) as in ``StateSpace``."""

    f: np.ndarray
    g: np.ndarray
    sigma: np.ndarray
    c: np.ndarray
    d: np.ndarray
    offset: np.ndarray
    r: np.ndarray
    m0: np.ndarray
    p0: np.ndarray

    @property
    def n_latent(self) -> int:
        return int(self.f.shape[0])

    def transitions(self, h: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A (K, n, n), B (K, n, m), Q (K, n, n) over the intervals h (K,)."""
        import torch

        with torch.no_grad():
            a, b, q = discretise(
                *(torch.from_numpy(np.ascontiguousarray(x, dtype=float)) for x in (self.f, self.g, self.sigma)),
                torch.from_numpy(np.asarray(h, dtype=float)),
            )
        return a.numpy(), b.numpy(), q.numpy()

    def course(self, t: np.ndarray, u: np.ndarray | None = None) -> Course:
        """The model over samples at times t (T,) with inputs u (T, m) (None: none)."""
        u = input_rows(u, t.shape[0], self.g.shape[1])
        a, b, q = self.transitions(np.diff(t))
        return Course(
            a=a,
            q=q,
            drive=np.einsum("kij,kj->ki", b, u[:-1]),
            c=self.c,
            offsets=self.offset + u @ self.d.T,
            r=self.r,
            m0=self.m0,
            p0=self.p0,
        )

    def at_step(self, h: float) -> StateSpace:
        """The discrete model of samples ``h`` apart."""
        a, b, q = self.transitions(np.array([h]))
        return StateSpace(
            a=a[0], b=b[0], c=self.c, d=self.d, offset=self.offset, q=q[0], r=self.r, m0=self.m0, p0=self.p0
        )


def discretise(
    f: torch.Tensor, g: torch.Tensor, sigma: torch.Tensor, h: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A(h) (K, n, n), B(h) (K, n, m), Q(h) (K, n, n) for intervals h (K,) (module docstring).

    Through the eigendecomposition F = V diag(lambda) V^-1 when V is well conditioned: then
    every interval costs O(n^2) elementwise work instead of a matrix exponential (about 20
    times faster, with gradients); by block matrix exponentials otherwise (repeated
    eigenvalues, where eigenvectors are ill-defined).
    """
    import torch

    values, vectors = torch.linalg.eig(f)
    if float(torch.linalg.cond(vectors.detach())) < EIGENVECTOR_CONDITION:
        return _by_eigenvectors(values, vectors, g, sigma, h)
    return _by_exponentials(f, g, sigma, h)


# Largest condition number of F's eigenvectors that discretise uses them at.
EIGENVECTOR_CONDITION = 1e6


def _phi(x: torch.Tensor) -> torch.Tensor:
    """(e^x - 1) / x elementwise (complex), by its series near 0."""
    import torch

    small = x.abs() < 1e-5
    safe = torch.where(small, torch.ones_like(x), x)
    return torch.where(small, 1 + x / 2 + x * x / 6, (torch.exp(safe) - 1) / safe)


def _by_eigenvectors(
    values: torch.Tensor, vectors: torch.Tensor, g: torch.Tensor, sigma: torch.Tensor, h: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """With F = V L V^-1: A = V e^{L h} V^-1, B = V phi(L h) h V^-1 G and, with
    S = V^-1 Sigma V^-H, Q = V [S_ij phi((l_i + conj l_j) h) h] V^H."""
    import torch

    inverse = torch.linalg.inv(vectors)
    step = h.to(values.dtype)[:, None]
    scaled = values[None, :] * step  # (K, n)
    a = (vectors * torch.exp(scaled)[:, None, :]) @ inverse
    b = (vectors * (_phi(scaled) * step)[:, None, :]) @ (inverse @ g.to(values.dtype))
    rotated = inverse @ sigma.to(values.dtype) @ inverse.conj().T
    pairs = values[:, None] + values.conj()[None, :]
    q = vectors @ (rotated * _phi(pairs * step[:, :, None]) * step[:, :, None]) @ vectors.conj().T
    q = q.real
    return a.real, b.real, 0.5 * (q + q.transpose(1, 2))


def _by_exponentials(
    f: torch.Tensor, g: torch.Tensor, sigma: torch.Tensor, h: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A and B as blocks of expm([[F, G], [0, 0]] h) = [[A, B], [0, I]]; Q by Van Loan:
    expm([[-F, Sigma], [0, F^T]] h) = [[., V], [0, A^T]] and Q = A V."""
    import torch

    n, m = f.shape[0], g.shape[1]
    scale = h[:, None, None]
    drift = torch.cat([torch.cat([f, g], dim=1), torch.zeros((m, n + m), dtype=f.dtype)], dim=0)
    exp_drift = torch.linalg.matrix_exp(drift * scale)
    a, b = exp_drift[:, :n, :n], exp_drift[:, :n, n:]
    zeros = torch.zeros((n, n), dtype=f.dtype)
    van_loan = torch.cat([torch.cat([-f, sigma], dim=1), torch.cat([zeros, f.T], dim=1)], dim=0)
    q = a @ torch.linalg.matrix_exp(van_loan * scale)[:, :n, n:]
    return a, b, 0.5 * (q + q.transpose(1, 2))


def from_discrete(model: StateSpace, h: float, generator: np.ndarray) -> ContinuousStateSpace:
    """The continuous model whose samples ``h`` apart follow ``model``, given its generator
    F (n, n) (a real logarithm of A, divided by h: see ``ctlds``): G solves B = Gamma G with
    Gamma = int_0^h e^{F s} ds; Sigma solves the linear equation Q(h) = Q, column by column of
    the map Sigma -> Q(h), symmetrised and clipped to be positive semidefinite."""
    import torch

    n = model.n_latent
    f = torch.from_numpy(np.ascontiguousarray(generator, dtype=float))
    eye = torch.eye(n, dtype=torch.float64)
    step = torch.tensor([h], dtype=torch.float64)
    with torch.no_grad():
        _, gamma, _ = discretise(f, eye, torch.zeros((n, n), dtype=torch.float64), step)
        # The map Sigma -> Q(h) is linear: its columns are Q(h) of the unit matrices.
        units = torch.eye(n * n, dtype=torch.float64).reshape(n * n, n, n)
        columns = torch.stack([discretise(f, eye[:, :0], unit, step)[2][0] for unit in units])
    linear_map = columns.reshape(n * n, n * n).T.numpy()
    sigma = np.linalg.lstsq(linear_map, model.q.reshape(-1), rcond=None)[0].reshape(n, n)
    values, vectors = np.linalg.eigh(0.5 * (sigma + sigma.T))
    floor = 1e-9 * max(float(values.max()), np.finfo(float).tiny)
    sigma = (vectors * np.maximum(values, floor)) @ vectors.T
    g = np.linalg.solve(gamma[0].numpy(), model.b)
    return ContinuousStateSpace(
        f=np.asarray(generator, dtype=float), g=g, sigma=sigma, c=model.c, d=model.d,
        offset=model.offset, r=model.r, m0=model.m0, p0=model.p0,
    )


def principal_generator(a: np.ndarray, h: float) -> np.ndarray:
    """F = log(A) / h with the principal matrix logarithm (eigenvalue imaginary parts in
    (-pi/h, pi/h]); its real part where A has eigenvalues on the negative real axis, which have
    no real logarithm (``ctlds`` reports that case)."""
    from scipy.linalg import logm

    return np.real(logm(a)) / h
