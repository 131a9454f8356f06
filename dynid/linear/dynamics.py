"""Linear discrete-time dynamics ``x_t = c + sum_k A_k x_{t-k} + B u_{t-1}``: companion form,
eigenvalue order and rollout (the input timing of ``dynid.linear.design``)."""

from __future__ import annotations

import numpy as np


def companion_matrix(coefs: np.ndarray) -> np.ndarray:
    """The (p d, p d) companion matrix of lag matrices ``coefs`` (p, d, d)."""
    p, d, _ = coefs.shape
    companion = np.zeros((p * d, p * d))
    companion[:d] = np.hstack(list(coefs))
    companion[d:, :-d] = np.eye((p - 1) * d)
    return companion


def sort_by_modulus(values: np.ndarray) -> np.ndarray:
    """Indices ordering eigenvalues by decreasing modulus (stable, so ties keep their order)."""
    return np.argsort(-np.abs(values), kind="stable")


def rollout(
    coefs: np.ndarray,
    intercept: np.ndarray | None,
    input_coefs: np.ndarray | None,
    history_x: np.ndarray,
    history_u_last: np.ndarray | None,
    future_inputs: np.ndarray | None,
    steps: int,
) -> np.ndarray:
    """Iterate ``x_t = c + sum_k A_k x_{t-k} + B u_{t-1}`` for ``steps`` samples.

    coefs: (p, d, d) with coefs[k] = A_{k+1}; intercept: (d,) or None; input_coefs: (d, m) or
    None; history_x: the last p states (p, d), oldest first. Inputs: forecast step j (1-based)
    uses the input at the sample before it, so step 1 uses ``history_u_last`` (m,) (the
    history's last input row) and step j > 1 uses ``future_inputs[j-2]``; the last row of
    ``future_inputs`` (steps, m) is therefore never used. Returns (steps, d).
    """
    # Contiguous copies make the arithmetic (hence the bits) independent of how the arrays were
    # laid out in memory, so a model restored from a file forecasts exactly as the original.
    coefs = np.ascontiguousarray(coefs, dtype=float)
    p, d, _ = coefs.shape
    if intercept is not None:
        intercept = np.ascontiguousarray(intercept, dtype=float)
    if input_coefs is not None:
        input_coefs = np.ascontiguousarray(input_coefs, dtype=float)
    window = [np.ascontiguousarray(row, dtype=float) for row in history_x[-p:]]
    out = np.empty((steps, d))
    for j in range(steps):
        x = np.zeros(d) if intercept is None else intercept.copy()
        for lag in range(1, p + 1):
            x = x + coefs[lag - 1] @ window[-lag]
        if input_coefs is not None and input_coefs.shape[1] > 0:
            u = history_u_last if j == 0 else future_inputs[j - 1]  # type: ignore[index]
            x = x + input_coefs @ np.ascontiguousarray(u, dtype=float)
        out[j] = x
        window = window[1:] + [x]
    return out
