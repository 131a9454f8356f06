"""Dynamic mode decomposition: exact DMD (Tu et al. 2014) and DMDc (Proctor et al. 2016).

The model is linear and discrete in time, one step = ``dt``::

    x_{k+1} = A x_k              (no inputs)
    x_{k+1} = A x_k + B u_k      (inputs: the state at k+1 depends on the input at k)

Snapshot pairs (x_k, x_{k+1}) are taken within each trial only. With d variables the d x d
operator A and the d x m matrix B are stored directly, which is what simulation needs; that is
fine up to a few hundred variables.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dynid.data.dataset import Dataset, Trial
from dynid.errors import DataError
from dynid.linear.design import lagged_design, trial_arrays
from dynid.linear.dmd import SnapshotFactors, dmdc_of, exact_dmd_of
from dynid.linear.dynamics import rollout, sort_by_modulus
from dynid.linear.moments import LaggedMoments
from dynid.metrics.forecast import one_step_metrics, one_step_metrics_from_sums
from dynid.models.base import Backend, Capabilities, Hyperparameters, expect_array, param


@dataclass(frozen=True)
class DMDParams(Hyperparameters):
    rank: int | None = param(
        None,
        "number of DMD modes (SVD truncation rank); none = Gavish-Donoho optimal hard "
        "threshold where the dropped singular values look like noise, else all nonzero ones",
    )
    input_rank: int | None = param(
        None,
        "DMDc only: truncation rank of the stacked [states; inputs] snapshot matrix "
        "(Proctor's p); none = Gavish-Donoho threshold, never below rank",
    )

    def __post_init__(self) -> None:
        if self.rank is not None and self.rank < 1:
            raise ValueError(f"rank must be a positive integer or none, not {self.rank}")
        if self.input_rank is not None and self.input_rank < 1:
            raise ValueError(
                f"input_rank must be a positive integer or none, not {self.input_rank}"
            )
        if (
            self.rank is not None
            and self.input_rank is not None
            and self.input_rank < self.rank
        ):
            raise ValueError(f"input_rank ({self.input_rank}) must be at least rank ({self.rank})")


class DMD(Backend):
    """Exact DMD / DMDc.

    Fitted arrays (r = rank kept, d variables, m inputs):
    ``A`` (d, d) and ``B`` (d, m) the one-step operators; ``modes`` (d, r) complex unit-norm
    eigenvectors of A; ``eigenvalues`` (r,) complex discrete-time eigenvalues (per step),
    sorted by decreasing modulus; ``continuous_eigenvalues`` (r,) = log(eigenvalues) / dt
    (per time unit); ``growth_rates`` (r,) their real parts (per time unit) and
    ``frequencies`` (r,) their imaginary parts / 2 pi (cycles per time unit).
    """

    name = "dmd"
    summary = "exact DMD / DMDc: a linear one-step operator from snapshot pairs"
    Params = DMDParams
    capabilities = Capabilities(uniform_steps=True, inputs=True)

    # -- fitting -----------------------------------------------------------------------------
    def _fit(self, data: Dataset, *, seed: int | None, device: str, progress: Any) -> None:
        params: DMDParams = self.params  # type: ignore[assignment]
        trials_x, trials_u = trial_arrays(data)
        design = lagged_design(trials_x, 1, trials_u=trials_u, trend=False)
        if design.n_rows < 1:
            raise DataError(f"{data.source}: DMD needs at least one trial with 2 samples")
        y = design.targets.T  # (d, N) states x_{k+1}
        snapshots = design.regressors.T  # (d + m, N) stacked [x_k; u_k], or (d, N) x_k
        targets = SnapshotFactors.of(y, y) if trials_u is not None else None
        self._fit_factors(SnapshotFactors.of(snapshots, y), targets, params)
        predictions = design.regressors @ np.hstack([self.A_, self.B_]).T
        self.metrics_.update(one_step_metrics(design.targets, predictions))
        self.metrics_["n_pairs"] = design.n_rows

    def moments(self, n_variables: int, n_inputs: int) -> LaggedMoments:
        """Running sums of the snapshot pairs (one lag, no intercept)."""
        return LaggedMoments(1, n_variables, n_inputs, trend=False)

    def _fit_moments(self, moments: LaggedMoments) -> None:
        """The fit ``_fit`` makes, from the Gram matrices of the snapshots (equal to round-off
        where the snapshot matrix is well conditioned: its small singular values come from
        eigenvalues of the Gram matrix, which lose half the digits)."""
        params: DMDParams = self.params  # type: ignore[assignment]
        design = moments.design(1)
        if design.n < 1:
            raise DataError("DMD needs at least one trial with 2 samples")
        targets = SnapshotFactors.from_gram(design.yty, design.yty, design.n) if self.inputs_ else None
        self._fit_factors(SnapshotFactors.from_gram(design.ztz, design.zty.T, design.n), targets, params)
        gain = np.hstack([self.A_, self.B_])  # (d, k) one-step predictions = Z gain'
        cross = gain @ design.zty
        sse = np.diag(design.yty - cross - cross.T + gain @ design.ztz @ gain.T)
        self.metrics_.update(one_step_metrics_from_sums(np.clip(sse, 0.0, None), design.target_sst, design.n))
        self.metrics_["n_pairs"] = design.n

    def _fit_factors(self, snapshots: SnapshotFactors, targets: SnapshotFactors | None, params: DMDParams) -> None:
        """Operators and spectrum from the factors of the snapshot matrix (and, with inputs, of
        the target matrix): exact DMD without inputs, DMDc with them."""
        if targets is not None:
            operators, rank, input_rank = dmdc_of(targets, snapshots, self.n_variables, params.rank,
                                                 params.input_rank)
            self.metrics_ = {"rank": rank, "input_rank": input_rank}
        else:
            operators, rank = exact_dmd_of(snapshots, params.rank)
            self.metrics_ = {"rank": rank}
        self.A_, self.B_ = operators.a, operators.b
        self._set_spectrum(operators.reduced, operators.lift)

    def _set_spectrum(self, reduced: np.ndarray, lift: np.ndarray) -> None:
        """Eigenvalues and unit-norm modes of A from its (r, r) reduced operator.

        A has rank r; its other d - r eigenvalues are zero and carry no dynamics.
        """
        values, vectors = np.linalg.eig(reduced)
        order = sort_by_modulus(values)
        modes = lift @ vectors[:, order]
        norms = np.linalg.norm(modes, axis=0)
        self.eigenvalues_ = values[order].astype(complex)
        self.modes_ = (modes / np.where(norms > 0, norms, 1.0)).astype(complex)
        with np.errstate(divide="ignore"):
            self.continuous_eigenvalues_ = np.log(self.eigenvalues_) / self.dt_

    # -- simulation --------------------------------------------------------------------------
    def _simulate(
        self, history: Trial, steps: int, future_inputs: np.ndarray | None
    ) -> np.ndarray:
        """x_{k+1} = A x_k + B u_k from the last history sample.

        Step 1 uses the history's last input row; step j > 1 uses future_inputs[j-2], so the
        last row of future_inputs is not used.
        """
        u_last = history.u[-1] if self.inputs_ and history.u is not None else None
        return rollout(self.A_[None], None, self.B_, history.x[-1:], u_last, future_inputs, steps)

    # -- arrays ------------------------------------------------------------------------------
    def arrays(self) -> dict[str, np.ndarray]:
        self._check_fitted()
        lam = self.continuous_eigenvalues_
        return {
            "A": self.A_,
            "B": self.B_,
            "modes": self.modes_,
            "eigenvalues": self.eigenvalues_,
            "continuous_eigenvalues": lam,
            "growth_rates": lam.real.copy(),
            "frequencies": lam.imag / (2 * np.pi),
        }

    def _load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        d, m = self.n_variables, self.n_inputs
        self.A_ = expect_array(arrays, "A", (d, d)).astype(float)
        self.B_ = expect_array(arrays, "B", (d, m)).astype(float)
        self.eigenvalues_ = expect_array(arrays, "eigenvalues", (None,)).astype(complex)
        r = self.eigenvalues_.shape[0]
        self.modes_ = expect_array(arrays, "modes", (d, r)).astype(complex)
        self.continuous_eigenvalues_ = expect_array(
            arrays, "continuous_eigenvalues", (r,)
        ).astype(complex)
        expect_array(arrays, "growth_rates", (r,))
        expect_array(arrays, "frequencies", (r,))

    def eigenvalues(self) -> np.ndarray | None:
        """The discrete-time (per step) DMD eigenvalues, (r,) complex."""
        self._check_fitted()
        return self.eigenvalues_

