"""Periodic PDEs with known equations, solved spectrally: ground truth for ``dynid symbolic --pde``.

Each system is u_t = L u + N(u) on a periodic box, L diagonal in Fourier space (diffusion,
dispersion, hyperdiffusion), N the nonlinear rest. Time stepping: exponential time differencing
RK4 (ETDRK4, Cox & Matthews 2002) with the phi-function coefficients evaluated by contour
integrals (Kassam & Trefethen 2005), which is stable for stiff L (u_xxxx) at steps set by N
alone and fourth-order accurate; the products in N are dealiased by the 2/3 rule.

``PDE_SYSTEMS`` maps a name to a function giving its default run, a ``FieldRun`` whose ``truth``
lists the exact terms in the names ``dynid.symbolic.pde`` gives them; ``scalar_pde_1d`` solves
other 1-D scalar equations of the same shape, ``with_noise`` adds measurement noise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# Contour points for the ETDRK4 coefficients: 64 on a unit circle around each h L give them to
# round-off (the full circle, since L is complex for dispersive equations).
CONTOUR_POINTS = 64


@dataclass(frozen=True)
class FieldRun:
    """A solved PDE: ``values`` (n_fields, n_t, *n_space) sampled at ``t`` (n_t,) on the
    uniform periodic grids ``space`` (one (n,) array per spatial axis, named ``space_names``);
    ``truth`` per field {term name: coefficient} of its exact equation."""

    names: tuple[str, ...]
    values: np.ndarray
    t: np.ndarray
    space: tuple[np.ndarray, ...]
    space_names: tuple[str, ...]
    truth: tuple[dict[str, float], ...]


def etdrk4(
    linear: np.ndarray, nonlinear: Callable[[np.ndarray], np.ndarray], v0: np.ndarray,
    step: float, n_steps: int, every: int,
) -> np.ndarray:
    """ETDRK4 for v' = linear * v + nonlinear(v) in Fourier space, v of any shape (``linear``
    broadcasts against it); returns the states (n_steps // every + 1, *v0.shape), the first
    being v0 and then every ``every``-th step."""
    h = step
    e, e2 = np.exp(h * linear), np.exp(h * linear / 2)
    roots = np.exp(2j * np.pi * (np.arange(CONTOUR_POINTS) + 0.5) / CONTOUR_POINTS)
    lr = h * linear[..., None] + roots
    q = h * np.mean((np.exp(lr / 2) - 1) / lr, axis=-1)
    f1 = h * np.mean((-4 - lr + np.exp(lr) * (4 - 3 * lr + lr**2)) / lr**3, axis=-1)
    f2 = h * np.mean((2 + lr + np.exp(lr) * (lr - 2)) / lr**3, axis=-1)
    f3 = h * np.mean((-4 - 3 * lr - lr**2 + np.exp(lr) * (4 - lr)) / lr**3, axis=-1)
    v = np.asarray(v0, dtype=complex)
    out = [v]
    for k in range(1, n_steps + 1):
        nv = nonlinear(v)
        a = e2 * v + q * nv
        na = nonlinear(a)
        b = e2 * v + q * na
        nb = nonlinear(b)
        c = e2 * a + q * (2 * nb - nv)
        v = e * v + nv * f1 + 2 * (na + nb) * f2 + nonlinear(c) * f3
        if k % every == 0:
            out.append(v)
    return np.array(out)


def wavenumbers(n: int, length: float) -> np.ndarray:
    """Angular wavenumbers (n,) of an n-point periodic grid of period ``length`` (FFT order)."""
    return 2 * np.pi * np.fft.fftfreq(n, d=length / n)


def _dealias(n: int) -> np.ndarray:
    """(n,) mask keeping the lower two thirds of the wavenumbers (Orszag's 2/3 rule)."""
    return np.abs(np.fft.fftfreq(n, d=1.0 / n)) < n / 3


def _grid(n: int, lo: float, hi: float) -> np.ndarray:
    return lo + (hi - lo) * np.arange(n) / n


def scalar_pde_1d(
    linear_symbol: Callable[[np.ndarray], np.ndarray], flux: float, u0: Callable[[np.ndarray], np.ndarray],
    n: int, lo: float, hi: float, step: float, sample: float, t_end: float, truth: dict[str, float],
    t_start: float = 0.0,
) -> FieldRun:
    """u_t = L u + flux (u^2)_x on [lo, hi), L's Fourier symbol ``linear_symbol(k)``; sampled
    every ``sample`` from ``t_start`` (a transient before it is dropped) to ``t_end``."""
    x = _grid(n, lo, hi)
    k = wavenumbers(n, hi - lo)
    keep = _dealias(n)

    def nonlinear(v: np.ndarray) -> np.ndarray:
        u = np.real(np.fft.ifft(v * keep))
        return flux * 1j * k * np.fft.fft(u * u)

    every = int(round(sample / step))
    states = etdrk4(linear_symbol(k), nonlinear, np.fft.fft(u0(x)), step, int(round(t_end / step)), every)
    u = np.real(np.fft.ifft(states, axis=-1))
    t = np.arange(u.shape[0]) * sample
    first = int(round(t_start / sample))
    return FieldRun(("u",), u[None, first:], t[first:] - t[first], (x,), ("x",), (truth,))


def burgers(nu: float = 0.1) -> FieldRun:
    """Viscous Burgers u_t = -u u_x + nu u_xx, a Gaussian steepening into a shock, on [-8, 8)."""
    return scalar_pde_1d(
        lambda k: -nu * k**2, -0.5, lambda x: np.exp(-((x + 2) ** 2)),
        n=256, lo=-8.0, hi=8.0, step=0.01, sample=0.1, t_end=10.0, truth={"u*u_x": -1.0, "u_xx": nu},
    )


def kdv() -> FieldRun:
    """Korteweg-de Vries u_t = -6 u u_x - u_xxx: two solitons (speeds 1 and 0.25) colliding on
    [-30, 30)."""
    def solitons(x: np.ndarray) -> np.ndarray:
        return sum(c / 2 / np.cosh(np.sqrt(c) / 2 * (x - a)) ** 2 for c, a in ((1.0, -20.0), (0.25, -5.0)))

    return scalar_pde_1d(
        lambda k: 1j * k**3, -3.0, solitons,
        n=256, lo=-30.0, hi=30.0, step=0.005, sample=0.2, t_end=20.0, truth={"u*u_x": -6.0, "u_xxx": -1.0},
    )


def kuramoto_sivashinsky() -> FieldRun:
    """Kuramoto-Sivashinsky u_t = -u u_x - u_xx - u_xxxx on [0, 32 pi), past its first
    transient (sampled from t = 40 to 100)."""
    return scalar_pde_1d(
        lambda k: k**2 - k**4, -0.5, lambda x: np.cos(x / 16) * (1 + np.sin(x / 16)),
        n=128, lo=0.0, hi=32 * np.pi, step=0.025, sample=0.4, t_end=100.0, t_start=40.0,
        truth={"u*u_x": -1.0, "u_xx": -1.0, "u_xxxx": -1.0},
    )


def lambda_omega(d: float = 0.1, beta: float = 1.0, n: int = 64, half: float = 10.0) -> FieldRun:
    """2-D lambda-omega reaction-diffusion (a rotating spiral), A^2 = u^2 + v^2:
    u_t = d lap(u) + (1 - A^2) u + beta A^2 v,  v_t = d lap(v) - beta A^2 u + (1 - A^2) v,
    on [-half, half)^2, sampled every 0.1 up to t = 10."""
    x = _grid(n, -half, half)
    k = wavenumbers(n, 2 * half)
    kx, ky = np.meshgrid(k, k, indexing="ij")
    keep = np.outer(_dealias(n), _dealias(n))
    xx, yy = np.meshgrid(x, x, indexing="ij")
    radius, angle = np.hypot(xx, yy), np.angle(xx + 1j * yy)
    u0 = np.tanh(radius) * np.cos(angle - radius)
    v0 = np.tanh(radius) * np.sin(angle - radius)

    def nonlinear(w: np.ndarray) -> np.ndarray:
        u, v = np.real(np.fft.ifft2(w * keep, axes=(-2, -1)))
        a2 = u * u + v * v
        # The linear parts (u, v) sit in the stiff operator, the rest here.
        return np.fft.fft2(np.stack([-a2 * u + beta * a2 * v, -beta * a2 * u - a2 * v]), axes=(-2, -1))

    linear = np.broadcast_to(1.0 - d * (kx**2 + ky**2), (2, n, n))
    states = etdrk4(linear, nonlinear, np.fft.fft2(np.stack([u0, v0]), axes=(-2, -1)), 0.05, 200, 2)
    fields = np.real(np.fft.ifft2(states, axes=(-2, -1))).transpose(1, 0, 2, 3)
    t = np.arange(fields.shape[1]) * 0.1
    truth = (
        {"u": 1.0, "u**3": -1.0, "u*v**2": -1.0, "u**2*v": beta, "v**3": beta, "lap(u)": d},
        {"v": 1.0, "v**3": -1.0, "u**2*v": -1.0, "u*v**2": -beta, "u**3": -beta, "lap(v)": d},
    )
    return FieldRun(("u", "v"), fields, t, (x, x), ("x", "y"), truth)


PDE_SYSTEMS: dict[str, Callable[[], FieldRun]] = {
    "burgers": burgers,
    "kdv": kdv,
    "kuramoto-sivashinsky": kuramoto_sivashinsky,
    "lambda-omega": lambda_omega,
}


def with_noise(run: FieldRun, level: float, seed: int) -> FieldRun:
    """``run`` with white Gaussian noise of ``level`` times each field's RMS added."""
    rng = np.random.default_rng(seed)
    rms = np.sqrt(np.mean(run.values**2, axis=tuple(range(1, run.values.ndim)), keepdims=True))
    noisy = run.values + level * rms * rng.standard_normal(run.values.shape)
    return FieldRun(run.names, noisy, run.t, run.space, run.space_names, run.truth)
