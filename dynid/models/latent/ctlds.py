"""``ctlds``: the continuous-time linear state-space model of ``lds``,

    dz = (F z + G u) dt + dW,   y(t_k) = C z(t_k) + D u(t_k) + c + v_k,

identified from discrete samples, with the conditions under which discrete samples determine F
checked and reported (``info``'s ``identifiability``, warnings on stderr).

Uniform steps dt: EM fits the discrete model (A = e^{F dt}), then F = log(A) / dt with the
principal matrix logarithm, G and Sigma from the exact discretisation (``from_discrete``): the
maximum-likelihood continuous model when that logarithm is real, since the discretisation is
then one-to-one. It is not identifiable when
  - A has eigenvalues on the negative real axis: no real generator samples to them (the real
    part of the logarithm is taken);
  - an oscillation is near or above the Nyquist frequency pi/dt: frequencies w + 2 pi k / dt
    give the same samples (aliasing); the principal one, |w| < pi/dt, is reported;
  - a mode decays by much within one step: its rate is barely seen in the samples.
Irregular times: continuous EM as ``lds`` (no logarithm; unequal intervals separate aliases, up
to the Nyquist frequency of the shortest interval). This is the classical exact-discretisation
estimator, not the finite-sample method of Zhou, Li and Zhang (NeurIPS 2025), whose algorithm
was not available.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from dynid.data.dataset import Trial
from dynid.linear.continuous import from_discrete, principal_generator
from dynid.models.latent.iterations import EMResult
from dynid.models.latent.lds import LDS, LDSParams, fit_discrete

# An oscillation above this fraction of the Nyquist frequency is reported as possibly aliased.
ALIASING_FRACTION = 0.5
# A mode decaying by more than e^-DECAY_PER_STEP within one step is reported as under-sampled.
DECAY_PER_STEP = 2.0


class CTLDS(LDS):
    """The continuous-time LDS: fitted arrays as ``lds``'s continuous model (``generator``,
    ``input_rate``, ``diffusion``, ...). ``metrics_["identifiability"]``: ``step`` (dt, or the
    median interval), ``shortest_step``, ``horizon`` (time spanned, summed over trials),
    ``nyquist`` (pi / step, rad per time unit), ``highest_frequency`` (largest |Im| of the
    continuous eigenvalues), ``fastest_decay_per_step`` (largest |Re| times step),
    ``slowest_time_constants_in_horizon`` (horizon times the smallest |Re|),
    ``negative_real_eigenvalues`` (count, uniform steps only) and ``warnings`` (sentences)."""

    name = "ctlds"
    summary = (
        "continuous-time linear state-space model from discrete (regular or irregular) samples, "
        "with aliasing and sampling-rate checks"
    )
    Params = LDSParams
    always_continuous = True

    def _fit_n(self, trials: list[Trial], n: int, dt: float | None, params: LDSParams) -> EMResult[Any]:
        negative_real = None
        if dt is None:
            result = super()._fit_n(trials, n, dt, params)
        else:
            result = fit_discrete(trials, n, params.max_iter, params.tol)
            values = np.linalg.eigvals(result.model.a)
            negative_real = int(np.sum((values.real < 0) & (np.abs(values.imag) <= 1e-9 * np.abs(values))))
            self._set_model(from_discrete(result.model, dt, principal_generator(result.model.a, dt)), dt)
        report = identifiability(self.continuous_eigenvalues_, trials, dt, negative_real)
        for sentence in report["warnings"]:
            warnings.warn(f"ctlds: {sentence}", stacklevel=2)
        self.metrics_["identifiability"] = report
        return result


def identifiability(
    values: np.ndarray, trials: list[Trial], dt: float | None, negative_real: int | None
) -> dict[str, Any]:
    """The checks of the module docstring for continuous eigenvalues ``values`` (n,) fitted on
    ``trials`` (uniform step ``dt``, or None); ``negative_real``: how many eigenvalues of the
    discrete A lie on the negative real axis (uniform steps only)."""
    intervals = np.concatenate([np.diff(trial.t) for trial in trials])
    step = dt if dt is not None else float(np.median(intervals))
    shortest = float(intervals.min())
    horizon = float(intervals.sum())
    nyquist = math.pi / step
    frequency = float(np.max(np.abs(values.imag)))
    decay = float(np.max(np.abs(values.real))) * step
    slowest = float(np.min(np.abs(values.real))) * horizon
    found: list[str] = []
    if negative_real:
        found.append(
            f"the sampled dynamics have {negative_real} eigenvalue(s) on the negative real axis, "
            "which no real continuous-time generator produces; the real part of the logarithm was "
            "taken and the generator is not identified: sample faster"
        )
    # Irregular intervals separate aliases up to the Nyquist frequency of the shortest one.
    limit = nyquist if dt is not None else math.pi / shortest
    if frequency > ALIASING_FRACTION * limit:
        found.append(
            f"an oscillation at {frequency:.4g} rad per time unit is above {ALIASING_FRACTION:g} of "
            f"the Nyquist frequency {limit:.4g} (pi / {'dt' if dt is not None else 'shortest step'}): "
            "faster oscillations alias onto it, the one reported is the slowest consistent with the "
            "samples"
        )
    if decay > DECAY_PER_STEP:
        found.append(
            f"a mode decays by a factor e^{decay:.3g} within one step of {step:.4g}: its rate is "
            "poorly determined by these samples; sample faster"
        )
    return {
        "step": step,
        "shortest_step": shortest,
        "horizon": horizon,
        "nyquist": nyquist,
        "highest_frequency": frequency,
        "fastest_decay_per_step": decay,
        "slowest_time_constants_in_horizon": slowest,
        "negative_real_eigenvalues": negative_real,
        "warnings": found,
    }
