"""``node`` and the continuous-time machinery it shares with ``phnn`` and ``hnn``: the solvers
against exact solutions, multiple-shooting segments, a fit on irregular samples, resume.

The Van der Pol goal of issue 14 (forecast NRMSE <= 0.05 over one period) takes minutes: it is
the slow test at the end and benchmarks/node_vanderpol.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.linalg import expm

from dynid import api
from dynid.data.dataset import Dataset, Trial
from dynid.models.continuous.integrate import rk4_step, solve
from dynid.models.continuous.shooting import LBFGSTrainer, ShootingTrainer, segment_trials
from dynid.training import TrainingOptions

# x' = A x: a damped rotation, eigenvalues -0.1 +- 2i.
A = np.array([[-0.1, 2.0], [-2.0, -0.1]])


class Linear:
    """x' = A x + B u as a ``Dynamics`` with the RK4 step."""

    def __init__(self, b: np.ndarray | None = None) -> None:
        self.a = torch.as_tensor(A)
        self.b = None if b is None else torch.as_tensor(b)

    def field(self, x, u):
        dx = x @ self.a.T
        return dx if u is None else dx + u @ self.b.T

    def step(self, x, h, u0, u_half, u1):
        return rk4_step(self, x, h, u0, u_half, u1)


def irregular_times(rng: np.random.Generator, n: int, step: float) -> np.ndarray:
    return np.concatenate([[0.0], np.cumsum(step * (1.0 + rng.uniform(-0.5, 0.5, n - 1)))])


# RK4's global error ~ 15 steps x (h |lambda|)^5 / 120 with h |lambda| <= 0.16: about 1e-5,
# 4^-4 of that with four substeps; Dormand-Prince keeps to its tolerances (1e-6 relative).
@pytest.mark.parametrize("adaptive, substeps, tolerance", [(False, 1, 1.5e-5), (False, 4, 6e-8),
                                                            (True, 1, 2e-6)])
def test_solvers_match_the_matrix_exponential_on_irregular_grids(adaptive, substeps, tolerance):
    rng = np.random.default_rng(0)
    deltas = rng.uniform(0.02, 0.08, size=(3, 15))  # three rows, each its own grid
    x0 = rng.normal(size=(3, 2))
    states = solve(Linear(), torch.as_tensor(x0), torch.as_tensor(deltas), substeps=substeps,
                   adaptive=adaptive).numpy()
    times = np.concatenate([np.zeros((3, 1)), np.cumsum(deltas, axis=1)], axis=1)
    exact = np.array([[expm(A * t) @ x0[row] for t in times[row]] for row in range(3)])
    assert np.max(np.abs(states - exact)) < tolerance
    # RK4's error falls as h^4: four substeps shrink it by about 256.
    if substeps == 4:
        coarse = solve(Linear(), torch.as_tensor(x0), torch.as_tensor(deltas)).numpy()
        ratio = np.max(np.abs(coarse - exact)) / np.max(np.abs(states - exact))
        assert 150 < ratio < 400


def test_controls_are_interpolated_linearly_between_samples():
    # x' = A x + B u with u(t) linear in t within each interval: RK4 integrates the exact
    # input at the stages, compared with a fine exact solution of the augmented system.
    b = np.array([[1.0], [0.5]])
    deltas = np.array([[0.05, 0.07, 0.04]])
    u = np.array([[[0.0], [1.0], [-1.0], [2.0]]])
    states = solve(Linear(b), torch.zeros(1, 2, dtype=torch.float64), torch.as_tensor(deltas),
                   torch.as_tensor(u), substeps=8).numpy()[0]
    x = np.zeros(2)
    for k, delta in enumerate(deltas[0]):
        slope = (u[0, k + 1, 0] - u[0, k, 0]) / delta
        # State (x, u, 1): u' = slope; the augmented system is linear and expm solves it.
        big = np.zeros((4, 4))
        big[:2, :2], big[:2, 2:3], big[2, 3] = A, b, slope
        x = (expm(big * delta) @ np.concatenate([x, [u[0, k, 0], 1.0]]))[:2]
        assert np.allclose(states[k + 1], x, atol=1e-9)


def test_segments_are_the_windows_of_each_trial_with_their_own_steps():
    t = np.array([0.0, 0.1, 0.25, 0.3, 0.5])
    trial = np.column_stack([t, np.arange(5.0), 10 * np.arange(5.0)])  # [t, x, u]
    short = trial[:2]
    segments = segment_trials([trial, short], d=1, length=2)
    assert segments.count == 3  # the short trial gives none
    assert np.allclose(segments.deltas, [[0.1, 0.15], [0.15, 0.05], [0.05, 0.2]])
    assert np.array_equal(segments.x[:, :, 0], [[0, 1, 2], [1, 2, 3], [2, 3, 4]])
    assert np.array_equal(segments.u[:, :, 0], 10 * segments.x[:, :, 0])
    strided = segment_trials([trial], d=1, length=2, stride=2)
    assert np.array_equal(strided.x[:, :, 0], [[0, 1, 2], [2, 3, 4]])


def linear_data(seed: int = 0, trials: int = 3, n: int = 120) -> Dataset:
    rng = np.random.default_rng(seed)
    runs = []
    for _ in range(trials):
        t = irregular_times(rng, n, 0.05)
        x0 = rng.uniform(-1.0, 1.0, 2)
        runs.append(Trial(t=t, x=np.array([expm(A * s) @ x0 for s in t])))
    return Dataset(trials=tuple(runs), variables=("x", "y"))


# Adam only (lbfgs=0) unless a test asks for the L-BFGS stage.
FAST = ["width=32", "depth=1", "segment=8", "substeps=1", "lbfgs=0", "epochs=40", "batch=64",
        "lr=0.03", "validation=0"]


def test_node_learns_a_linear_field_from_irregular_trials():
    data = linear_data()
    model = api.fit(data, "node", FAST, seed=0, device="cpu").model
    assert model.dt_ == np.median(np.concatenate([np.diff(t.t) for t in data.trials]))
    x0 = np.array([0.8, -0.3])
    steps = 60  # three time units, one period of the rotation
    predicted = model.simulate(Trial(t=np.zeros(1), x=x0[None]), steps, None)
    exact = np.array([expm(A * model.dt_ * k) @ x0 for k in range(1, steps + 1)])
    nrmse = np.sqrt(np.mean((predicted - exact) ** 2, axis=0)) / exact.std(axis=0)
    # 0.0038 and 0.0045 measured with node's default silu MLP (a tanh MLP: 0.026 and 0.043);
    # a model blind to the irregular steps is off by far more.
    assert nrmse.max() < 0.015
    # The learned field matches A x where the data are (relative RMS over the visited states):
    # 0.65 % measured (tanh: 3.6 %); a field fitted as if the steps were uniform is off by the
    # jitter.
    assert learned_field_error(model, data) < 0.015


def long_window_mse(model, data: Dataset, length: int = 60) -> float:
    """Mean squared error (standardised units) of rollouts over the first ``length`` intervals
    of every trial, from each trial's first sample."""
    errors = []
    for trial in data.trials:
        z = (trial.x[: length + 1] - model.center_) / model.scale_
        deltas = torch.as_tensor(np.diff(trial.t[: length + 1]))[None]
        with torch.no_grad():
            rollout = solve(model.network_, torch.as_tensor(z[:1]), deltas)[0].numpy()
        errors.append(np.mean((rollout[1:] - z[1:]) ** 2))
    return float(np.mean(errors))


def test_fine_tuning_on_long_windows_lowers_the_long_rollout_error():
    # A briefly trained first stage leaves errors that accumulate along a trajectory; the
    # second stage, on windows of 60 intervals, is what removes them.
    data = linear_data()
    short = FAST[:-4] + ["epochs=10", "batch=64", "lr=0.03", "validation=0.2"]
    first = api.fit(data, "node", short, seed=0, device="cpu").model
    both = api.fit(data, "node", short + ["refine=60", "refine_epochs=30"], seed=0,
                   device="cpu").model
    assert "refine_epochs" not in first.metrics_
    assert 1 <= both.metrics_["refine_epochs"] <= 30
    # The held-out ends (24 samples) are shorter than a window: validated on what they hold.
    assert both.metrics_["refine_validation_mse"] is not None
    assert both.metrics_["refine_kept"]  # it lowered the held-out error, so its weights stay
    # The first stage is the same weights in both fits, so the difference is the second's.
    assert both.metrics_["epochs"] == first.metrics_["epochs"]
    # 0.0112 -> 0.00055 measured (tanh MLP: 0.254 -> 0.138); without the second stage the
    # ratio is 1.
    assert long_window_mse(both, data) < 0.7 * long_window_mse(first, data)


def learned_field_error(model, data: Dataset) -> float:
    """RMS error of the learned field against A x over the visited states, relative to the
    RMS of A x."""
    states = np.vstack([trial.x for trial in data.trials])
    with torch.no_grad():
        z = torch.as_tensor((states - model.center_) / model.scale_)
        learned = model.network_.field(z, None).numpy() * model.scale_
    truth = states @ A.T
    return float(np.sqrt(np.mean((learned - truth) ** 2)) / np.sqrt(np.mean(truth ** 2)))


def test_lbfgs_stage_fits_what_a_brief_adam_stage_leaves():
    data = linear_data()
    adam = FAST[:5] + ["epochs=10", "batch=64", "lr=0.03", "validation=0.2"]
    first = api.fit(data, "node", adam, seed=0, device="cpu").model
    both = api.fit(data, "node", adam + ["lbfgs=50"], seed=0, device="cpu").model
    assert "lbfgs_epochs" not in first.metrics_
    assert both.metrics_["epochs"] == first.metrics_["epochs"]  # the same Adam stage
    assert both.metrics_["lbfgs_epochs"] == 2  # 50 iterations in epochs of 25
    assert both.metrics_["lbfgs_kept"]
    # Segment MSE 8.0e-4 -> 4.8e-7 measured; without the stage the ratio is 1.
    assert both.metrics_["segment_mse"] < 1e-2 * first.metrics_["segment_mse"]
    assert both.metrics_["lbfgs_validation_mse"] < 0.1 * both.metrics_["validation_mse"]
    # The lower loss is the true field: relative field error 5.4 % -> 0.16 % measured.
    assert learned_field_error(both, data) < 0.1 * learned_field_error(first, data)


def test_the_default_lbfgs_stage_runs_when_a_full_batch_loss_is_cheap_enough():
    from dynid.models.continuous.base import LBFGS_AUTO_ITERATIONS, LBFGS_AUTO_STEPS
    from dynid.models.continuous.node import NODE, NODEParams

    params = NODEParams()  # lbfgs none: automatic; 10-interval segments, one substep
    assert params.lbfgs is None and params.segment == 10 and params.substeps == 1
    # A trial of n rows gives n - 10 segments of 10 steps each.
    at_cap = [np.zeros((LBFGS_AUTO_STEPS // 10 + 10, 3))]
    over_cap = [np.zeros((LBFGS_AUTO_STEPS // 10 + 11, 3))]
    assert NODE._lbfgs_iterations(at_cap, params) == LBFGS_AUTO_ITERATIONS
    assert NODE._lbfgs_iterations(over_cap, params) == 0
    # Substeps are solver steps too; a given count is taken as it is.
    assert NODE._lbfgs_iterations(at_cap, NODEParams(substeps=2)) == 0
    assert NODE._lbfgs_iterations(over_cap, NODEParams(lbfgs=50)) == 50
    assert NODE._lbfgs_iterations(at_cap, NODEParams(lbfgs=0)) == 0


def test_the_automatic_lbfgs_stage_shrinks_with_a_smaller_epoch_budget():
    from dynid.models.continuous.base import LBFGS_AUTO_ITERATIONS
    from dynid.models.continuous.node import NODE, NODEParams

    small = [np.zeros((200, 3))]
    default_epochs = NODEParams().epochs  # 40: the default fit keeps all 500 iterations
    assert NODE._lbfgs_iterations(small, NODEParams()) == LBFGS_AUTO_ITERATIONS
    assert NODE._lbfgs_iterations(small, NODEParams(epochs=5)) == 63  # 500 * 5 / 40, up
    assert NODE._lbfgs_iterations(small, NODEParams(epochs=4 * default_epochs)) == LBFGS_AUTO_ITERATIONS
    # A fit asked for 5 Adam epochs runs 63 iterations, i.e. 3 L-BFGS epochs of 25 (it ran 20,
    # some two minutes, before the stage followed the budget).
    fit = api.fit(linear_data(), "node", ["width=16", "depth=1", "epochs=5"], seed=0, device="cpu")
    assert fit.model.metrics_["epochs"] == 5
    assert fit.model.metrics_["lbfgs_epochs"] == -(-63 // LBFGSTrainer.ITERATIONS) == 3


def jacobian_eigenvalues(model, x: np.ndarray) -> np.ndarray:
    """Eigenvalues of the learned field's Jacobian at state x (d,), in the data's units."""
    z = torch.as_tensor((x - model.center_) / model.scale_)[None]
    jz = torch.autograd.functional.jacobian(lambda v: model.network_.field(v, None)[0], z)[:, 0]
    # dx/dt = scale * f((x - center) / scale): J_x = diag(scale) J_z diag(1 / scale).
    return np.linalg.eigvals(jz.numpy() * model.scale_[:, None] / model.scale_[None, :])


def test_the_affine_path_identifies_a_linear_field_and_extrapolates_it():
    # With -p affine=true the field is A [x, u] + b + MLP, A and b started at the least-squares
    # fit of the finite differences: on a linear system that is the answer, which training
    # keeps, so the eigenvalues are recovered and forecasts hold far outside the data (states
    # within |x| <= 1.1). A tanh MLP alone flattens out beyond the data.
    data = linear_data()
    tanh = FAST + ["activation=tanh"]  # bounded: a silu MLP would extrapolate half-linearly
    plain = api.fit(data, "node", tanh, seed=0, device="cpu").model
    affine = api.fit(data, "node", tanh + ["affine=true"], seed=0, device="cpu").model
    truth = np.sort_complex(np.linalg.eigvals(A))  # -0.1 +- 2i
    # Measured: within 0.0002 with the affine path; the plain MLP's are off by 0.17.
    assert np.abs(np.sort_complex(jacobian_eigenvalues(affine, np.zeros(2))) - truth).max() < 0.01
    assert np.abs(np.sort_complex(jacobian_eigenvalues(plain, np.zeros(2))) - truth).max() > 0.05

    def nrmse(model, x0: np.ndarray) -> float:
        steps = 60
        predicted = model.simulate(Trial(t=np.zeros(1), x=x0[None]), steps, None)
        exact = np.array([expm(A * model.dt_ * k) @ x0 for k in range(1, steps + 1)])
        return float(np.max(np.sqrt(np.mean((predicted - exact) ** 2, axis=0))
                            / exact.std(axis=0)))

    far = np.array([3.0, -2.5])
    assert nrmse(affine, far) < 0.01  # 0.0005 measured
    assert nrmse(plain, far) > 0.5  # 1.6 measured


def test_model_files_from_before_the_activation_option_load_as_tanh_networks():
    from dynid.models.continuous.node import NODEParams

    stored = NODEParams().to_dict()
    assert stored.pop("activation") == "silu"  # the default now
    assert NODEParams.from_dict(stored).activation == "tanh"  # what such a file holds
    assert NODEParams.from_dict({**stored, "activation": "silu"}).activation == "silu"


@pytest.mark.parametrize("trainer, crash_epoch", [(ShootingTrainer, 4), (LBFGSTrainer, 2)])
def test_an_interrupted_fit_resumes_bit_identically(tmp_path, monkeypatch, trainer, crash_epoch):
    params = FAST[:-2] + ["epochs=6", "validation=0.25", "lbfgs=75"]
    data = linear_data(n=80)
    whole = api.fit(data, "node", params, seed=3, device="cpu").model

    original = trainer.train_step

    def crash(self, epoch):
        if epoch == crash_epoch:
            raise KeyboardInterrupt
        return original(self, epoch)

    options = TrainingOptions(checkpoint_dir=str(tmp_path), checkpoint_every_s=0.0)
    monkeypatch.setattr(trainer, "train_step", crash)
    with pytest.raises(KeyboardInterrupt):
        api.fit(data, "node", params, seed=3, device="cpu", training=options)
    monkeypatch.setattr(trainer, "train_step", original)
    resumed = api.fit(data, "node", params, seed=3, device="cpu",
                      training=TrainingOptions(checkpoint_dir=str(tmp_path), resume=True,
                                               checkpoint_every_s=0.0)).model
    assert resumed.metrics_["epochs"] == 6
    assert resumed.metrics_["lbfgs_epochs"] == 3
    for name, value in whole.arrays().items():
        assert np.array_equal(resumed.arrays()[name], value), name


def test_dopri5_fit_and_forecast_run_and_agree_with_rk4_on_the_learned_field():
    model = api.fit(linear_data(n=60), "node", FAST[:-3] + ["epochs=3", "solver=dopri5"],
                    seed=0, device="cpu").model
    x0 = np.array([[0.5, 0.5]])
    adaptive = model.simulate(Trial(t=np.zeros(1), x=x0), 20, None)
    # The same weights integrated by RK4 with many substeps.
    z0 = (x0[0] - model.center_) / model.scale_
    network = model.network_
    deltas = torch.full((1, 20), model.dt_, dtype=torch.float64)
    with torch.no_grad():
        rk4 = solve(network, torch.as_tensor(z0)[None], deltas, substeps=16)[0, 1:].numpy()
    assert np.allclose(adaptive, rk4 * model.scale_ + model.center_, atol=1e-5)


@pytest.mark.slow
def test_node_forecasts_van_der_pol_from_irregular_samples():
    """Issue 14's goal: NRMSE <= 0.05 over one period from new initial conditions drawn from
    the training starts' distribution, with the settings the benchmark measured (seed 0: all
    ten met since round 7's SiLU default, worst 0.030; over seeds 0-2, 29 of 30, seed 1 misses
    (2.8, 2.52) at 0.095; benchmarks/README.md)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
    import node_vanderpol as bench

    model = api.fit(bench.training_data(10, 300), "node", list(bench.GOAL_PARAMS), seed=0,
                    device="cpu").model
    for x0 in bench.NEW_STARTS:
        assert bench.forecast_nrmse(model, np.array(x0), bench.PERIOD) <= 0.05
