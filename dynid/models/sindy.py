"""SINDy: sparse identification of nonlinear dynamics (Brunton, Proctor & Kutz 2016), via pysindy.

The model is dx/dt = Xi Theta(x, u) (or, with ``discrete``, x[k+1] = Xi Theta(x[k], u[k])): a
sparse coefficient matrix Xi (d, n_features) over a library Theta of candidate terms in the states
x and inputs u (SINDYc when there are inputs). pysindy estimates the derivatives and solves the
sparse regression; everything after the fit (simulation, model files, equations) uses only Xi and
our own evaluation of Theta, rebuilt from the hyperparameters. A restored model therefore needs
neither pickle nor pysindy, and simulates bit-identically to the model that was saved.

Derivatives: ``finite_difference`` is a 4th-order central finite difference (pysindy's default is
2nd order). On noise-free Lorenz-63 sampled at dt = 0.01 the 2nd-order stencil biases the
coefficients by about 4 %, the 4th-order one by 0.05 %; the price is about 1.3x more noise gain,
and ``smoothed_finite_difference`` (Savitzky-Golay window 11, cubic, then the same stencil) is
there for noisy data.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from itertools import combinations_with_replacement
from typing import Any, Literal, get_args

import numpy as np

from dynid.data.dataset import Dataset, Trial, uniform_step
from dynid.errors import ComputationError, DataError, UsageError
from dynid.models.base import Capabilities, Hyperparameters, expect_array, param
from dynid.models.equations import EquationBackend

LibraryName = Literal["polynomial", "fourier", "polynomial+fourier"]
OptimizerName = Literal["stlsq", "sr3"]
DifferentiationName = Literal["finite_difference", "smoothed_finite_difference"]

# Accuracy order of the finite-difference stencil (see the module docstring for why 4).
FD_ORDER = 4
# Savitzky-Golay window (samples) of smoothed_finite_difference; trials must be at least this long.
SMOOTHING_WINDOW = 11


@dataclass(frozen=True)
class SINDyParams(Hyperparameters):
    """Hyperparameters of the SINDy backend."""

    library: LibraryName = param(
        "polynomial", "candidate terms: polynomials in (x, u), sin/cos of each, or both"
    )
    degree: int = param(2, "highest total degree of the polynomial terms (>= 1)")
    n_frequencies: int = param(1, "fourier terms sin(k z), cos(k z) for k = 1..n_frequencies")
    optimizer: OptimizerName = param(
        "stlsq", "sparse regression: sequentially thresholded least squares, or SR3 (L0)"
    )
    threshold: float = param(
        0.1, "coefficients smaller than this in magnitude are dropped (state units / time)"
    )
    alpha: float = param(
        0.05, "stlsq: ridge penalty of each least-squares step; sr3: relaxation nu (> 0)"
    )
    differentiation: DifferentiationName = param(
        "finite_difference",
        "derivative estimate: 4th-order finite differences, optionally after Savitzky-Golay "
        "smoothing (window 11) for noisy data",
    )
    discrete: bool = param(False, "identify a map x[k+1] = f(x[k], u[k]) instead of an ODE")

    def __post_init__(self) -> None:
        for name, alias in (
            ("library", LibraryName),
            ("optimizer", OptimizerName),
            ("differentiation", DifferentiationName),
        ):
            if getattr(self, name) not in get_args(alias):
                raise ValueError(f"{name} must be one of {', '.join(get_args(alias))}")
        for name in ("degree", "n_frequencies"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        for name in ("threshold", "alpha"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{name} must be a number, got {value!r}")
            if not np.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if self.optimizer == "sr3" and self.alpha <= 0:
            raise ValueError("alpha (the SR3 relaxation nu) must be > 0 when optimizer=sr3")
        if not isinstance(self.discrete, bool):
            raise ValueError(f"discrete must be true or false, got {self.discrete!r}")


class TermLibrary:
    """The candidate terms Theta(z) of z = [x, u], named and ordered exactly as pysindy does.

    Coordinates are named ``x0..x{d-1}`` (states) then ``u0..u{m-1}`` (inputs), pysindy's default,
    so names depend only on the hyperparameters and the widths, never on user column names.
    Order: polynomial terms (bias "1", then by degree, in ``combinations_with_replacement`` order,
    named like "x0^2 x1"), then Fourier terms ("sin(k x0)", "cos(k x0)" for each coordinate, for
    k = 1..n_frequencies).
    """

    def __init__(self, params: SINDyParams, n_variables: int, n_inputs: int) -> None:
        self.coordinates = [f"x{i}" for i in range(n_variables)] + [
            f"u{j}" for j in range(n_inputs)
        ]
        n = len(self.coordinates)
        combos: list[tuple[int, ...]] = []
        if "polynomial" in params.library:
            combos = [
                combo
                for degree in range(params.degree + 1)
                for combo in combinations_with_replacement(range(n), degree)
            ]
        trig: list[tuple[bool, int, int]] = []  # (is_sin, frequency, coordinate)
        if "fourier" in params.library:
            trig = [
                (is_sin, k, j)
                for k in range(1, params.n_frequencies + 1)
                for j in range(n)
                for is_sin in (True, False)
            ]
        self.names = [self._monomial_name(c) for c in combos] + [
            f"{'sin' if s else 'cos'}({k} {self.coordinates[j]})" for s, k, j in trig
        ]
        # Monomials as index rows into [z, 1], padded with the index of the trailing 1.
        width = max([len(c) for c in combos], default=0)
        self._poly_index = np.full((len(combos), max(width, 1)), n, dtype=np.intp)
        for row, combo in enumerate(combos):
            self._poly_index[row, : len(combo)] = combo
        self._n_poly = len(combos)
        self._trig_sin = np.array([s for s, _, _ in trig], dtype=bool)
        self._trig_freq = np.array([k for _, k, _ in trig], dtype=float)
        self._trig_coord = np.array([j for _, _, j in trig], dtype=np.intp)

    def _monomial_name(self, combo: tuple[int, ...]) -> str:
        if not combo:
            return "1"
        powers = sorted(Counter(combo).items())
        return " ".join(
            self.coordinates[j] if p == 1 else f"{self.coordinates[j]}^{p}" for j, p in powers
        )

    def __len__(self) -> int:
        return len(self.names)

    def __call__(self, z: np.ndarray) -> np.ndarray:
        """Theta of z: (N, d + m) -> (N, n_features)."""
        parts = []
        if self._n_poly:
            z1 = np.concatenate([z, np.ones((z.shape[0], 1))], axis=1)
            parts.append(z1[:, self._poly_index].prod(axis=2))
        if self._trig_coord.size:
            arg = z[:, self._trig_coord] * self._trig_freq
            parts.append(np.where(self._trig_sin, np.sin(arg), np.cos(arg)))
        return np.concatenate(parts, axis=1)


def enforce_threshold(
    coefficients: np.ndarray, theta: np.ndarray, target: np.ndarray, threshold: float
) -> np.ndarray:
    """Drop terms below ``threshold`` and refit the rest by least squares, until none is left.

    coefficients: (d, n_features); theta: (N, n_features); target: (N, d). STLSQ thresholds its
    ridge estimates, but the final least-squares refit on the chosen terms can leave a term
    under the threshold (with collinear terms, e.g. 1, x, x^2 on data in [0.2, 0.9], a term the
    ridge kept can come back as 3e-15). Every kept coefficient is then >= threshold in magnitude.
    """
    result = coefficients.copy()
    for i, row in enumerate(result):
        while np.any((row != 0) & (np.abs(row) < threshold)):
            keep = np.abs(row) >= threshold
            row = np.zeros_like(row)
            if keep.any():
                row[keep] = np.linalg.lstsq(theta[:, keep], target[:, i], rcond=None)[0]
        result[i] = row
    return result


class SINDy(EquationBackend):
    """Sparse regression of dx/dt (or x[k+1]) on a library of candidate terms.

    Fitted state: ``coefficients_`` (d, n_features) float64 in the units of dx/dt per feature
    (state units per time unit of the data's time column), and the term library rebuilt from the
    hyperparameters (``feature_names_``).
    """

    name = "sindy"
    summary = "sparse identification of nonlinear dynamics (interpretable equations, SINDYc)"
    Params = SINDyParams
    capabilities = Capabilities(uniform_steps=False, inputs=True)
    params: SINDyParams

    # -- fit -----------------------------------------------------------------------------------
    def _fit(self, data: Dataset, *, seed: int | None, device: str, progress: Any) -> None:
        # Deterministic, CPU-only: seed and device do not apply.
        library = TermLibrary(self.params, data.n_variables, data.n_inputs)
        need = self._min_samples()
        trials = [trial for trial in data.trials if trial.n_samples >= need]
        if not trials:
            raise DataError(
                f"{data.source}: every trial is shorter than the {need} samples the sindy "
                "backend needs"
            )
        estimator = self._pysindy_model()
        xs, targets = self._regression_targets(estimator, trials)
        ts = [trial.t for trial in trials]
        us = [trial.u for trial in trials] if data.inputs else None
        if self.params.discrete:
            estimator.fit(xs, t=ts, u=us, feature_names=library.coordinates)
        else:
            estimator.fit(xs, t=ts, x_dot=targets, u=us, feature_names=library.coordinates)
        if list(estimator.get_feature_names()) != library.names:
            # Our evaluator would simulate other terms than pysindy fitted: refuse, loudly.
            raise ComputationError(
                "internal error: pysindy's term library differs from dynid's; "
                "check the installed pysindy version"
            )
        theta, target = self._design(library, xs, targets, us)
        coefficients = enforce_threshold(
            np.array(estimator.coefficients(), dtype=np.float64), theta, target,
            self.params.threshold,
        )
        if not np.all(np.isfinite(coefficients)):
            raise ComputationError(
                "the sparse regression gave non-finite coefficients; rescale the data or "
                "lower the degree"
            )
        if not np.any(coefficients):
            raise ComputationError(
                f"the sparse regression kept no terms: every coefficient is below threshold "
                f"{self.params.threshold:g}; lower it with -p threshold=..."
            )
        self.coefficients_ = coefficients
        self._library = library
        self.metrics_ = self._fit_metrics(theta, target, data.n_trials - len(trials))

    def _regression_targets(
        self, estimator: Any, trials: list[Trial]
    ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Per trial: the states the library sees (smoothed, if so chosen) and the targets.

        Targets are the estimated dx/dt (n, d), or for maps the next states x[1:] (n - 1, d).
        Computed here rather than inside pysindy so that ``enforce_threshold`` and the
        metrics see exactly the regression pysindy solved.
        """
        if self.params.discrete:
            return [trial.x for trial in trials], [trial.x[1:] for trial in trials]
        differentiate = estimator.differentiation_method
        xs, x_dots = [], []
        for trial in trials:
            # A scalar step takes pysindy's uniform-grid path, ~20x faster than a time array.
            step = uniform_step(trial.t)
            times = trial.t if step is None else step
            x_dots.append(np.asarray(differentiate(trial.x, t=times), dtype=np.float64))
            xs.append(np.asarray(differentiate.smoothed_x_, dtype=np.float64))
        return xs, x_dots

    @staticmethod
    def _design(
        library: TermLibrary,
        xs: list[np.ndarray],
        targets: list[np.ndarray],
        us: list[np.ndarray] | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """All trials' library matrix Theta (N, n_features) and targets (N, d), stacked."""
        rows = []
        for k, (x, target) in enumerate(zip(xs, targets, strict=True)):
            z = x if us is None else np.concatenate([x, us[k]], axis=1)
            rows.append(library(z[: target.shape[0]]))  # maps: x[k] pairs with x[k+1]
        return np.concatenate(rows), np.concatenate(targets)

    def _fit_metrics(self, theta: np.ndarray, target: np.ndarray, skipped: int) -> dict[str, Any]:
        """In-sample R^2 per variable (of dx/dt, or of x[k+1] for maps) and term counts."""
        from sklearn.metrics import r2_score  # what pysindy's score uses

        r2 = r2_score(target, theta @ self.coefficients_.T, multioutput="raw_values")
        metrics: dict[str, Any] = {
            "r2": {v: float(s) for v, s in zip(self.variables_, np.atleast_1d(r2), strict=True)},
            "n_terms": int(np.count_nonzero(self.coefficients_)),
            "n_features": int(self.coefficients_.shape[1]),
        }
        if skipped:
            metrics["trials_skipped"] = skipped
        return metrics

    def _min_samples(self) -> int:
        if self.params.discrete:
            return 2
        if self.params.differentiation == "smoothed_finite_difference":
            return SMOOTHING_WINDOW
        return FD_ORDER + 1  # the stencil width of a first derivative at this order

    def _pysindy_model(self) -> Any:
        """The pysindy estimator the hyperparameters describe (pysindy imported here only)."""
        import pysindy as ps

        p = self.params
        libraries = []
        if "polynomial" in p.library:
            libraries.append(ps.PolynomialLibrary(degree=p.degree, include_bias=True))
        if "fourier" in p.library:
            libraries.append(ps.FourierLibrary(n_frequencies=p.n_frequencies))
        library = libraries[0] if len(libraries) == 1 else ps.ConcatLibrary(libraries)
        if p.optimizer == "stlsq":
            optimizer = ps.STLSQ(threshold=p.threshold, alpha=p.alpha)
        else:
            # L0 weight that makes SR3's prox a hard threshold at `threshold` (Champion et al.
            # 2020, App. S1); unbias refits the kept terms by least squares, as STLSQ does.
            optimizer = ps.SR3(
                reg_weight_lam=p.threshold**2 / (2 * p.alpha),
                regularizer="L0",
                relax_coeff_nu=p.alpha,
                unbias=True,
            )
        if p.discrete:
            return ps.DiscreteSINDy(optimizer=optimizer, feature_library=library)
        if p.differentiation == "finite_difference":
            differentiation = ps.FiniteDifference(order=FD_ORDER, axis=-2)
        else:
            differentiation = ps.SmoothedFiniteDifference(
                smoother_kws={"window_length": SMOOTHING_WINDOW, "polyorder": 3},
                order=FD_ORDER,
                axis=-2,
            )
        return ps.SINDy(
            optimizer=optimizer, feature_library=library, differentiation_method=differentiation
        )

    # -- simulate --------------------------------------------------------------------------------
    def _rhs(self, x: np.ndarray, u: np.ndarray | None) -> np.ndarray:
        """Xi Theta(x, u) for one state x (d,) and input u (m,) or None -> (d,)."""
        z = x if u is None else np.concatenate([x, u])
        return self.coefficients_ @ self._library(z[None, :])[0]

    # -- state -----------------------------------------------------------------------------------
    def arrays(self) -> dict[str, np.ndarray]:
        """``coefficients`` (d, n_features) float64 and ``feature_names`` (n_features,) bytes."""
        self._check_fitted()
        return {
            "coefficients": self.coefficients_,
            "feature_names": np.array(self._library.names, dtype="S"),
        }

    def _load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        library = TermLibrary(self.params, self.n_variables, self.n_inputs)
        coefficients = expect_array(arrays, "coefficients", (self.n_variables, len(library)))
        stored = expect_array(arrays, "feature_names", (len(library),))
        names = [n.decode() if isinstance(n, bytes) else str(n) for n in stored.tolist()]
        if names != library.names:
            raise DataError(
                "the model file's sindy feature names do not match its hyperparameters "
                "(a foreign or edited model file)"
            )
        coefficients = np.array(coefficients, dtype=np.float64)
        if not np.all(np.isfinite(coefficients)):
            raise DataError("the model file's sindy coefficients are not all finite")
        self.coefficients_ = coefficients
        self._library = library

    @property
    def feature_names_(self) -> list[str]:
        """Term names in pysindy's notation over coordinates x0.. (states), u0.. (inputs)."""
        return list(self._library.names)

    @property
    def discrete_(self) -> bool:
        return self.params.discrete

    def equations(self) -> list[tuple[str, str]]:
        """(lhs, rhs) per variable, rhs parseable by sympy (see ``dynid.symbolic``)."""
        self._check_fitted()
        from dynid.symbolic import equations_result

        return [(eq["lhs"], eq["rhs"]) for eq in equations_result(self)["equations"]]
