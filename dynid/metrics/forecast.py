"""Forecast errors: RMSE, normalised RMSE, valid prediction time and R^2; a fitted model's
in-sample one-step errors (``one_step_metrics``, which takes targets, then predictions).

Every function takes ``pred`` and ``true`` of equal shape ``(..., d)``: the last axis is the
variables, the others are samples, e.g. ``(H, d)`` for one rollout of ``H`` steps or
``(K, H, d)`` for ``K`` rollouts. Errors are in the units of the data; ``scale`` is the
per-variable standard deviation ``(d,)`` of the reference data, in the same units.

A NaN in ``true`` is a missing target (a gap in the data), not an error: every error below is
taken over the observed targets only, and a step with no observed target is not judged by VPT.
A non-finite ``pred`` (a diverged forecast) is never skipped: it makes the errors it enters
non-finite and its step invalid, observed or not.
"""

from __future__ import annotations

import numpy as np

from dynid.errors import DataError

# The usual VPT threshold on the normalised error (Pathak et al. 2018; dynid score).
VPT_THRESHOLD = 0.4


def _pair(
    pred: np.ndarray, true: np.ndarray, *, min_ndim: int = 2
) -> tuple[np.ndarray, np.ndarray]:
    """Both arrays as float arrays of one shape; ValueError otherwise (a caller bug, not data)."""
    p = np.asarray(pred, dtype=float)
    t = np.asarray(true, dtype=float)
    if p.shape != t.shape:
        raise ValueError(f"pred has shape {p.shape} but true has shape {t.shape}")
    if p.ndim < min_ndim:
        raise ValueError(f"expected arrays of at least {min_ndim} axes (..., d), got {p.shape}")
    if p.size == 0:
        raise ValueError(f"cannot score empty arrays of shape {p.shape}")
    return p, t


def _scale(scale: np.ndarray, d: int) -> np.ndarray:
    s = np.asarray(scale, dtype=float).reshape(-1)
    if s.shape != (d,):
        raise ValueError(f"scale must have shape ({d},), got {np.shape(scale)}")
    bad = np.flatnonzero(~np.isfinite(s) | (s <= 0))
    if bad.size:
        i = int(bad[0])
        raise DataError(
            f"variable {i} has scale {s[i]!r}: errors can only be normalised by a positive "
            "standard deviation, and a variable constant in the reference data has none"
        )
    return s


def masked_rms(
    pred: np.ndarray, true: np.ndarray, *, axis: int | tuple[int, ...] | None = None, scale: np.ndarray | None = None
) -> np.ndarray:
    """Root mean square of ``(pred - true) / scale`` over ``axis`` (None: every element), over
    the observed targets only (NaN in ``true`` = missing). NaN where no target is observed; a
    non-finite prediction at an observed target makes its result non-finite. ``scale`` (d,):
    divides the last axis (None: data units)."""
    p, t = _pair(pred, true, min_ndim=1)
    observed = ~np.isnan(t)
    with np.errstate(invalid="ignore", divide="ignore"):
        differences = np.where(observed, p - t, 0.0)
        if scale is not None:
            differences = differences / _scale(scale, p.shape[-1])
        return np.sqrt(np.sum(differences**2, axis=axis) / np.sum(observed, axis=axis))


def rmse(pred: np.ndarray, true: np.ndarray) -> float:
    """Root-mean-square error over every observed element (data units)."""
    return float(masked_rms(pred, true))


def rmse_per_variable(pred: np.ndarray, true: np.ndarray) -> np.ndarray:
    """RMSE of each variable over all leading axes: ``(..., d) -> (d,)`` (data units); NaN for
    a variable with no observed target."""
    p, _ = _pair(pred, true)
    return masked_rms(pred, true, axis=tuple(range(p.ndim - 1)))


def nrmse_per_variable(pred: np.ndarray, true: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Each variable's RMSE divided by its ``scale``: ``(d,)``, dimensionless."""
    p, _ = _pair(pred, true)
    return rmse_per_variable(pred, true) / _scale(scale, p.shape[-1])


def nrmse(pred: np.ndarray, true: np.ndarray, scale: np.ndarray) -> float:
    """RMS of the scale-normalised errors over every element, dimensionless.

    Equals ``sqrt(mean_i nrmse_per_variable(...)_i ** 2)``, so each variable counts equally
    whatever its units (and however many of its targets are missing; NaN when one variable has
    none observed); a forecast as good as the reference mean scores about 1.
    """
    return float(np.sqrt(np.mean(nrmse_per_variable(pred, true, scale) ** 2)))


def normalised_error(pred: np.ndarray, true: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Per-step error ``sqrt(mean_i ((pred_i - true_i) / scale_i) ** 2)`` over the observed
    variables i of the step: ``(..., d) -> (...)``; NaN at a step with none observed.

    For ``(H, d)`` rollouts this is the error curve over the horizon that VPT thresholds.
    """
    return masked_rms(pred, true, axis=-1, scale=scale)


def valid_steps(
    pred: np.ndarray, true: np.ndarray, scale: np.ndarray, threshold: float = VPT_THRESHOLD
) -> tuple[np.ndarray, np.ndarray]:
    """How many steps each rollout stays valid, and whether that count is censored.

    ``pred``/``true``: ``(H, d)`` for one rollout or ``(K, H, d)`` for ``K``; results ``()`` or
    ``(K,)``. A step is judged where some target is observed or the prediction is non-finite
    (invalid whatever the truth); it is invalid where its ``normalised_error`` exceeds
    ``threshold`` or is not finite. The count is h + 1 for the first invalid step h (0-based), so
    a forecast wrong from its first step counts 1. A rollout with no invalid step is censored:
    it was valid as far as its targets were observed, and counts its last judged step (H when
    the last target is observed; 0 when no step is judged).
    """
    p, t = _pair(pred, true)
    if p.ndim not in (2, 3):
        raise ValueError(f"expected (H, d) or (K, H, d) arrays, got shape {p.shape}")
    error = normalised_error(p, t, scale)
    diverged = ~np.all(np.isfinite(p), axis=-1)
    observed = ~np.all(np.isnan(t), axis=-1)
    judged = observed | diverged
    # NaN compares False: "not within threshold" also catches a non-finite error.
    invalid = diverged | (observed & ~(error <= threshold))
    horizon = error.shape[-1]
    last_judged = np.where(judged.any(axis=-1), horizon - np.argmax(judged[..., ::-1], axis=-1), 0)
    censored = ~invalid.any(axis=-1)
    return np.where(censored, last_judged, invalid.argmax(axis=-1) + 1), censored


def valid_prediction_time(
    pred: np.ndarray,
    true: np.ndarray,
    scale: np.ndarray,
    dt: float,
    threshold: float = VPT_THRESHOLD,
    *,
    per_rollout: bool = False,
) -> float | np.ndarray:
    """Valid prediction time (time units): when the normalised error first exceeds ``threshold``.

    ``pred``/``true``: ``(H, d)`` for one rollout or ``(K, H, d)`` for ``K`` rollouts, where row
    ``h`` (0-based) is the forecast ``h + 1`` steps ahead, i.e. at time ``(h + 1) * dt`` after
    the last known sample. The error at a step is ``normalised_error`` (RMS over the observed
    variables of ``(pred_i - true_i) / scale_i``). VPT is ``valid_steps`` times ``dt``: ``(h + 1)
    * dt`` for the first row ``h`` whose error exceeds ``threshold`` (so a forecast wrong from its
    first step scores ``dt``), and the full horizon ``H * dt`` if no row does (the last observed
    row's lead when the last targets are missing). A non-finite prediction (a diverged rollout)
    counts as exceeding. Returns a float for one rollout; for ``K`` rollouts the mean over
    rollouts, or the ``(K,)`` array of each rollout's VPT when ``per_rollout`` is true. Divide by
    the Lyapunov time (multiply by the largest Lyapunov exponent) to get VPT in Lyapunov times.
    """
    if not (np.isfinite(dt) and dt > 0):
        raise ValueError(f"dt must be a positive time step, got {dt!r}")
    steps, _ = valid_steps(pred, true, scale, threshold)
    vpt = steps * float(dt)
    if np.ndim(vpt) == 0:
        return float(vpt)
    return vpt.astype(float) if per_rollout else float(np.mean(vpt))


def r2(pred: np.ndarray, true: np.ndarray) -> np.ndarray:
    """Coefficient of determination per variable, ``(..., d) -> (d,)``.

    ``1 - SS_res / SS_tot`` with ``SS_tot`` about each variable's mean of ``true`` over all leading
    axes. 1 is perfect, 0 is as good as that mean, negative is worse. NaN where ``true`` is
    constant (R^2 is undefined there).
    """
    p, t = _pair(pred, true)
    d = p.shape[-1]
    p, t = p.reshape(-1, d), t.reshape(-1, d)
    ss_res = np.sum((p - t) ** 2, axis=0)
    ss_tot = np.sum((t - t.mean(axis=0)) ** 2, axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ss_tot > 0, 1.0 - ss_res / np.where(ss_tot > 0, ss_tot, 1.0), np.nan)


def one_step_metrics(
    targets: np.ndarray, predictions: np.ndarray
) -> dict[str, float | list[float | None] | None]:
    """In-sample one-step-ahead errors of a fitted model, JSON-ready.

    targets, predictions: (N, d). Returns ``one_step_rmse`` and ``one_step_r2`` (lists, one per
    variable, in the data's units / dimensionless) and their pooled ``*_overall`` values
    (RMSE over every entry; R^2 = 1 - total SSE / total variance about each variable's mean).
    R^2 is None where a variable does not vary.
    """
    errors = targets - predictions
    sse = np.sum(errors**2, axis=0)
    sst = np.sum((targets - targets.mean(axis=0)) ** 2, axis=0)
    return one_step_metrics_from_sums(sse, sst, targets.shape[0])


def one_step_metrics_from_sums(
    sse: np.ndarray, sst: np.ndarray, n: int
) -> dict[str, float | list[float | None] | None]:
    """``one_step_metrics`` from each variable's sum of squared errors ``sse`` (d,) and sum of
    squares about its mean ``sst`` (d,) over ``n`` rows (for fits that never hold the rows)."""
    n = max(n, 1)
    per_variable_r2 = [
        None if total == 0 else float(1.0 - e / total) for e, total in zip(sse, sst)
    ]
    return {
        "one_step_rmse": [float(v) for v in np.sqrt(sse / n)],
        "one_step_r2": per_variable_r2,
        "one_step_rmse_overall": float(np.sqrt(sse.sum() / (n * max(sse.shape[0], 1)))),
        "one_step_r2_overall": None if sst.sum() == 0 else float(1.0 - sse.sum() / sst.sum()),
    }
