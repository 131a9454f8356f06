"""Generalized teacher forcing (GTF; Hess, Monfared, Brenner & Durstewitz, ICML 2023) for the
piecewise-linear RNNs of ``cells``, as a ``Trainable`` strategy of the shared training loop.

The forward pass over a training window x_0..x_T (standardised, N observed coordinates,
identity read-out onto the first N of M latents) runs

    z_t = F(z~_{t-1}, u_{t-1}),    z~_t[:N] = (1 - alpha) z_t[:N] + alpha d_t    (t % tau == 0)

with d_t the forcing signal (the data, or the data smoothed when they are noisy) and z~ = z
at unforced steps and on the unobserved latents. The loss is the MSE between the *pre-forcing*
predictions z_t[:N] and x_t. alpha = 1, tau = 1 is classical teacher forcing, alpha = 0 a free
run. Gradients through the forcing carry the factor (1 - alpha), so the loss gradient's
Jacobian products stay bounded when (1 - alpha) |J| <~ 1: alpha is set from an estimate N^ of
the Jacobian growth along the batch, N^ = max over sequences of the geometric mean of the
spectral norms |J_t| (the paper's product upper bound), alpha* = max(0, 1 - N^(-tau)) (tau = 1
is the paper's rule; a forcing every tau steps lets tau Jacobians compound in between). Every
``ALPHA_EVERY`` batches alpha jumps up to alpha* if that is larger, else decays towards it,
alpha <- gamma alpha + (1 - gamma) alpha*. The paper's gamma = 0.999 (a half-life of 693
updates) suits its 250 000 batches; dynid trains 50-100 times fewer. Kept as is, alpha would
hardly leave 1 (near-pure teacher forcing, which the paper shows fails on chaotic data); scaled
to the paper's relative half-life (1.4 % of training) it collapses within the first epoch when
the initial model is contracting (alpha* = 0), leaving a free-run-trained model stuck on a
plateau (measured on a rotation: 15 of 30 epochs without progress). So gamma gives alpha a
half-life of ``HALF_LIFE`` of the training's alpha updates (``decay_rate``).

Where dynid differs from the reference code (DurstewitzLab/GTF-shPLRNN), and why:
- N^ is computed from the Jacobians at the forced states z~_{t-1} of the batch, the products
  the gradient is actually carried through (``gtf_gradients`` returns those states); the
  reference evaluates them at the forcing signals. With every latent observed the two differ
  by (1 - alpha) times the one-step error.
- Only the observed latents are forced (the reference's ``partial_forcing``). Its default with
  the identity read-out forces the unobserved ones too, towards the read-out's pseudo-inverse,
  which is 0 there: a pull to 0 of strength alpha that a free run does not have. Here they
  are inferred from the data by the warm-up below instead.
- Batches of 64 windows of 50 steps, not 16 of 200: as many samples per batch at 2.5 times
  less CPU (the cost is per time step, nearly independent of the batch), and with alpha near
  0.1 the gradient's memory (1 - alpha)^t has faded by 50 steps.

Unobserved latents start at 0 at the beginning of a window and are inferred by a teacher-forced
warm-up (alpha = 1 on the observed coordinates, no gradient) over the window's first ``warmup``
samples; forecasts infer their starting state the same way over the end of the history
(``infer_state``).

Model choice (the weights kept, and early stopping): the geometry of a long free run, as the
reference code judges its saved models (DurstewitzLab/ALRNN-DSR's tutorial keeps the epoch with
the best D_stsp of a 10,000-step run, checked every 20 epochs; GTF-shPLRNN logs D_stsp, D_H and
PE(20) every 25). Every ``geometry_every`` epochs and at the last, the model runs freely from
the states inferred at ``FREE_RUN_STARTS`` rows spread over the training data (the first and
the last among them), each run as long as the training data (``free_run_check``), and the runs'
observed coordinates are compared with those data: score
D_stsp + D_H (``dynid.metrics.dsr``; both 0 for a perfect run). A run that is non-finite or
leaves the data's box widened by its range on each side (``dynid.metrics.dsr.escapes``; D_stsp drops samples
outside the box, so it cannot see an escape) counts as diverged and ranks behind every bounded
run, diverged ones among themselves by the 20-step error below (the fallback). Between checks
the score is infinite: no choice is made where nothing was measured. A 20-step error alone
cannot choose: a model that diverges after 1000 steps, or collapses to a fixed point after 100,
passes it. Cost: one batch of ``FREE_RUN_STARTS`` free runs of the record's length per check
and the two measures: 0.12 CPU s (plrnn, M 3, H 100) and 0.1 s (alrnn, M 20) on 9000
Lorenz-63 samples, against 1.1 s and 0.46 s an epoch of the defaults (round 9, under load):
2-4 % at ``geometry_every`` 5.

The 20-step error (the paper's PE(20)): the mean squared error of 20-step free runs started,
after the same warm-up, at evenly spaced points of the held-out blocks. A teacher-forced loss
would reward a model that cannot run freely.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dynid.training import TrainingSession, TrainingStep, arrays_to_module, module_to_arrays

if TYPE_CHECKING:
    import torch

    from dynid.models.rnn.cells import LatentCell

ALPHA_EVERY = 5  # batches between two alpha estimates (the paper's k)
HALF_LIFE = 0.1  # of the alpha updates of a training run (see the module docstring)
VALIDATION_HORIZON = 20
VALIDATION_STARTS = 256  # at most, evenly spaced over the held-out blocks
FREE_RUN_STARTS = 8  # free runs from states spread over the data, per geometry check
DIVERGED = 1e6  # added to the 20-step error of a diverged run: behind every bounded one


@dataclass(frozen=True)
class GTFSettings:
    """One GTF training run. alpha: fixed forcing strength, None = adaptive; interval: force
    every ``interval`` steps (tau); batch windows of ``sequence`` steps after ``warmup``
    inference steps, ``batches`` per epoch over ``epochs`` epochs; learning rate decaying
    geometrically from ``lr`` to ``lr_end``; ``regularisation`` weight of the L2 penalty on the
    coupling weights; ``noise`` the sd of Gaussian noise added to each batch (standardised
    units); the free-run geometry that chooses the kept weights checked every
    ``geometry_every`` epochs."""

    alpha: float | None
    interval: int
    batch: int
    batches: int
    sequence: int
    warmup: int
    epochs: int
    lr: float
    lr_end: float
    regularisation: float
    noise: float
    geometry_every: int

    def decay_rate(self) -> float:
        """gamma of the adaptive alpha's decay: a half-life of ``HALF_LIFE`` of the alpha
        updates in training."""
        updates = self.epochs * self.batches / ALPHA_EVERY
        return 0.5 ** (1.0 / max(HALF_LIFE * updates, 1.0))


@dataclass(frozen=True)
class Series:
    """Standardised training or held-out trials, one after another: targets x (n, N),
    forcing signals d (n, N), inputs u (n, m) (m may be 0) as float32 tensors; ``starts`` (k,)
    the first row of each of the k trials and ``lengths`` (k,) their lengths."""

    x: torch.Tensor
    d: torch.Tensor
    u: torch.Tensor
    starts: np.ndarray
    lengths: np.ndarray

    @classmethod
    def of(cls, trials: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
           device: torch.device) -> Series:
        """From (x, d, u) arrays per trial."""
        import torch

        def stacked(i: int) -> torch.Tensor:
            return torch.as_tensor(np.vstack([t[i] for t in trials]), dtype=torch.float32,
                                   device=device)

        lengths = np.array([len(t[0]) for t in trials], dtype=np.int64)
        return cls(stacked(0), stacked(1), stacked(2),
                   np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64), lengths)

    def windows(self, first: np.ndarray, length: int
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(x, d, u) windows (B, length, .) starting at the rows ``first`` (B,)."""
        import torch

        rows = torch.as_tensor(first[:, None] + np.arange(length)[None, :], device=self.x.device)
        return self.x[rows], self.d[rows], self.u[rows]


def rollout(cell: LatentCell, z: torch.Tensor, steps: int, u: torch.Tensor,
            forcing: torch.Tensor | None = None, alpha: float = 0.0, interval: int = 1
            ) -> tuple[torch.Tensor, torch.Tensor]:
    """``steps`` steps from states z (B, M) at time 0 with inputs u (B, >= steps, m).

    forcing (B, steps + 1, N): signals d_t mixed into the first N latents at t % interval == 0
    with weight alpha (None: a free run). Returns (predictions, forced states), each
    (B, steps, M): z_t before and z~_t after the forcing, t = 1..steps.
    """
    import torch

    step = cell.stepper()
    drive = cell.drive(u[:, :steps])
    n = 0 if forcing is None else forcing.shape[-1]
    if n:
        # z~ = z + w * (d - z) with w = alpha on the observed latents and 0 on the others.
        target = torch.nn.functional.pad(forcing, (0, cell.latent - n))
        weight = torch.zeros(cell.latent, dtype=z.dtype, device=z.device)
        weight[:n] = alpha
    predictions, states = [], []
    for t in range(1, steps + 1):
        z = predicted = step(z) if drive is None else step(z) + drive[:, t - 1]
        if n and t % interval == 0:
            z = torch.lerp(predicted, target[:, t], weight)
        predictions.append(predicted)
        states.append(z)
    if not predictions:
        empty = z.new_zeros((z.shape[0], 0, z.shape[-1]))
        return empty, empty
    return torch.stack(predictions, dim=1), torch.stack(states, dim=1)


def forcing_weights(cell: LatentCell, n: int, alpha: float, steps: int, interval: int,
                    like: torch.Tensor) -> torch.Tensor:
    """The forcing weights w_t (steps, M) of ``rollout``'s z~_t = z_t + w_t (d_t - z_t),
    t = 1..steps: alpha on the first n latents at forced steps (t % interval == 0), else 0."""
    import torch

    weights = torch.zeros(steps, cell.latent, dtype=like.dtype, device=like.device)
    weights[interval - 1::interval, :n] = alpha
    return weights


def gtf_gradients(cell: LatentCell, z: torch.Tensor, x: torch.Tensor, u: torch.Tensor,
                  forcing: torch.Tensor, alpha: float, interval: int
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """The GTF loss of one batch, its gradient accumulated into the cell's ``.grad``, without
    autograd through time.

    z (B, M) the states at time 0 (constants); x (B, T + 1, N) the targets, forcing
    (B, T + 1, N) the signals d_t and u (B, >= T, m) the inputs of ``rollout``. The loss is the
    mean over (B, T, N) of (z_t[:N] - x_t)^2, z_t the pre-forcing predictions, t = 1..T.

    Why by hand: autograd through a loop of T steps records ~10 tiny operations a step, and
    their per-operation overhead, not arithmetic, is the cost at M = 3. Both cells are
    piecewise linear, so the loss's gradient with respect to the state is carried backwards
    exactly by their Jacobians J_t = dz_t / dz~_{t-1} (``LatentCell.pullback``, set up once
    after the forward run): dL/dz_t = (z_t - x_t) 2 / (B T N) + (1 - w_t) dL/dz~_t and
    dL/dz~_{t-1} = (dL/dz_t) J_t, a few small operations a step. The weights' gradient is then
    one batched backward pass of a single step from all the states z~_{t-1} at once with the
    adjoints dL/dz_t (the step's parameters enter each step the same way).

    Returns (loss (), the states z~_{t-1} (B, T, M) the T steps started from, t = 1..T: z and
    the forced states; their Jacobians carried the gradient).
    """
    import torch

    steps, n = x.shape[1] - 1, x.shape[-1]
    with torch.no_grad():
        previous = torch.cat([z[:, None], rollout(cell, z, steps - 1, u, forcing, alpha,
                                                  interval)[1]], dim=1)
    # The predictions z_t again, from all z~_{t-1} at once, now recording for the weights.
    inputs = previous.reshape(-1, cell.latent)
    drive = cell.drive(u[:, :steps].reshape(inputs.shape[0], -1))
    predictions = cell.stepper()(inputs)
    if drive is not None:
        predictions = predictions + drive
    predictions = predictions.reshape(z.shape[0], steps, cell.latent)
    error = predictions.detach()[..., :n] - x[:, 1:]
    loss = torch.mean(error ** 2)
    with torch.no_grad():
        direct = torch.nn.functional.pad(error * (2.0 / error.numel()),
                                         (0, cell.latent - n)).unbind(1)
        pull = cell.pullback(previous)
        keep = (1.0 - forcing_weights(cell, n, alpha, steps, interval, z)).unbind(0)  # (M,) each
        adjoints: list[torch.Tensor] = [z] * steps
        carried = torch.zeros_like(z)  # dL/dz~_t, nothing after the last step
        for t in range(steps - 1, -1, -1):
            adjoints[t] = torch.addcmul(direct[t], keep[t], carried)
            if t:
                carried = pull(t, adjoints[t])
    predictions.backward(torch.stack(adjoints, dim=1))
    return loss, previous


def teacher_forced(cell: LatentCell, d: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """The latent states (B, W, M) at the observed samples d (B, W, N): the unobserved latents
    start at 0 and are driven over the window with the observed ones forced to d (alpha = 1)."""
    import torch

    z = torch.cat([d[:, 0], d.new_zeros((d.shape[0], cell.latent - d.shape[-1]))], dim=-1)
    forced = rollout(cell, z, d.shape[1] - 1, u, d, alpha=1.0)[1]
    return torch.cat([z[:, None], forced], dim=1)


def infer_state(cell: LatentCell, d: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """The latent state (B, M) at the last of the observed samples d (B, W, N) (a teacher-forced
    warm-up over the window, ``teacher_forced``)."""
    return teacher_forced(cell, d, u)[:, -1]


def estimate_alpha(cell: LatentCell, states: torch.Tensor, interval: int) -> float:
    """alpha* = max(0, 1 - N^(-interval)) from the Jacobians at the states (B, T, M) along the
    batch's windows, N^ the largest over windows of the geometric mean of their spectral
    norms (``LatentCell.region_norms``)."""
    import torch

    with torch.no_grad():
        norms = cell.region_norms(states)  # (B, T)
        growth = float(torch.exp(torch.log(norms.clamp_min(1e-12)).mean(dim=1)).max())
    return max(0.0, 1.0 - growth ** -interval)


@dataclass(frozen=True)
class FreeRunCheck:
    """How well a long free run reproduces the training data: D_stsp and D_H of its observed
    coordinates against the data's (``dynid.metrics.dsr``; inf and 1 when it ``diverged``:
    non-finite or escaped, see ``dynid.metrics.dsr.escapes``), and the 20-step error on held-out data (None
    without any)."""

    d_stsp: float
    d_h: float
    diverged: bool
    error_20_steps: float | None

    def score(self) -> float:
        """The model choice's order, lower is better: D_stsp + D_H of a bounded run; behind
        them all, a diverged run's ``DIVERGED`` + its 20-step error."""
        if not self.diverged:
            return self.d_stsp + self.d_h
        return DIVERGED + (math.inf if self.error_20_steps is None else self.error_20_steps)


def free_run_check(cell: LatentCell, data: Series, warmup: int,
                   error_20_steps: float | None) -> FreeRunCheck:
    """The geometry of free runs as long as all of ``data``, from the states inferred over
    ``warmup + 1`` samples before each of ``FREE_RUN_STARTS`` rows spread evenly over ``data``
    (one run from the longest trial's start, that trial's length, with inputs, which are known
    only there), against all of ``data``'s samples. Several starts, because a model can settle
    from one state and escape from another (measured: an AL-RNN bounded for 50,000 steps from
    the start of its training record escaped after 74 from its end)."""
    import torch

    from dynid.metrics.dsr import escapes, power_spectrum_distance, state_space_divergence

    inputs = data.u.shape[-1] > 0
    if inputs:
        trial = int(np.argmax(data.lengths))
        first = data.starts[trial:trial + 1]
        steps = int(data.lengths[trial]) - warmup - 1
    else:
        first = _spaced_rows(data, warmup, 0, FREE_RUN_STARTS) - warmup
        steps = int(data.lengths.sum()) - warmup - 1
    _, d, u = data.windows(first, warmup + 1 + (steps if inputs else 0))
    with torch.no_grad():
        z = infer_state(cell, d[:, : warmup + 1], u)
        u_run = u[:, warmup:] if inputs else u.new_zeros((len(first), steps, 0))
        runs = rollout(cell, z, steps, u_run)[0][..., : d.shape[-1]].cpu().numpy()
    run = runs.reshape(-1, runs.shape[-1])  # one after another
    x = data.x.cpu().numpy()
    if escapes(x, run):
        return FreeRunCheck(math.inf, 1.0, True, error_20_steps)
    # D_H on the runs' length: each run is then one of the segments its spectra average.
    return FreeRunCheck(state_space_divergence(x, run),
                        power_spectrum_distance(x[:steps], run), False, error_20_steps)


class GTFTraining:
    """GTF with RAdam on random windows of ``train`` (a ``Trainable``; one epoch =
    ``settings.batches`` batches). ``alpha`` holds the forcing strength now."""

    def __init__(self, cell: LatentCell, train: Series, held_out: Series | None,
                 settings: GTFSettings, session: TrainingSession) -> None:
        import torch

        self.cell, self.train, self.held_out = cell, train, held_out
        self.settings, self.session = settings, session
        self.alpha = 1.0 if settings.alpha is None else settings.alpha
        self.gamma = settings.decay_rate()
        self.batches_done = 0
        self.epoch = 0  # the last epoch trained
        self.window = settings.warmup + settings.sequence + 1
        self.optimiser = torch.optim.RAdam(cell.parameters(), lr=settings.lr)
        # RAdam's state as it creates it lazily, here at once: its arrays then exist from the
        # start and a checkpoint's names never change.
        for p in cell.parameters():
            self.optimiser.state[p] = {"step": torch.tensor(0.0),
                                       "exp_avg": torch.zeros_like(p),
                                       "exp_avg_sq": torch.zeros_like(p)}
        self.coupling = [p for name, p in cell.named_parameters() if name.startswith("W")]
        self.validation_starts = (None if held_out is None
                                  else _spaced_rows(held_out, settings.warmup,
                                                    VALIDATION_HORIZON, VALIDATION_STARTS))

    def _sample(self) -> np.ndarray:
        """First rows (B,) of ``batch`` windows drawn uniformly among all full windows."""
        import torch

        counts = np.maximum(self.train.lengths - self.window + 1, 0)
        draws = torch.randint(int(counts.sum()), (self.settings.batch,),
                              generator=self.session.torch_generator).numpy()
        trial = np.searchsorted(np.cumsum(counts), draws, side="right")
        return self.train.starts[trial] + draws - (np.cumsum(counts) - counts)[trial]

    def train_step(self, epoch: int) -> TrainingStep:
        import torch

        s = self.settings
        self.epoch = epoch
        progress = (epoch - 1) / max(s.epochs - 1, 1)
        for group in self.optimiser.param_groups:
            group["lr"] = s.lr * (s.lr_end / s.lr) ** progress
        losses = []
        for _ in range(s.batches):
            x, d, u = self.train.windows(self._sample(), self.window)
            if s.noise > 0:
                noise = torch.randn(x.shape, generator=self.session.torch_generator) * s.noise
                x, d = x + noise.to(x.device), d + noise.to(x.device)
            with torch.no_grad():
                z = infer_state(self.cell, d[:, : s.warmup + 1], u)
            x, d, u = x[:, s.warmup:], d[:, s.warmup:], u[:, s.warmup:]
            self.optimiser.zero_grad()
            loss, states = gtf_gradients(self.cell, z, x, u, d, self.alpha, s.interval)
            if s.regularisation:
                with torch.no_grad():  # the L2 penalty's gradient, 2 lambda w: no autograd
                    for w in self.coupling:
                        w.grad.add_(w, alpha=2.0 * s.regularisation)
            self.optimiser.step()
            self.batches_done += 1
            if s.alpha is None and self.batches_done % ALPHA_EVERY == 0:
                # The Jacobians the gradient just passed through (the forced states'), so the
                # bound is on the products backpropagation multiplies.
                estimate = estimate_alpha(self.cell, states, s.interval)
                self.alpha = (estimate if estimate > self.alpha
                              else self.gamma * self.alpha + (1.0 - self.gamma) * estimate)
            losses.append(loss)
        # One read of the losses per epoch, not a device synchronisation per batch.
        return TrainingStep(float(torch.stack(losses).mean()))

    def validation_loss(self) -> float | None:
        """The model choice's score (``FreeRunCheck.score``) every ``geometry_every`` epochs
        and at the last; infinite between them, where nothing is measured."""
        s = self.settings
        if self.epoch % s.geometry_every and self.epoch != s.epochs:
            return math.inf
        return self.check().score()

    def check(self) -> FreeRunCheck:
        """The free-run geometry and 20-step error of the weights now."""
        return free_run_check(self.cell, self.train, self.settings.warmup, self.error_20_steps())

    def error_20_steps(self) -> float | None:
        """Mean squared error of free runs of ``VALIDATION_HORIZON`` steps from the held-out
        starts (standardised units); None without held-out data."""
        import torch

        if self.validation_starts is None:
            return None
        w, h = self.settings.warmup, VALIDATION_HORIZON
        x, d, u = self.held_out.windows(self.validation_starts - w, w + h + 1)
        with torch.no_grad():
            z = infer_state(self.cell, d[:, : w + 1], u)
            runs, _ = rollout(self.cell, z, h, u[:, w:])
            error = torch.mean((runs[..., : x.shape[-1]] - x[:, w + 1:]) ** 2)
        return float(error) if torch.isfinite(error) else math.inf

    def state_arrays(self) -> dict[str, np.ndarray]:
        arrays = {f"net/{name}": value for name, value in module_to_arrays(self.cell).items()}
        for i, state in self.optimiser.state_dict()["state"].items():
            arrays.update({f"optimiser/{i}/{key}": value.detach().cpu().numpy().copy()
                           for key, value in state.items()})
        arrays["alpha"] = np.array(self.alpha, dtype=np.float64)
        arrays["batches_done"] = np.array(self.batches_done, dtype=np.int64)
        return arrays

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        import torch

        arrays_to_module(self.cell, {name[4:]: value for name, value in arrays.items()
                                     if name.startswith("net/")})
        stored = self.optimiser.state_dict()
        for i, state in stored["state"].items():
            for key in state:
                state[key] = torch.from_numpy(arrays[f"optimiser/{i}/{key}"].copy())
        self.optimiser.load_state_dict(stored)
        self.alpha = float(arrays["alpha"])
        self.batches_done = int(arrays["batches_done"])


def _spaced_rows(data: Series, warmup: int, horizon: int, count: int) -> np.ndarray | None:
    """Rows of ``data`` (at most ``count``, evenly spaced, the first and last included) with
    ``warmup`` samples before and ``horizon`` after them in the same trial; None if none."""
    rows = np.concatenate([
        np.arange(start + warmup, start + length - horizon)
        for start, length in zip(data.starts, data.lengths)
    ])
    if rows.size == 0:
        return None
    keep = np.unique(np.linspace(0, rows.size - 1, min(rows.size, count)).astype(int))
    return rows[keep]
