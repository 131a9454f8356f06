"""The ``symbolic`` backend: equations found by ``dynid.symbolic.identify``, as a model.

``dynid symbolic --save-model`` and ``dynid fit --model symbolic`` write it; forecast, score and
report use it like any backend (the equations are integrated as an ODE, or iterated as a map).
The model file holds the coefficients, the selected terms as a whitelisted JSON spec (parsed
back without executing anything) and the bootstrap inclusion probabilities and intervals.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from dynid.data.dataset import Dataset
from dynid.errors import DataError
from dynid.models.base import Capabilities, expect_array
from dynid.models.equations import EquationBackend
from dynid.symbolic.options import SymbolicParams


class Symbolic(EquationBackend):
    """Sparse equations over an automatically chosen term library, with uncertainty.

    Fitted state: ``coefficients_`` (d, P) in units of dx/dt (or x) per term value, over the P
    terms of ``termset_`` (coordinates x0.., u0..); ``inclusion_`` (d, P) bootstrap inclusion
    probabilities and ``interval_`` (d, P, 2) 95 % coefficient intervals containing the
    coefficient (``symbolic.identify._add_uncertainty``; zeros when the ensemble is off); ``metrics_["equations"]``: per-equation library, held-out criterion
    and R^2, Pareto front (complexity vs held-out error).
    """

    name = "symbolic"
    summary = "governing equations: library sweep, exact best subsets, held-out AICc, E-SINDy uncertainty"
    Params = SymbolicParams
    capabilities = Capabilities(uniform_steps=False, inputs=True)
    params: SymbolicParams

    def _fit(self, data: Dataset, *, seed: int | None, device: str, progress: Any) -> None:
        from dynid.symbolic.identify import identify

        found = identify(data, self.params, seed=seed, progress=progress)
        d, p = found.coefficients.shape
        self.termset_ = found.termset
        self.coefficients_ = found.coefficients
        self.inclusion_ = np.zeros((d, p))
        self.interval_ = np.zeros((d, p, 2))
        for i, equation in enumerate(found.equations):
            if equation.inclusion_probability is not None:
                self.inclusion_[i] = equation.inclusion_probability
                self.interval_[i] = equation.interval
        details = [
            {
                "variable": name,
                "library": eq.library,
                "criterion": eq.criterion,
                "validation_r2": eq.validation_r2,
                "pareto": eq.pareto,
            }
            for name, eq in zip(data.variables, found.equations, strict=True)
        ]
        self.metrics_ = {
            **found.metrics,
            "validation_r2": {eq["variable"]: eq["validation_r2"] for eq in details},
            "library": {eq["variable"]: eq["library"] for eq in details},
            "equations": details,
        }

    # -- equations ---------------------------------------------------------------------------
    @property
    def discrete_(self) -> bool:
        return self.params.discrete

    def _rhs(self, x: np.ndarray, u: np.ndarray | None) -> np.ndarray:
        values = self.termset_.evaluate(x[None, :], None if u is None else u[None, :])[0]
        return self.coefficients_ @ values

    def equations_result(self) -> dict[str, Any]:
        """The ``dynid symbolic`` JSON (CONTRACT.md), with inclusion probability and interval
        per term when the ensemble ran, and the Pareto front per equation in ``metrics``."""
        from dynid.symbolic.expressions import build_term_result

        self._check_fitted()
        with_ensemble = bool(self.params.ensemble) and np.any(self.inclusion_)
        details = None
        if with_ensemble:
            details = [
                [
                    {
                        "inclusion_probability": float(self.inclusion_[i, k]),
                        "interval": [float(self.interval_[i, k, 0]), float(self.interval_[i, k, 1])],
                    }
                    for k in range(self.coefficients_.shape[1])
                ]
                for i in range(self.n_variables)
            ]
        return build_term_result(
            self.variables_,
            self.inputs_,
            self.termset_.names,
            self.coefficients_,
            discrete=self.discrete_,
            metrics=self.metrics_,
            term_details=details,
        )

    def equations(self) -> list[tuple[str, str]]:
        return [(eq["lhs"], eq["rhs"]) for eq in self.equations_result()["equations"]]

    # -- state -------------------------------------------------------------------------------
    def arrays(self) -> dict[str, np.ndarray]:
        self._check_fitted()
        spec = json.dumps(self.termset_.to_spec(), sort_keys=True).encode()
        return {
            "coefficients": self.coefficients_,
            "terms_spec": np.frombuffer(spec, dtype=np.uint8),
            "inclusion_probability": self.inclusion_,
            "interval": self.interval_,
        }

    def _load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        from dynid.symbolic.library import TermSet

        raw = expect_array(arrays, "terms_spec", (None,))
        try:
            spec = json.loads(np.asarray(raw, dtype=np.uint8).tobytes().decode())
        except (ValueError, UnicodeDecodeError):
            raise DataError("the model file's symbolic term spec is not valid JSON") from None
        termset = TermSet.from_spec(spec)
        if termset.n_states != self.n_variables or termset.n_inputs != self.n_inputs:
            raise DataError("the model file's symbolic terms do not match its variables")
        p = len(termset)
        coefficients = np.array(expect_array(arrays, "coefficients", (self.n_variables, p)), dtype=float)
        if not np.all(np.isfinite(coefficients)):
            raise DataError("the model file's symbolic coefficients are not all finite")
        self.termset_ = termset
        self.coefficients_ = coefficients
        self.inclusion_ = np.array(expect_array(arrays, "inclusion_probability", (self.n_variables, p)), dtype=float)
        self.interval_ = np.array(expect_array(arrays, "interval", (self.n_variables, p, 2)), dtype=float)
