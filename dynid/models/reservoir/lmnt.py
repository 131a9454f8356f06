"""Linearised noise training of the read-out (LMNT; Wikner, Harvey, Girvan, Hunt, Pomerance,
Antonsen & Ott 2024, "Stabilizing machine learning prediction of dynamics: novel
noise-inspired regularization tests with reservoir computing", Neural Networks 170: 94-110).

Training a read-out on inputs with added noise eps ~ N(0, beta I) (in standardised units) and
clean targets makes the closed loop robust to its own errors, which are what a free run feeds
back into its inputs. To first order in the noise the expected loss of noise training is the
clean loss plus a Tikhonov term built from the Jacobians of the read-out's features with
respect to the noisy inputs, so the read-out is solved in closed form, deterministically, with
no noisy copies of the data.

Our read-out predicts the increment ``z_{t+1} - z_t`` from features f_t (k,) that contain the
input z_t itself (the esn's ``[r_t, z_t]``, the ngrc's linear block). With noise eps_j on
inputs z_{t-j} that f_t depends on, and the target z_{t+1} kept clean, the model's next state
``z_t + eps_0 + f_t W + b`` errs by ``residual - eps_0 - sum_j eps_j^T J_tj^T W`` (J_tj = d f_t /
d z_{t-j}, (k, d)), whose expected square adds

    beta * mean_t sum_j || delta_j I_d + J_tj^T W ||_F^2        (delta_j = 1 for j = 0 only)

to the mean squared error. Its gradient changes the normal equations of the centred read-out
(``readout.RidgeSolver``) to

    (F^T F / N + ridge I + beta G) W = F^T Y / N - beta X,
    G = mean_t sum_j J_tj J_tj^T (k, k),    X = mean_t J_t0 (k, d).

The paper's output layer predicts z_{t+1} itself, its features holding z_t: its W is ours plus
the identity on the z block, and with that substitution the two problems are the same (the
paper's pure Jacobian Gram term becomes G plus the cross term X here). Where we differ:

- Noise steps: the paper propagates each step's noise through k reservoir steps (its k, a
  hyperparameter). The esn's ``lmnt_steps`` is that k, default 1: the current input only
  (J_t0 = [a diag(1 - tanh^2) W_in; I_d], as cheap as the feature Gram matrix), because each
  further step costs a sparse product and an (n, N d) x (N d, n) Gram product, and k = 10 was
  no better than k = 1 from x alone (benchmarks/README.md, round 11). The ngrc has no state
  beyond its delay window, so noise on every sample of the window (all its delays) is exact
  multi-noise training's first order, and that is what it uses.
- beta: the paper tunes the noise regulariser with the Tikhonov one by validation forecasts
  (valid time among stable runs); here beta is chosen with the ridge from ``LMNT_GRID`` by the
  same held-out closed-loop skill (``readout.cross_validated_skill``), ties going to the larger
  beta, then the larger ridge, and the backends' geometry gate then sees the chosen read-out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Candidate noise variances beta, standardised units (data scaled to unit variance): none, then
# from 1 % to 30 % noise amplitude (beta = amplitude^2).
LMNT_GRID = (0.0, 1e-4, 1e-3, 1e-2, 1e-1)


@dataclass(frozen=True)
class NoisePenalty:
    """Sums over ``rows`` design rows of the features' input-noise sensitivity: ``gram`` (k, k)
    = sum_t sum_j J_tj J_tj^T and ``cross`` (k, d) = sum_t J_t0, J_tj = d features_t / d
    z_{t-j} (standardised units). Sums, not means, so that a held-out block's is subtracted."""

    gram: np.ndarray
    cross: np.ndarray
    rows: int

    def __sub__(self, other: NoisePenalty) -> NoisePenalty:
        return NoisePenalty(self.gram - other.gram, self.cross - other.cross,
                            self.rows - other.rows)

    def mean(self) -> tuple[np.ndarray, np.ndarray]:
        """(G, X): the means per row that enter the normal equations (module docstring)."""
        count = max(self.rows, 1)
        return self.gram / count, self.cross / count

    @classmethod
    def of_gains(cls, gains: np.ndarray, matrix: np.ndarray) -> NoisePenalty:
        """The penalty of Jacobians diag(gains_t) @ matrix, one noisy input only: gains (N,
        k), matrix (k, d). Then sum_t J_t J_t^T = (matrix matrix^T) * (gains^T gains)
        elementwise, one (k, k) product of the gains instead of N outer products."""
        return cls((matrix @ matrix.T) * (gains.T @ gains), gains.sum(axis=0)[:, None] * matrix,
                   gains.shape[0])

    @classmethod
    def of_jacobians(cls, jacobians: np.ndarray, current: int) -> NoisePenalty:
        """The penalty of Jacobians (N, k, m) with respect to m noisy input coordinates, each
        with its own independent noise, whose first ``current`` are the current input z_t
        (the d coordinates the increment's target is taken from)."""
        flat = np.moveaxis(jacobians, 1, 0).reshape(jacobians.shape[1], -1)  # (k, N m)
        return cls(flat @ flat.T, jacobians[:, :, :current].sum(axis=0), jacobians.shape[0])
