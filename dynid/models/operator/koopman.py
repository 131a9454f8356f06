"""Koopman operator by extended DMD (Williams, Kevrekidis & Rowley 2015) on a dictionary.

The states are lifted to features psi(x) (``dynid.models.operator.dictionaries``), and a linear
one-step operator K with psi(x_{k+1}) ~ K psi(x_k) is fitted by exact DMD on the lifted snapshot
pairs (within each trial), truncated by the SVD rank that ``dmd`` uses (Gavish-Donoho optimal hard
threshold when the dropped singular values look like noise, else all nonzero ones). The states
are columns of every dictionary, so a linear read-out C gives x = C psi exactly; forecasts roll
K on the lifted state and read the states out.

When the dictionary spans a Koopman-invariant subspace (e.g. polynomials of degree 2 for
x' = mu x, y' = lambda (y - x^2), linear in (x, y, x^2)), the eigenvalues of that subspace are
recovered exactly from noise-free data. Kernel EDMD (Williams, Rowley & Kevrekidis 2015) is
EDMD on Nystrom coordinates of a Gaussian kernel. Learned singular functions (METHODS.md §4) and
the autoencoder are not implemented yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from dynid.data.dataset import Dataset, Trial
from dynid.errors import DataError
from dynid.linear.dmd import exact_dmd
from dynid.linear.dynamics import sort_by_modulus
from dynid.metrics.forecast import one_step_metrics
from dynid.models.base import Backend, Capabilities, Hyperparameters, expect_array, param
from dynid.models.operator.dictionaries import (
    DelayDictionary,
    Dictionary,
    NystromDictionary,
    PolynomialDictionary,
    RBFDictionary,
)

BasisName = Literal["poly", "rbf", "delay", "kernel"]


@dataclass(frozen=True)
class KoopmanParams(Hyperparameters):
    basis: BasisName = param(
        "poly",
        "dictionary: poly (monomials up to degree; the default), rbf (Gaussians at k-means++ "
        "centres, median-distance width), delay (the last `delays` states) or kernel (kernel "
        "EDMD, Gaussian kernel in Nystrom coordinates); every one contains 1 and the states. "
        "Learned singular functions and the autoencoder come later",
    )
    degree: int = param(2, "poly: highest total degree of the monomials")
    centers: int = param(20, "rbf: number of Gaussian centres")
    delays: int = param(4, "delay: number of consecutive states in the lifted state")
    landmarks: int = param(
        300,
        "kernel: Nystrom landmarks, a seeded subsample of the states; with at least as many "
        "as distinct states, every state is one and this is exact kernel EDMD",
    )
    rank: int | None = param(
        None,
        "SVD truncation rank of the lifted snapshots; none = Gavish-Donoho optimal hard "
        "threshold where the dropped singular values look like noise, else all nonzero ones",
    )

    def __post_init__(self) -> None:
        for name in ("degree", "centers", "delays", "landmarks"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, not {getattr(self, name)}")
        if self.rank is not None and self.rank < 1:
            raise ValueError(f"rank must be a positive integer or none, not {self.rank}")


class Koopman(Backend):
    """EDMD Koopman operator on a dictionary of observables.

    Fitted arrays (d variables, F features, r = rank kept): ``center``, ``scale`` (d,) the
    standardisation z = (x - center) / scale the dictionary works on; ``operator`` (F, F) K, one
    step of dt on the features; ``readout`` (d, F) C with x = C psi; ``eigenvalues`` (r,)
    complex discrete-time (per step), by decreasing modulus; ``continuous_eigenvalues`` (r,) =
    log(eigenvalues) / dt (per time unit, as ``dmd``'s); ``timescales`` (r,) = -1 / their real
    parts (time units; negative for growing modes); ``modes`` (d, r) complex Koopman modes of
    the states (C times the eigenvectors of K, unit norm); dictionary arrays: ``exponents``
    (F, d) for poly, ``rbf_centers`` (c, d) and ``rbf_width`` (1,) for rbf, ``kernel_landmarks``
    (m, d), ``kernel_width`` (1,) and ``kernel_projection`` (m, p) for kernel.
    """

    name = "koopman"
    summary = "Koopman operator by (kernel) EDMD on a dictionary of observables: eigenvalues, modes"
    Params = KoopmanParams
    capabilities = Capabilities(uniform_steps=True)

    # -- fitting -----------------------------------------------------------------------------
    def _fit(self, data: Dataset, *, seed: int | None, device: str, progress: Any) -> None:
        params: KoopmanParams = self.params  # type: ignore[assignment]
        stacked = np.vstack([trial.x for trial in data.trials])
        self.center_ = stacked.mean(axis=0)
        spread = stacked.std(axis=0)
        self.scale_ = np.where(spread > 0, spread, 1.0)
        d = data.n_variables
        if params.basis == "poly":
            self.dictionary_: Dictionary = PolynomialDictionary.of_degree(d, params.degree)
        elif params.basis == "rbf":
            self.dictionary_ = RBFDictionary.from_states(
                self._standardise(stacked), params.centers, seed
            )
        elif params.basis == "kernel":
            self.dictionary_ = NystromDictionary.from_states(
                self._standardise(stacked), params.landmarks, seed
            )
        else:
            self.dictionary_ = DelayDictionary(params.delays)
        now, later, x_later = self._snapshot_pairs(data)
        operators, rank = exact_dmd(now.T, later.T, params.rank)
        self.operator_ = operators.a
        n_features = now.shape[1]
        self.readout_ = np.zeros((d, n_features))
        self.readout_[:, 0] = self.center_
        self.readout_[:, 1 : d + 1] = np.diag(self.scale_)
        self._set_spectrum(operators.reduced, operators.lift)
        predictions = now @ self.operator_.T @ self.readout_.T
        self.metrics_ = {"rank": rank, "n_features": n_features, "n_pairs": now.shape[0]}
        self.metrics_.update(one_step_metrics(x_later, predictions))

    def _snapshot_pairs(self, data: Dataset) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Lifted states at k and k+1 (N, F) over all trials, and the states at k+1 (N, d)."""
        window = self.dictionary_.window
        now, later, x_later = [], [], []
        for trial in data.trials:
            if trial.n_samples <= window:
                continue
            lifted = self.dictionary_.lift(self._standardise(trial.x))
            now.append(lifted[:-1])
            later.append(lifted[1:])
            x_later.append(trial.x[window:])
        if not now:
            raise DataError(
                f"{data.source}: the koopman model needs a trial of more than {window} samples"
            )
        return np.vstack(now), np.vstack(later), np.vstack(x_later)

    def _standardise(self, x: np.ndarray) -> np.ndarray:
        return (x - self.center_) / self.scale_

    def _set_spectrum(self, reduced: np.ndarray, lift: np.ndarray) -> None:
        """Eigenvalues of K from its (r, r) reduced operator; the modes are the state read-out of
        K's eigenvectors ``lift @ w``, so x_k = sum_j b_j lambda_j^k modes_j."""
        values, vectors = np.linalg.eig(reduced)
        order = sort_by_modulus(values)
        modes = self.readout_ @ (lift @ vectors[:, order])
        norms = np.linalg.norm(modes, axis=0)
        self.eigenvalues_ = values[order].astype(complex)
        self.modes_ = (modes / np.where(norms > 0, norms, 1.0)).astype(complex)
        with np.errstate(divide="ignore"):
            self.continuous_eigenvalues_ = np.log(self.eigenvalues_) / self.dt_

    # -- simulation --------------------------------------------------------------------------
    @property
    def history_length(self) -> int:
        return self.dictionary_.window if hasattr(self, "dictionary_") else 1

    def _simulate(
        self, history: Trial, steps: int, future_inputs: np.ndarray | None
    ) -> np.ndarray:
        """psi_{k+1} = K psi_k from the lifted last history window; x = C psi."""
        window = self.dictionary_.window
        psi = self.dictionary_.lift(self._standardise(history.x[-window:]))[-1]
        operator = np.ascontiguousarray(self.operator_)
        out = np.empty((steps, self.n_variables))
        for j in range(steps):
            psi = operator @ psi
            out[j] = self.readout_ @ psi
        return out

    # -- arrays ------------------------------------------------------------------------------
    def arrays(self) -> dict[str, np.ndarray]:
        self._check_fitted()
        lam = self.continuous_eigenvalues_
        with np.errstate(divide="ignore"):
            timescales = -1.0 / lam.real
        arrays = {
            "center": self.center_,
            "scale": self.scale_,
            "operator": self.operator_,
            "readout": self.readout_,
            "eigenvalues": self.eigenvalues_,
            "continuous_eigenvalues": lam,
            "timescales": timescales,
            "modes": self.modes_,
        }
        if isinstance(self.dictionary_, PolynomialDictionary):
            arrays["exponents"] = self.dictionary_.exponents
        elif isinstance(self.dictionary_, RBFDictionary):
            arrays["rbf_centers"] = self.dictionary_.centers
            arrays["rbf_width"] = np.array([self.dictionary_.width])
        elif isinstance(self.dictionary_, NystromDictionary):
            arrays["kernel_landmarks"] = self.dictionary_.landmarks
            arrays["kernel_width"] = np.array([self.dictionary_.width])
            arrays["kernel_projection"] = self.dictionary_.projection
        return arrays

    def _load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        params: KoopmanParams = self.params  # type: ignore[assignment]
        d = self.n_variables
        self.center_ = expect_array(arrays, "center", (d,)).astype(float)
        self.scale_ = expect_array(arrays, "scale", (d,)).astype(float)
        if params.basis == "poly":
            exponents = expect_array(arrays, "exponents", (None, d)).astype(np.int64)
            self.dictionary_ = PolynomialDictionary(exponents)
        elif params.basis == "rbf":
            centers = expect_array(arrays, "rbf_centers", (params.centers, d)).astype(float)
            width = float(expect_array(arrays, "rbf_width", (1,))[0])
            self.dictionary_ = RBFDictionary(centers, width)
        elif params.basis == "kernel":
            landmarks = expect_array(arrays, "kernel_landmarks", (None, d)).astype(float)
            width = float(expect_array(arrays, "kernel_width", (1,))[0])
            projection = expect_array(
                arrays, "kernel_projection", (landmarks.shape[0], None)
            ).astype(float)
            self.dictionary_ = NystromDictionary(landmarks, width, projection)
        else:
            self.dictionary_ = DelayDictionary(params.delays)
        self.operator_ = expect_array(arrays, "operator", (None, None)).astype(float)
        n_features = self.operator_.shape[0]
        self.readout_ = expect_array(arrays, "readout", (d, n_features)).astype(float)
        self.eigenvalues_ = expect_array(arrays, "eigenvalues", (None,)).astype(complex)
        r = self.eigenvalues_.shape[0]
        self.continuous_eigenvalues_ = expect_array(
            arrays, "continuous_eigenvalues", (r,)
        ).astype(complex)
        self.modes_ = expect_array(arrays, "modes", (d, r)).astype(complex)
        expect_array(arrays, "timescales", (r,))

    def eigenvalues(self) -> np.ndarray | None:
        """The discrete-time (per step) Koopman eigenvalues, (r,) complex."""
        self._check_fitted()
        return self.eigenvalues_
