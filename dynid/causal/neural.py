"""Neural Granger causality: the component-wise MLP (cMLP) of Tank, Covert, Foti, Shojaie & Fox,
"Neural Granger Causality", IEEE TPAMI 44(8), 2021.

Each target ``i`` gets its own one-hidden-layer ReLU network fed with the lags
``x_j(t-1), ..., x_j(t-L)`` of every variable (standardised to zero mean and unit variance):

    y_i(t) ~ w2_i . relu(sum_{j,k} W_i[:, j, k-1] x_j(t-k) + b1_i) + b2_i,     W_i (H, d, L)

``x_j`` Granger-causes ``x_i`` iff ``W_i[:, j, :]`` is nonzero: the first layer is the only way
in. The network predicts the one-step change ``y_i(t) = x_i(t) - x_i(t-1)`` over its standard
deviation rather than ``x_i(t)`` itself: with ``x_i(t-1)`` among the inputs this carries the same
Granger information, but for finely sampled flows ``x_i(t) ~ x_i(t-1)`` would otherwise swamp the
loss (and a network with every input pruned then predicts "no change", not the mean). Training
minimises, for every target,

    MSE_i + lam_ridge ||w2_i||^2 + lam * sum_j sum_{k=1..L} ||W_i[:, j, k-1:]||_F

a hierarchical group lasso (nested groups: lags k..L of source j) that zeroes whole sources and,
within a source, every lag beyond its last useful one. As in Tank et al. the target's own lags are
penalised too (leaving them free lets the network build proxies for the other sources out of its
own history); self-links are still not reported as edges. The ridge on the output layer stops the
network from evading the penalty by shrinking W and growing w2.

The penalty is applied by proximal gradient, so groups become exactly zero: GISTA (Gong et al.,
ICML 2013), a gradient step on the smooth part then the closed-form prox, which for nested groups
is the group soft-threshold applied from the innermost group (lag L alone) outwards (Jenatton et
al., JMLR 12, 2011), with Barzilai-Borwein steps and a non-monotone backtracking line search. All
d networks train at once as one batched model, each with its own step size. Every fit runs
through the shared training loop (``dynid.training``), one proximal-gradient iteration per
epoch: ``--max-time`` ends the path where it is, checkpoints let ``--resume`` continue it.

Choosing lam (``lam = None``): the last 20% of each trial is held out. lam rises geometrically
from ``LAMBDA_START`` (x2 per step, each fit warm-started from the previous one, dense to sparse).
The penalised fit's validation error only grows with lam (its weights shrink), so each support is
judged by a relaxed fit (Meinshausen, CSDA 52, 2007): the network refitted without the penalty on
that support alone. Each target takes the largest lam whose relaxed validation MSE is within one
standard error of the smallest (the 1-SE rule, favouring the sparser network; the standard error
is that of the smallest mean over the held-out rows), and the networks are then refitted on all
the data at their lam. The path stops once every network has pruned all its inputs or has passed
its 1-SE threshold.

Scores: a link is significant when its weights are nonzero at the chosen lam; ``strength`` is
their norm. To rank every pair, selected or not, ``score_matrix`` holds the penalty the link
survives along the path (its exit penalty, interpolated by its weight norm; see
``_exit_penalty``), the single-number form of tracing the ROC by sweeping lam as Tank et al. do.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dynid.causal.base import CausalMethod, CausalSettings
from dynid.causal.common import (
    check_lagged_regression,
    check_lambda,
    lambda_rule,
    mean_and_standard_error,
    not_separable,
    one_standard_error,
    report_self_predicted,
    self_predicted_columns,
)
from dynid.causal.graph import CausalGraph, support_graph
from dynid.data.dataset import Dataset
from dynid.errors import ComputationError, ResourceUnavailable
from dynid.linear.design import lagged_design
from dynid.params import Hyperparameters, param
from dynid.runtime import torch_threads
from dynid.training import (TrainingConfig, TrainingOptions, TrainingSession, TrainingStep,
                            block_split, tensors_to_arrays, train)

if TYPE_CHECKING:
    import torch

LAMBDA_RULE = (
    "largest lambda whose relaxed (unpenalised, support-only) refit is within one standard error "
    "of the smallest validation MSE on the last 20% of each trial, per target; then refit on all "
    "data"
)
# The lam path in standardised units (the loss is the MSE of unit-variance targets).
LAMBDA_START = 0.01
LAMBDA_FACTOR = 2.0
MAX_LAMBDAS = 14
VALIDATION_FRACTION = 0.2
# GISTA: compare with the worst of the last few objectives (non-monotone), sufficient decrease.
_MEMORY = 5
_SIGMA = 1e-5
_MAX_BACKTRACKS = 30
_STEP_RANGE = (1e-6, 1e3)
# Convergence is judged on the objective's change over this many iterations.
_WINDOW = 10


@dataclass(frozen=True)
class NeuralParams(Hyperparameters):
    """``-p`` options of ``--method neural``."""

    hidden: int = param(16, "hidden ReLU units per target network")
    lam: float | None = param(
        None, "hierarchical group-lasso penalty; none = choose per target on a held-out 20%"
    )
    lam_ridge: float = param(1e-2, "ridge penalty on the output layer's weights")
    lr: float = param(0.1, "first proximal-gradient step (Barzilai-Borwein steps follow)")
    max_iter: int = param(150, "most proximal-gradient iterations per fit (per lam on the path)")
    tolerance: float = param(
        1e-4, "stop a fit once no network's objective changes by more than this fraction "
        "over 10 iterations"
    )

    def __post_init__(self) -> None:
        if self.hidden < 1:
            raise ValueError(f"hidden must be >= 1, got {self.hidden}")
        if self.max_iter < 1:
            raise ValueError(f"max_iter must be >= 1, got {self.max_iter}")
        check_lambda(self.lam)
        if not (math.isfinite(self.lam_ridge) and self.lam_ridge >= 0):
            raise ValueError(f"lam_ridge must be >= 0, got {self.lam_ridge}")
        for name in ("lr", "tolerance"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be > 0, got {value}")


class NeuralGranger(CausalMethod):
    """``--method neural``: component-wise MLP Granger causality with a hierarchical lag penalty.

    Edges (source != target, lag 1..max_lag): ``strength`` is the norm of the first-layer
    weights of that source and lag in the target's network (standardised inputs; >= 0),
    ``significant`` says it is nonzero, ``p_value`` is NaN (null in JSON): significance is the
    penalty's support, not a test. ``adjacency``: any lag nonzero. ``score_matrix``: the exit
    penalty, how much penalty the link survives along the lam path (``_exit_penalty``; in
    Tank et al. the ROC is likewise traced by sweeping lam), which ranks every pair, selected
    or not; ``extra["source_norm"]`` has the norm over lags at the chosen lam. ``alpha`` and
    ``correction`` are not used. Self-predicted columns (``common.self_predicted_columns``, e.g.
    a clean sinusoid): the links that cannot be tested (every link into one, every link from its
    lags beyond its order) have strength 0 and score 0, with one warning each
    (``extra["warnings"]``).
    """

    name = "neural"
    use_when = (
        "nonlinear lagged coupling in larger systems (needs torch)"
    )
    summary = "neural Granger causality (cMLP, Tank et al. 2021): sparse per-target MLPs, torch"
    Params = NeuralParams
    cuda = True
    trains = True

    def discover(self, data: Dataset, settings: CausalSettings) -> CausalGraph:
        params = self.params
        assert isinstance(params, NeuralParams)
        lags = settings.max_lag
        # A held-out fifth needs rows enough to rank supports: 50 in all at the least.
        check_lagged_regression(data, lags, 50, f"neural Granger (max_lag={lags})")
        fit = fit_cmlp([trial.x for trial in data.trials], lags, params, seed=settings.seed,
                       device=settings.device, training=settings.training)
        extra: dict[str, Any] = {
            "lambda_rule": lambda_rule(params.lam, LAMBDA_RULE),
            "lambda": fit.lam,
            "strength_kind": "first_layer_weight_norm",
            "score_kind": "exit_penalty",
            "source_norm": fit.source_norm,
            "weight_norm": fit.weight_norm,
            "seed": fit.seed,
            "device": settings.device,
            "hyperparameters": params.to_dict(),
            "iterations": fit.iterations,
            "dt": data.dt,
        }
        if fit.path is not None:
            extra["path"] = fit.path
        if fit.stopped is not None:
            extra["stopped"] = fit.stopped
        self_predicted = self_predicted_columns(data, lags)
        untestable = not_separable(self_predicted, data.n_variables, lags)[:, :, 1:]
        extra.update(report_self_predicted(data, self_predicted))
        cross = ~np.eye(data.n_variables, dtype=bool)[:, :, None]
        lag_norms = np.where(cross & ~untestable, fit.weight_norm, 0.0)
        score = np.where(untestable.all(axis=2), 0.0, fit.score)
        return support_graph(data.variables, self.name, lags, settings.alpha, lag_norms,
                             lag_norms > 0, score, extra)


@dataclass(frozen=True)
class CMLPFit:
    """A trained cMLP, as norms of its first layer (standardised units).

    ``weight_norm`` (d, d, L) ``[source][target][lag - 1]``: ``||W_target[:, source, lag - 1]||``,
    the diagonal holding the self-lags; ``source_norm`` (d, d): the norm over lags, 0 on the
    diagonal; ``score`` (d, d): the exit penalty of ``_exit_penalty``, over the lam path (or
    the ramp up to a given lam); ``lam`` (d,): the penalty of each target's network; ``seed``:
    the one used; ``iterations``: proximal-gradient iterations in all. ``path`` (None when lam was given):
    ``lambda`` (K,), and per path point and target (K, d) ``validation_mse`` and
    ``validation_se`` of the relaxed fits (units of each target's variance) and ``n_active``,
    the sources kept (self included). ``stopped``: "max_time" when ``--max-time`` cut training
    short (the path then ends where it was), else None.
    """

    weight_norm: np.ndarray
    source_norm: np.ndarray
    score: np.ndarray
    lam: np.ndarray
    seed: int
    iterations: int
    path: dict[str, np.ndarray] | None = None
    stopped: str | None = None


def fit_cmlp(
    trials_x: list[np.ndarray], max_lag: int, params: NeuralParams, *, seed: int | None = None,
    device: str = "cpu", training: TrainingOptions | None = None,
) -> CMLPFit:
    """Train the cMLP of the module docstring on trials (n_i, d); lam as it describes.

    ``seed`` fixes the initial weights (None: a fresh seed, returned in the result); with it,
    results on the CPU repeat exactly. ``device``: "cpu", "cuda" or "cuda:N". ``training``:
    threads, ``--max-time`` (the path then ends at the last lam reached, each network keeping
    the weights it has), checkpoints and progress.
    """
    if seed is None:
        seed = int(np.random.SeedSequence().entropy % 2**63)
    training = training if training is not None else TrainingOptions()
    with torch_threads(training.threads):
        session = TrainingSession(training, seed)
        result = _fit_path(trials_x, int(max_lag), params, session, _device(device))
    return result if not session.time_up else dataclasses.replace(result, stopped="max_time")


def _fit_path(trials_x: list[np.ndarray], lags: int, params: NeuralParams,
              session: TrainingSession, dev: torch.device) -> CMLPFit:
    """``fit_cmlp`` inside its training session."""
    seed = session.seed
    scales = _scales(trials_x)
    x, y = _rows(trials_x, lags, scales, dev)
    model = _Stack.initial(x.shape[1], params.hidden, lags, session.torch_generator).to(dev)
    trainer = _Trainer(params, session)
    if params.lam is not None:
        # Reach lam along the path's own ramp: warm starts converge far faster than one cold fit.
        ramp = [value for value in _path_lambdas() if value < params.lam] + [params.lam]
        iterations, norms = 0, []
        for value in ramp:
            iterations += trainer.fit(model, x, y, np.full(model.d, value),
                                      stage=f"lam {value:.3g}")
            norms.append(model.source_norms().cpu().numpy())
        score = _exit_penalty(np.array(ramp), np.array(norms))
        return _result(model, np.full(model.d, params.lam), score, seed, iterations)
    fit_part, validation = (_rows(part, lags, scales, dev) for part in
                            block_split(trials_x, VALIDATION_FRACTION, context=lags))
    path, snapshots, iterations = _lambda_path(trainer, model, fit_part, validation)
    chosen = path.pop("chosen")
    norms = np.array([snapshot.source_norms().cpu().numpy() for snapshot in snapshots])
    score = _exit_penalty(path["lambda"], norms)
    lam = path["lambda"][chosen]
    model = _Stack.select(snapshots, chosen)
    iterations += trainer.fit(model, x, y, lam, stage="refit on all data")
    return _result(model, lam, score, seed, iterations, path)


def _device(name: str) -> torch.device:
    import torch

    try:
        device = torch.device(name)
        torch.zeros(1, device=device)
    except (RuntimeError, AssertionError) as exc:
        raise ResourceUnavailable(f"--device {name}: torch cannot use it ({exc})") from exc
    return device


# -- data ------------------------------------------------------------------------------------------
def _scales(trials_x: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per variable (d,): mean and standard deviation of the samples, and standard deviation of
    the one-step changes within trials."""
    stacked = np.vstack(trials_x)
    steps = np.vstack([np.diff(x, axis=0) for x in trials_x])
    return stacked.mean(axis=0), stacked.std(axis=0), steps.std(axis=0)


def _rows(
    trials_x: list[np.ndarray], lags: int, scales: tuple[np.ndarray, ...], device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs (N, d, L) ``[row, source, lag - 1]``, standardised samples, and targets (N, d),
    the changes ``x(t) - x(t-1)`` over their standard deviation (``scales`` from ``_scales``)."""
    import torch

    mean, std, step_std = scales
    design = lagged_design([(x - mean) / std for x in trials_x], lags, trend=False)
    n, d = design.targets.shape
    inputs = design.regressors.reshape(n, lags, d).transpose(0, 2, 1)
    targets = (design.targets - design.regressors[:, :d]) * (std / step_std)
    return tuple(  # type: ignore[return-value]
        torch.as_tensor(np.ascontiguousarray(a), dtype=torch.float32, device=device)
        for a in (inputs, targets)
    )


# -- the batched model -----------------------------------------------------------------------------
@dataclass
class _Stack:
    """d one-hidden-layer networks as stacked tensors, the leading axis the target network.

    w1 (d, H, d, L) ``[target, hidden, source, lag - 1]``; b1 (d, H); w2 (d, H); b2 (d,).
    """

    w1: torch.Tensor
    b1: torch.Tensor
    w2: torch.Tensor
    b2: torch.Tensor

    @classmethod
    def initial(cls, d: int, hidden: int, lags: int, generator: torch.Generator) -> _Stack:
        """PyTorch's default Linear initialisation, U(+-1/sqrt(fan_in)), drawn on the CPU so that
        a seed gives the same start on every device."""
        import torch

        def uniform(shape: tuple[int, ...], fan_in: int) -> torch.Tensor:
            return (torch.rand(shape, generator=generator) * 2.0 - 1.0) / math.sqrt(fan_in)

        return cls(uniform((d, hidden, d, lags), d * lags), uniform((d, hidden), d * lags),
                   uniform((d, hidden), hidden), uniform((d,), hidden))

    @property
    def d(self) -> int:
        return int(self.w1.shape[0])

    @property
    def tensors(self) -> list[torch.Tensor]:
        return [self.w1, self.b1, self.w2, self.b2]

    def to(self, device: torch.device) -> _Stack:
        return _Stack(*(t.to(device) for t in self.tensors))

    def clone(self) -> _Stack:
        return _Stack(*(t.detach().clone() for t in self.tensors))

    @classmethod
    def select(cls, snapshots: list[_Stack], chosen: np.ndarray) -> _Stack:
        """The stack whose network i is network i of ``snapshots[chosen[i]]``."""
        import torch

        device = snapshots[0].w1.device
        index = torch.as_tensor(chosen, device=device)
        targets = torch.arange(len(chosen), device=device)
        return cls(*(torch.stack(versions)[index, targets]
                     for versions in zip(*(s.tensors for s in snapshots))))

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        """x (N, d, L) -> (N, d): every target's network at once, one matrix product for all
        first layers."""
        import torch

        d, hidden = self.w1.shape[:2]
        pre = torch.addmm(self.b1.reshape(-1), x.reshape(x.shape[0], -1),
                          self.w1.reshape(d * hidden, -1).T)
        h = torch.relu(pre).reshape(-1, d, hidden)
        return (h * self.w2).sum(dim=2) + self.b2

    def source_norms(self) -> torch.Tensor:
        """(d, d) ``[target, source]``: the norm of each source's first-layer weights."""
        return self.w1.pow(2).sum(dim=(1, 3)).sqrt()


def _nested_norms(w1: torch.Tensor) -> torch.Tensor:
    """(d, d, L) ``[target, source, k]``: the norms of the nested groups ``W[:, j, k:]``."""
    import torch

    squares = w1.pow(2).sum(dim=1)  # (target, source, lag)
    return torch.flip(torch.cumsum(torch.flip(squares, [2]), dim=2), [2]).sqrt()


def _prox(w1: torch.Tensor, threshold: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """The prox of ``threshold_i * sum_{j,k} ||W_i[:, j, k:]||`` for w1 (d, H, d, L), with the
    sources outside ``allowed`` (d, d) [target, source] set to zero.

    For nested groups it is the composition of the groups' soft-thresholds, innermost first
    (Jenatton et al. 2011): lag L alone, then lags L-1..L, ..., then all lags.
    """
    import torch

    out = w1 * allowed[:, None, :, None]
    shrink = threshold[:, None, None, None]
    if not bool((threshold > 0).any()):
        return out
    for k in range(w1.shape[3] - 1, -1, -1):
        group = out[..., k:]
        norm = group.pow(2).sum(dim=(1, 3), keepdim=True).sqrt()
        out[..., k:] = group * torch.clamp(1.0 - shrink / norm.clamp(min=1e-30), min=0.0)
    return out


# -- training --------------------------------------------------------------------------------------
class _Trainer:
    """Runs each penalised or relaxed fit as one call of the shared training loop, all in one
    ``TrainingSession`` (one ``--max-time`` deadline; checkpoints named by the fit's place in
    the run, which a seeded run repeats)."""

    def __init__(self, params: NeuralParams, session: TrainingSession):
        self.params = params
        self.session = session
        self.fits = 0

    def fit(self, model: _Stack, x: torch.Tensor, y: torch.Tensor, lam: np.ndarray,
            allowed: np.ndarray | None = None, stage: str = "fit") -> int:
        """Train ``model`` in place with penalties lam (d,), only on the ``allowed`` (d, d)
        [target, source] inputs (default all); returns the iterations used."""
        import torch

        strategy = _Gista(self.params, model, x, y, lam, allowed)
        config = TrainingConfig(max_epochs=self.params.max_iter, name=f"fit-{self.fits:03d}",
                                stage=stage)
        self.fits += 1
        result = train(strategy, config, self.session)
        with torch.no_grad():
            for target, value in zip(model.tensors, strategy.params):
                target.copy_(value)
        return result.epochs


class _Gista:
    """GISTA on all target networks at once, each with its own step size and line search: one
    proximal-gradient iteration per epoch of the training loop (a ``Trainable``).

    State: the weights ``params`` and their gradients (w1, b1, w2, b2 as in ``_Stack``), the
    step sizes (d,) and the last ``_WINDOW + 1`` objectives (d,) each, oldest first.
    """

    def __init__(self, params: NeuralParams, model: _Stack, x: torch.Tensor, y: torch.Tensor,
                 lam: np.ndarray, allowed: np.ndarray | None):
        import torch

        d = model.d
        self.settings = params
        self.x, self.y = x, y
        self.lam = torch.as_tensor(np.asarray(lam, dtype=np.float32), device=x.device)
        self.mask = torch.as_tensor(np.ones((d, d)) if allowed is None else allowed,
                                    dtype=x.dtype, device=x.device)
        self.params = [t.detach().clone().requires_grad_(True) for t in model.tensors]
        with torch.no_grad():
            self.params[0].mul_(self.mask[:, None, :, None])
        smooth = self._smooth(self.params)
        self.grads = list(torch.autograd.grad(smooth.sum(), self.params))
        self.history = [self._objective(smooth, self.params[0])]
        self.step = torch.full((d,), params.lr, dtype=x.dtype, device=x.device)

    def _smooth(self, tensors: list[torch.Tensor]) -> torch.Tensor:
        """(d,) per target: MSE plus the output-layer ridge."""
        model = _Stack(*tensors)
        residual = model.predict(self.x) - self.y
        return residual.pow(2).mean(dim=0) + self.settings.lam_ridge * model.w2.pow(2).sum(dim=1)

    def _objective(self, smooth: torch.Tensor, w1: torch.Tensor) -> torch.Tensor:
        return smooth.detach() + self.lam * _nested_norms(w1.detach()).sum(dim=(1, 2))

    def _per_target(self, tensors: list[torch.Tensor]) -> torch.Tensor:
        d = self.mask.shape[0]
        return sum(t.reshape(d, -1).sum(dim=1) for t in tensors)  # type: ignore[return-value]

    def train_step(self, epoch: int) -> TrainingStep:
        import torch

        d, step = self.mask.shape[0], self.step
        reference = torch.stack(self.history[-_MEMORY:]).max(dim=0).values
        for _ in range(_MAX_BACKTRACKS):
            with torch.no_grad():
                trial = [p - step.reshape((d,) + (1,) * (p.dim() - 1)) * g
                         for p, g in zip(self.params, self.grads)]
                trial[0] = _prox(trial[0], step * self.lam, self.mask)
                moved = self._per_target([(a - b).pow(2) for a, b in zip(trial, self.params)])
            trial = [t.requires_grad_(True) for t in trial]
            trial_smooth = self._smooth(trial)
            trial_objective = self._objective(trial_smooth, trial[0])
            accepted = trial_objective <= reference - _SIGMA / (2.0 * step) * moved
            if bool(accepted.all()):
                break
            step = torch.where(accepted, step, step * 0.5)
        if not bool(torch.isfinite(trial_objective).all()):
            raise ComputationError("neural Granger training diverged; try a smaller -p lr")
        trial_grads = list(torch.autograd.grad(trial_smooth.sum(), trial))
        self.step = _barzilai_borwein(trial, self.params, trial_grads, self.grads,
                                      self._per_target)
        self.params, self.grads = trial, trial_grads
        # Older objectives are never looked at again (see _converged and _MEMORY).
        self.history = [*self.history, trial_objective][-(_WINDOW + 1):]
        converged = epoch % _WINDOW == 0 and _converged(self.history, self.settings.tolerance)
        return TrainingStep(float(trial_objective.mean()), converged)

    def validation_loss(self) -> None:
        """None: the lam path, not the loop, judges held-out error (on relaxed refits)."""
        return None

    def state_arrays(self) -> dict[str, np.ndarray]:
        import torch

        names = ("w1", "b1", "w2", "b2")
        history = torch.stack(self.history)
        padded = torch.full((_WINDOW + 1, history.shape[1]), float("nan"), dtype=history.dtype,
                            device=history.device)
        padded[: history.shape[0]] = history
        return tensors_to_arrays({
            **dict(zip(names, self.params)),
            **{f"grad_{name}": g for name, g in zip(names, self.grads)},
            "step": self.step, "history": padded,
            "history_length": torch.tensor(history.shape[0], dtype=torch.int64),
        })

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        import torch

        def tensor(name: str) -> torch.Tensor:
            return torch.from_numpy(arrays[name].copy()).to(self.x.device)

        names = ("w1", "b1", "w2", "b2")
        self.params = [tensor(name).requires_grad_(True) for name in names]
        self.grads = [tensor(f"grad_{name}") for name in names]
        self.step = tensor("step")
        self.history = list(tensor("history")[: int(arrays["history_length"])])


def _barzilai_borwein(new, old, new_grads, old_grads, per_target):  # type: ignore[no-untyped-def]
    """(d,) the BB1 step <s, s> / <s, g'-g> per target, clipped to ``_STEP_RANGE`` (the largest
    where the curvature is not positive)."""
    import torch

    with torch.no_grad():
        s = [a - b for a, b in zip(new, old)]
        curvature = per_target([u * (a - b) for u, a, b in zip(s, new_grads, old_grads)])
        length = per_target([u * u for u in s])
        low, high = _STEP_RANGE
        bb = length / curvature.clamp(min=1e-30)
        return torch.where(curvature > 0, bb, torch.full_like(bb, high)).clamp(low, high)


def _converged(history: list[torch.Tensor], tolerance: float) -> bool:
    if len(history) <= _WINDOW:
        return False
    now, before = history[-1], history[-1 - _WINDOW]
    return bool(((before - now).abs() <= tolerance * now.abs().clamp(min=1e-12)).all())


def _lambda_path(  # type: ignore[no-untyped-def]
    trainer: _Trainer, model: _Stack, fit_part, validation
):
    """Fit along the rising lam path (``model`` is warm-started and ends at the last point).

    Returns the path record (see ``CMLPFit.path``) with the chosen index per target under
    ``"chosen"``, the penalised snapshot per point and the iterations used. Stops once every
    target has pruned all its inputs or is past its 1-SE threshold (larger lam only prunes more).
    """
    import torch

    x_fit, y_fit = fit_part
    x_val, y_val = validation
    d = model.d
    lambdas: list[float] = []
    squared: list[np.ndarray] = []  # (rows, d) relaxed validation errors per point
    active: list[np.ndarray] = []
    snapshots: list[_Stack] = []
    iterations = 0
    relaxed_errors: dict[bytes, np.ndarray] = {}
    for lam in _path_lambdas():
        iterations += trainer.fit(model, x_fit, y_fit, np.full(d, lam), stage=f"lam {lam:.3g}")
        support = (model.source_norms() > 0).cpu().numpy()
        # A support seen before has the same relaxed fit: reuse its errors.
        key = support.tobytes()
        if key not in relaxed_errors:
            relaxed = model.clone()
            iterations += trainer.fit(relaxed, x_fit, y_fit, np.zeros(d), allowed=support,
                                      stage=f"relaxed refit at lam {lam:.3g}")
            with torch.no_grad():
                error = (relaxed.predict(x_val) - y_val).pow(2)
            relaxed_errors[key] = error.cpu().numpy().astype(float)
        lambdas.append(lam)
        squared.append(relaxed_errors[key])
        active.append(support.sum(axis=1))
        snapshots.append(model.clone())
        mse, se = mean_and_standard_error(np.array(squared), axis=1)
        _, within = one_standard_error(mse, se, np.array(lambdas))
        if np.all((active[-1] == 0) | ~within[-1]) or trainer.session.time_up:
            break
    mse, se = mean_and_standard_error(np.array(squared), axis=1)
    chosen, _ = one_standard_error(mse, se, np.array(lambdas))
    path = {"lambda": np.array(lambdas), "validation_mse": mse,
            "validation_se": se, "n_active": np.array(active), "chosen": chosen}
    return path, snapshots, iterations


def _path_lambdas() -> list[float]:
    return [LAMBDA_START * LAMBDA_FACTOR**k for k in range(MAX_LAMBDAS)]


def _exit_penalty(lambdas: np.ndarray, norms: np.ndarray) -> np.ndarray:
    """(d, d) ``[source][target]``: how much penalty each link survives along a rising path.

    lambdas (K,) ascending; norms (K, d, d) ``[point, target, source]``. A source last nonzero in
    the target's network at ``lam_k`` (with weight norm ``n`` there) is pruned somewhere before
    the next point ``LAMBDA_FACTOR * lam_k``; its score interpolates in between by its norm,
    ``lam_k * (1 + (LAMBDA_FACTOR - 1) * n / (1 + n))``, so scores from different points never
    interleave and ties within one are broken by strength. Never nonzero: 0. Diagonal: 0.
    """
    alive = norms > 0
    last = norms.shape[0] - 1 - np.argmax(alive[::-1], axis=0)  # (target, source)
    norm = np.take_along_axis(norms, last[None], axis=0)[0]
    score = lambdas[last] * (1.0 + (LAMBDA_FACTOR - 1.0) * norm / (1.0 + norm))
    score = np.where(alive.any(axis=0), score, 0.0).T
    np.fill_diagonal(score, 0.0)
    return score


def _result(model: _Stack, lam: np.ndarray, score: np.ndarray, seed: int, iterations: int,
            path: dict[str, np.ndarray] | None = None) -> CMLPFit:
    """The first layer's norms as ``[source][target]`` arrays."""
    import torch

    with torch.no_grad():
        per_lag = model.w1.pow(2).sum(dim=1).sqrt().cpu().numpy().astype(float)
    weight_norm = per_lag.transpose(1, 0, 2)  # (target, source, lag) -> (source, target, lag)
    source_norm = np.sqrt(np.sum(weight_norm**2, axis=2))
    np.fill_diagonal(source_norm, 0.0)
    return CMLPFit(weight_norm=weight_norm, source_norm=source_norm, score=score,
                   lam=np.asarray(lam, dtype=float), seed=seed, iterations=int(iterations),
                   path=path)
