"""dynid's ``node`` beside a plain torchdiffeq neural ODE (issue 14: "torchdiffeq-based code (fit
time, accuracy)"), on node_vanderpol.py's data and new starts.

The torchdiffeq model is what its documentation and examples lead one to write: the same MLP
(``width`` x ``depth``, node's ``activation``, float64, on the same standardised states), Adam
with the same learning rate and cosine decay over the same number of epochs, minibatches
(``batch``) of the same multiple-shooting segments (``segment`` intervals, every start sample
of the fit part, the first ``1 - validation`` of each trial). torchdiffeq's ``odeint`` takes
one time vector for a batch, so a minibatch of irregularly sampled segments is integrated over
the sorted union of their times measured from each segment's start (the usual way, as in
Rubanova et al.'s Latent ODEs), with ``dopri5`` at rtol 1e-6, atol 1e-8 (or ``--method rk4``
at half the median step). With ``lbfgs``, Adam is followed by the same full-batch L-BFGS
stage as dynid's (torch.optim.LBFGS with dynid's settings, the loss summed over all segments
in chunks of ``batch``). No early stopping, no keeping of the best held-out weights and no
fine-tuning stage: those are dynid's.

The ``-p`` options are dynid's node's hyperparameters (its defaults where not given); the
torchdiffeq model takes width, depth, segment, batch, lr, validation, epochs and lbfgs from
them, so both train alike.

    python benchmarks/node_vs_torchdiffeq.py [--seeds 0] [--method dopri5|rk4] [--epochs N]
                                             [--only dynid|torchdiffeq]
                                             [-p key=value ...]

Prints one JSON line per seed and model (fit wall and CPU seconds, NRMSE per new start), then
one summary line per model; the torchdiffeq fit logs each epoch's loss and CPU time to stderr.
Needs the ``bench`` extra (torchdiffeq).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Iterator

import numpy as np
import torch

import node_vanderpol as vdp
from dynid import api
from dynid.models.continuous.node import NODEParams
from dynid.models.continuous.networks import ACTIVATIONS
from dynid.models.continuous.shooting import LBFGSTrainer, segment_trials
from dynid.training import block_split
from dynid.training.networks import mlp


class Field(torch.nn.Module):
    """dx/dt = MLP(x), as in torchdiffeq's examples (time ignored)."""

    def __init__(self, d: int, width: int, depth: int, activation: str) -> None:
        super().__init__()
        self.net = mlp(d, width, depth, d, ACTIVATIONS[activation])

    def forward(self, t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def solver_options(method: str, dt: float) -> dict[str, object]:
    if method == "rk4":
        return {"method": "rk4", "options": {"step_size": dt / 2, "interp": "cubic"}}
    return {"method": "dopri5", "rtol": 1e-6, "atol": 1e-8}


class TorchdiffeqNODE:
    """Fit and forecast of the plain torchdiffeq model on standardised states."""

    def __init__(self, data, params: NODEParams, seed: int, method: str, epochs: int) -> None:
        stacked = np.vstack([trial.x for trial in data.trials])
        self.center, self.scale = stacked.mean(axis=0), stacked.std(axis=0)
        self.dt_ = float(np.median(np.concatenate([np.diff(t.t) for t in data.trials])))
        self.params, self.method, self.epochs, self.seed = params, method, epochs, seed
        rows = [np.column_stack([t.t, (t.x - self.center) / self.scale]) for t in data.trials]
        head, _ = block_split(rows, params.validation)
        segments = segment_trials(head, data.n_variables, params.segment)
        times = np.concatenate([np.zeros((segments.count, 1)),
                                np.cumsum(segments.deltas, axis=1)], axis=1)
        self.x = torch.as_tensor(segments.x)
        self.tau = torch.as_tensor(times)
        torch.manual_seed(seed)
        self.field = Field(data.n_variables, params.width, params.depth,
                           params.activation).double()

    def _rollout(self, x0: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
        """States (B, K+1, d) at the times tau (B, K+1) from x0 (B, d) at tau 0."""
        from torchdiffeq import odeint

        union, index = torch.unique(tau, sorted=True, return_inverse=True)
        solution = odeint(self.field, x0, union, **solver_options(self.method, self.dt_))
        return solution[index, torch.arange(x0.shape[0])[:, None]]

    def _loss(self, rows: torch.Tensor) -> torch.Tensor:
        """Rollout MSE of the segments ``rows`` (standardised units)."""
        predicted = self._rollout(self.x[rows, 0], self.tau[rows])
        return (predicted[:, 1:] - self.x[rows, 1:]).pow(2).mean()

    def _chunks(self) -> Iterator[tuple[torch.Tensor, float]]:
        """All fit segments in chunks of ``batch`` (one odeint time vector each): the rows
        and their share of the segments."""
        count, batch = self.x.shape[0], self.params.batch
        for start in range(0, count, batch):
            rows = torch.arange(start, min(start + batch, count))
            yield rows, len(rows) / count

    def segment_mse(self) -> float:
        """Rollout MSE over all fit segments at the current weights (dynid's ``segment_mse``
        metric)."""
        with torch.no_grad():
            return sum(float(self._loss(rows)) * share for rows, share in self._chunks())

    def _log(self, stage: str, epoch: int, epochs: int, loss: float, started: float) -> None:
        # Progress on stderr: how long the run will take at the machine's load.
        print(f"torchdiffeq {stage} epoch {epoch + 1}/{epochs}: segment mse {loss:.3g}, "
              f"{time.process_time() - started:.1f} CPU s", file=sys.stderr, flush=True)

    def fit(self) -> None:
        """Adam over minibatches of segments, then ``lbfgs`` L-BFGS iterations if asked."""
        count, batch = self.x.shape[0], self.params.batch
        optimizer = torch.optim.Adam(self.field.parameters(), lr=self.params.lr)
        schedule = torch.optim.lr_scheduler.CosineAnnealingLR(
            optimizer, self.epochs * math.ceil(count / batch))
        generator = torch.Generator().manual_seed(self.seed)
        started = time.process_time()
        for epoch in range(self.epochs):
            order = torch.randperm(count, generator=generator)
            total = 0.0
            for start in range(0, count, batch):
                rows = order[start : start + batch]
                loss = self._loss(rows)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                schedule.step()
                total += float(loss.detach()) * len(rows)
            self._log("adam", epoch, self.epochs, total / count, started)
        if self.params.lbfgs:
            self._lbfgs(started)

    def _lbfgs(self, started: float) -> None:
        """dynid's L-BFGS stage (LBFGSTrainer's settings: epochs of ITERATIONS iterations,
        strong Wolfe line search, the curvature memory kept across epochs) on the loss over
        all segments, summed over ``_chunks``."""
        optimizer = torch.optim.LBFGS(
            self.field.parameters(), lr=1.0, max_iter=LBFGSTrainer.ITERATIONS,
            history_size=LBFGSTrainer.HISTORY, tolerance_grad=0.0, tolerance_change=0.0,
            line_search_fn="strong_wolfe")

        def closure() -> torch.Tensor:
            optimizer.zero_grad()
            total = 0.0
            for rows, share in self._chunks():
                part = self._loss(rows) * share
                part.backward()
                total += float(part.detach())
            return torch.tensor(total)

        epochs = -(-self.params.lbfgs // LBFGSTrainer.ITERATIONS)
        for epoch in range(epochs):
            # step returns the loss at the epoch's start: logged without one more evaluation.
            self._log("lbfgs", epoch, epochs, float(optimizer.step(closure)), started)

    def forecast(self, x0: np.ndarray, steps: int) -> np.ndarray:
        """States (steps, d) every dt after x0 (d,)."""
        from torchdiffeq import odeint

        z0 = torch.as_tensor((x0 - self.center) / self.scale)[None]
        t = torch.arange(steps + 1, dtype=torch.float64) * self.dt_
        with torch.no_grad():
            z = odeint(self.field, z0, t, **solver_options(self.method, self.dt_))[1:, 0]
        return z.numpy() * self.scale + self.center


def scores(forecast, dt: float) -> list[float]:
    steps = int(round(vdp.PERIOD / dt))
    t = np.arange(steps + 1) * dt
    return [vdp.nrmse(forecast(np.array(x0), steps), vdp.exact(np.array(x0), t)[1:])
            for x0 in vdp.TEST_STARTS]


def timed(fit) -> tuple[object, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = fit()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--method", choices=("dopri5", "rk4"), default="dopri5")
    parser.add_argument("--epochs", type=int,
                        help="torchdiffeq's epochs (default: dynid's most epochs, -p epochs)")
    parser.add_argument("--only", choices=("dynid", "torchdiffeq"),
                        help="fit one of the two (to run them as separate processes)")
    parser.add_argument("-p", dest="params", action="append", default=[],
                        help="dynid node's hyperparameters; torchdiffeq's model takes width, "
                        "depth, segment, batch, lr, validation, epochs and lbfgs from them")
    args = parser.parse_args()
    params = NODEParams.build(args.params)
    epochs = params.epochs if args.epochs is None else args.epochs
    torch.set_num_threads(1)  # as dynid's fits (dynid.runtime.DEFAULT_TORCH_THREADS)
    data = vdp.training_data(10, 300)
    results: dict[str, list[list[float]]] = {}
    for seed in [int(s) for s in args.seeds.split(",")]:
        runs = {}
        if args.only != "torchdiffeq":
            model, wall, cpu = timed(lambda: api.fit(data, "node", args.params, seed=seed,
                                                     device="cpu").model)
            runs["dynid node"] = (wall, cpu, scores(
                lambda x0, steps: model.simulate(vdp.Trial(t=np.zeros(1), x=x0[None]), steps,
                                                 None), model.dt_),
                {k: v for k, v in model.metrics_.items() if k != "training_curve"})
        if args.only != "dynid":
            plain = TorchdiffeqNODE(data, params, seed, args.method, epochs)
            _, wall, cpu = timed(plain.fit)
            runs[f"torchdiffeq {args.method}"] = (wall, cpu, scores(plain.forecast, plain.dt_),
                                                  {"segment_mse": plain.segment_mse()})
        for name, (wall, cpu, nrmse, metrics) in runs.items():
            results.setdefault(name, []).append(nrmse)
            print(json.dumps({"model": name, "seed": seed, "fit_wall_s": round(wall, 1),
                              "fit_cpu_s": round(cpu, 1), "metrics": metrics,
                              "nrmse_one_period": [round(v, 4) for v in nrmse]}), flush=True)
    for name, nrmse in results.items():
        print(json.dumps({"model": name, **vdp.summary(nrmse)}))


if __name__ == "__main__":
    main()
