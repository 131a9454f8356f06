"""Leaky echo-state network (Jaeger 2001; Lukoševičius 2012, "A practical guide to applying echo
state networks") with a ridge read-out on the increment.

With z the standardised state, the reservoir state r (n units) follows

    r_t = (1 - a) r_{t-1} + a tanh(W r_{t-1} + W_in z_t + b),    r = 0 before a trial starts,

and the read-out predicts ``z_{t+1} - z_t`` from ``[r_t, z_t]``. W is sparse random (about
``connections`` nonzeros per row) scaled to spectral radius rho, W_in and b uniform. All three are
drawn from the seed and stored in the model file, so a loaded model forecasts bit-identically.
The first ``washout`` samples of every trial only warm the reservoir up; a forecast does the same
over the last ``washout`` history samples, then runs in closed loop.

Unless given, the spectral radius, leak and input scaling (from small grids around the values
that work on standardised chaotic flows, e.g. Pathak et al. 2018, reservoirpy's Lorenz tutorial)
and the ridge are chosen together by closed-loop skill on held-out blocks of the training data
(``readout.select_readout``): how many steps free runs started inside a block the read-out never
saw stay within the valid-prediction threshold, among the settings whose free run of several
times the data's length keeps the data's state-space occupation and spectrum (the readout
module's geometry gate: on 2,000 samples of Lorenz with 5 % noise, skill alone chose leak 0.3,
whose free run settled on an equilibrium). Why not fixed defaults: on Lorenz-63 with 5 %
observation noise the old fixed rho 0.9, leak 1, input scaling 0.5 gave a 50,000-step free run
of D_stsp 0.44 where rho 1.25, leak 0.3, input scaling 1 gave 0.24, and from x alone (a delay
embedding) 1.3 against 0.08; the held-out skill ranks the settings the same way.

Reservoir draws (``draws``, default 1): the candidates are (draw, setting) pairs, draw k's
matrices coming from the fit's seed + k, and ``rank_by=geometry`` ranks them by the least
D_stsp of a 50,000-step free run against the data among runs that stay in the data's range
(``readout.RANK_BY_GEOMETRY``). From x alone (Lorenz, 1 % noise, a 3-D delay embedding) one
setting's free runs differ across draws as much as across settings (D_stsp 0.13-0.43), which
held-out skill, saturated at its cap, cannot see. Not the default: six draws ranked so gave a
median D_stsp of 0.085 against 0.111 on four development records in round 8, but 0.221 against
0.177 on the same four seeds' records as this machine integrates them (round 9), at seven times
the fit's cost (benchmarks/README.md).
``--max-time`` stops the search, draw by draw, keeping the best candidate scored so far.

Squared read-out (``squared_readout``, Pathak et al. 2017, 2018): the read-out sees r_i^2 in
place of r_i for even i. tanh is odd, so with zero bias the reservoir maps -z to -r and a linear
read-out of it is odd in the input; the squares break that symmetry and give the read-out
quadratic terms (Lorenz's field is quadratic). Stored in the model file (``squared_readout``),
so a loaded model forecasts identically; files from before it load linear. Not the default:
from x alone (Lorenz, 1 % noise, a 3-D delay embedding; dev records 11-14 x reservoir draws
0-2, four free runs each) it read a median D_stsp of 0.164 / D_H 0.057 against 0.158 / 0.055
without, better in 4 of the 12 (record, draw) pairs, and the spread over draws was no narrower
(benchmarks/README.md, round 10).

Reservoir size (``units``, default 300): a larger reservoir did not narrow the spread of the
free run's geometry over reservoir draws, which random-feature theory suggests for the
read-out's one-step fit. On the same records and draws, 1,000 units read a median D_stsp of
0.138 / D_H 0.060 against 0.158 / 0.055 (better in 6 of 12 pairs, within the draws' scatter);
per record the three draws spanned 0.05-0.20 against 0.02-0.37 at 300 units (median span 0.145
against 0.080); and the fit costs 3.7 times as much (about 89 against 24 CPU s for 10,000
samples).

Linearised noise training (``lmnt``; Wikner et al. 2024; the ``lmnt`` module): the read-out is
fitted as if its input z_t carried noise of variance beta (standardised units), to first order:
beta times the Jacobian term of the features [r_t, z_t] with respect to z_t, whose reservoir
block is a diag(1 - tanh^2) W_in (times 2 r_i for the squared units), joins the ridge. A free
run feeds its own errors back as inputs, and a read-out trained to withstand input noise damps
them. ``-p lmnt=none`` chooses beta from ``lmnt.LMNT_GRID`` jointly with the ridge by held-out
skill; ``lmnt_steps`` = k propagates each input's noise through k reservoir steps. Not the
default (0): from x alone (Lorenz, 1 % noise, dev records 11-14) ``lmnt=none`` read a median
D_stsp of 0.180 / D_H 0.061 against 0.130 / 0.050 at twice the fit's cost, because held-out
skill sits at its cap for most betas and the tie then takes a larger ridge; at one setting and
a fixed ridge, betas 1e-4 to 1e-2 moved the records both ways within their scatter
(benchmarks/README.md, round 11).

Committee (``members``, default 1): K reservoirs, drawn from the seeds base + draw K + j, share
one setting and ridge, each has its own ridge read-out, and their predicted increments are
averaged at every closed-loop step, all driven by the fed-back averaged state (one reservoir
of K ``units`` units with a block-diagonal W; ``readout.CommitteeSolver``). The committee is the
candidate the selection scores (held-out skill and the gate of its own closed loop), so the
setting and ridge are the committee's. Averaging independent read-outs lowers the variance of
the fitted field (bagging), the draw-to-draw scatter above. Not the default: from x alone (dev
records 11-14, benchmarks/README.md round 11) it read a median D_stsp of 0.181 (K = 3) and
0.144 (K = 5) against 0.130 for one reservoir, fitting in about 43 and 69 against 28 CPU s.
At each record's setting and ridge fixed to one reservoir's choice, five-member committees of
three disjoint seed sets spanned 0.03-0.05 per record against 0.03-0.16 for single draws, so
averaging does narrow the scatter; but per record they read about the single draws' median
(0.169 / 0.169 / 0.091 / 0.093 against 0.164 / 0.192 / 0.085 / 0.104), and lose the lucky low
draws (median over the 12 (record, draw) pairs 0.142 against 0.115): bagging removes variance,
not the bias the draws share. With 5 % noise on the full state it helped (dev median 0.206 ->
0.142 at K = 5, better on 3 of 4 records; benchmark seeds 1-4 0.296 -> 0.198) but stays
behind ngrc (0.118 and 0.128) there.

Fixed defaults, by principle: bias scaling 0.5 keeps tanh mostly in its unsaturated range;
washout 100 samples is about 10 memory times at rho 0.9 (0.9^100 ~ 3e-5).

Observation noise (``denoise``, on by default; ``denoise`` module): the read-out is fitted on
states smoothed with Savitzky-Golay windows chosen for the noise level estimated from the data,
because noise in the regressors attenuates the fitted map (errors in variables); a forecast
smooths its history with the same windows before starting from its end (so it needs at least
the widest window of history). Clean records stay raw.
"""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import sparse
from scipy.linalg import block_diag
from threadpoolctl import threadpool_limits

from dynid.data.dataset import Dataset, Trial
from dynid.errors import DataError
from dynid.metrics.dsr import leaves_box
from dynid.metrics.forecast import VPT_THRESHOLD
from dynid.models.base import (
    Backend,
    Capabilities,
    Hyperparameters,
    StepMap,
    expect_array,
    param,
)
from dynid.models.reservoir.denoise import stored_smoothing, training_states
from dynid.models.reservoir.lmnt import LMNT_GRID, NoisePenalty
from dynid.models.reservoir.readout import (
    ESCAPE_CHECK_STEPS,
    RANK_BY_GEOMETRY,
    RANK_BY_SKILL,
    CommitteeSolver,
    Design,
    RidgeSolver,
    Standardiser,
    design_rows,
    gate_steps,
    held_out_starts,
    longest,
    min_design_rows,
    row_count,
    select_readout,
    setting_metrics,
    valid_steps,
)

__all__ = ["ESN", "ESNParams", "Reservoir", "ReservoirChoice", "ReservoirSetting"]

# Candidates for the reservoir settings left unset, each scored by held-out closed-loop skill.
SPECTRAL_RADII = (0.9, 1.25)
LEAKS = (0.3, 1.0)
INPUT_SCALINGS = (0.5, 1.0)


@dataclass(frozen=True)
class ESNParams(Hyperparameters):
    units: int = param(300, "reservoir size n (of each member of a committee, see members)")
    spectral_radius: float | None = param(
        None,
        "largest eigenvalue modulus of the recurrent matrix W; none = choose from "
        f"{SPECTRAL_RADII} by closed-loop skill on held-out blocks of the training data, "
        "among settings whose long free run keeps the data's geometry",
    )
    leak: float | None = param(
        None, f"leak rate a in (0, 1], 1 = no leak; none = choose from {LEAKS} the same way"
    )
    input_scaling: float | None = param(
        None,
        "W_in entries uniform in +-this (inputs standardised); none = choose from "
        f"{INPUT_SCALINGS} the same way",
    )
    bias_scaling: float = param(0.5, "bias entries uniform in +-this")
    connections: int = param(10, "mean nonzeros per row of W (sparsity)")
    washout: int = param(100, "samples that only warm the reservoir up, per trial and forecast")
    ridge: float | None = param(
        None,
        "ridge penalty on the mean squared one-step error of the standardised increment; "
        "none = choose by closed-loop skill on held-out blocks of the training data",
    )
    denoise: bool = param(
        True,
        "fit on (and forecast from) states smoothed by Savitzky-Golay with windows chosen for "
        "the noise level estimated from the data (clean data stay raw); false = raw states",
    )
    draws: int = param(
        1,
        "random reservoirs tried, each with every setting: draw k's matrices come from the "
        "fit's seed + k (draw 0 is the reservoir of draws=1)",
    )
    rank_by: str = param(
        RANK_BY_SKILL,
        f"how the (draw, setting) candidates are ranked: {RANK_BY_GEOMETRY} = least D_stsp of "
        "each one's 50,000-step free run against the data, among runs that stay in the data's "
        f"range; {RANK_BY_SKILL} = held-out skill among runs whose D_stsp and D_H are within "
        "1.5 x the best",
    )
    squared_readout: bool = param(
        False,
        "the read-out sees the square of every even-numbered unit's state instead of the state "
        "(Pathak et al. 2018): quadratic terms, and a break of tanh's odd symmetry",
    )
    lmnt: float | None = param(
        0.0,
        "linearised noise training of the read-out (Wikner et al. 2024): the variance of the "
        "noise on the standardised input it is trained to withstand, to first order; 0 = none; "
        f"none = choose from {LMNT_GRID} with the ridge by closed-loop skill on held-out blocks",
    )
    lmnt_steps: int = param(
        1,
        "k of linearised noise training: the noise on each of the last k inputs, propagated "
        "through the reservoir to the read-out's features; 1 = the current input only",
    )
    members: int = param(
        1,
        "reservoirs in a committee (each of `units` units, its own random matrices and ridge "
        "read-out at the same setting and ridge) whose predicted increments are averaged at "
        "every closed-loop step, all driven by the averaged state; 1 = a single reservoir",
    )

    def __post_init__(self) -> None:
        if self.units < 1:
            raise ValueError(f"units must be a positive integer, not {self.units}")
        if self.draws < 1:
            raise ValueError(f"draws must be a positive integer, not {self.draws}")
        if self.members < 1:
            raise ValueError(f"members must be a positive integer, not {self.members}")
        if self.members > 1 and self.lmnt != 0:
            # A committee averages K plain ridge read-outs; the noise term is one ridge's.
            raise ValueError("lmnt (linearised noise training) and members > 1 (a committee) "
                             "cannot be combined: give one of them")
        if self.rank_by not in (RANK_BY_GEOMETRY, RANK_BY_SKILL):
            raise ValueError(
                f"rank_by must be {RANK_BY_GEOMETRY} or {RANK_BY_SKILL}, not {self.rank_by}")
        if self.spectral_radius is not None and not self.spectral_radius >= 0:
            raise ValueError(
                f"spectral_radius must be zero, positive or none, not {self.spectral_radius}"
            )
        if self.leak is not None and not 0 < self.leak <= 1:
            raise ValueError(f"leak must be in (0, 1] or none, not {self.leak}")
        if self.input_scaling is not None and not self.input_scaling >= 0:
            raise ValueError(
                f"input_scaling must be zero, positive or none, not {self.input_scaling}"
            )
        if not self.bias_scaling >= 0:
            raise ValueError(f"bias_scaling must be zero or positive, not {self.bias_scaling}")
        if self.connections < 1:
            raise ValueError(f"connections must be a positive integer, not {self.connections}")
        if self.washout < 1:
            raise ValueError(f"washout must be a positive integer, not {self.washout}")
        if self.ridge is not None and not self.ridge >= 0:
            raise ValueError(f"ridge must be zero, positive or none, not {self.ridge}")
        if self.lmnt is not None and not self.lmnt >= 0:
            raise ValueError(f"lmnt must be zero, positive or none, not {self.lmnt}")
        if self.lmnt_steps < 1:
            raise ValueError(f"lmnt_steps must be a positive integer, not {self.lmnt_steps}")


@dataclass(frozen=True)
class ReservoirSetting:
    """The reservoir's scales: spectral radius of W, leak rate a, input scaling of W_in."""

    spectral_radius: float
    leak: float
    input_scaling: float

    @classmethod
    def candidates(cls, params: ESNParams) -> list[ReservoirSetting]:
        """Every combination of the given settings and the grids of those left unset."""
        def grid(given: float | None, default: tuple[float, ...]) -> tuple[float, ...]:
            return default if given is None else (given,)

        return [cls(*values) for values in itertools.product(
            grid(params.spectral_radius, SPECTRAL_RADII), grid(params.leak, LEAKS),
            grid(params.input_scaling, INPUT_SCALINGS),
        )]

    def label(self) -> str:
        return (f"spectral_radius={self.spectral_radius:g},leak={self.leak:g},"
                f"input_scaling={self.input_scaling:g}")


@dataclass(frozen=True)
class ReservoirChoice:
    """One candidate of the fit: reservoir draw ``draw`` (its matrices from the fit's seed +
    draw) scaled to ``setting``."""

    draw: int
    setting: ReservoirSetting

    @classmethod
    def candidates(cls, params: ESNParams) -> list[ReservoirChoice]:
        """Every draw with every setting, draw by draw (so a fit cut short by --max-time has
        scored whole draws first, draw 0 with all its settings)."""
        settings = ReservoirSetting.candidates(params)
        return [cls(draw, setting) for draw in range(params.draws) for setting in settings]

    def label(self) -> str:
        return f"draw={self.draw},{self.setting.label()}"

    def seeds(self, base: int, members: int) -> list[int]:
        """The seeds of this draw's ``members`` reservoirs: base + draw members + j for member
        j, so draws never share a reservoir and members=1 gives base + draw."""
        first = base + self.draw * members
        return list(range(first, first + members))


@dataclass(frozen=True)
class Reservoir:
    """The fixed random part: recurrent (n, n), input (n, d), bias (n,), leak a; ``squared``:
    whether the read-out sees the even-numbered units' states squared (``readout_features``).

    A committee of ``members`` reservoirs of m units each is one reservoir of n = members m
    units whose recurrent matrix is block-diagonal (no member sees another's units), all driven
    by the same z; its read-out (``readout.CommitteeSolver``) is the mean of the members'."""

    recurrent: np.ndarray
    input: np.ndarray
    bias: np.ndarray
    leak: float
    squared: bool = False
    members: int = 1

    @classmethod
    def draw(
        cls, params: ESNParams, setting: ReservoirSetting, d: int, seed: int | None
    ) -> Reservoir:
        """The reservoir of ``setting``; one seed draws the same matrices up to scale for
        every setting, so settings are compared on one reservoir."""
        rng = np.random.default_rng(seed)
        n = params.units
        recurrent = rng.standard_normal((n, n)) * (rng.random((n, n)) < params.connections / n)
        radius = float(np.max(np.abs(np.linalg.eigvals(recurrent)))) if n else 0.0
        if radius > 0:
            recurrent *= setting.spectral_radius / radius
        return cls(
            recurrent=recurrent,
            input=setting.input_scaling * rng.uniform(-1.0, 1.0, (n, d)),
            bias=rng.uniform(-params.bias_scaling, params.bias_scaling, n),
            leak=setting.leak,
            squared=params.squared_readout,
        )

    @classmethod
    def committee(cls, params: ESNParams, setting: ReservoirSetting, d: int,
                  seeds: list[int]) -> Reservoir:
        """The committee of one reservoir ``draw`` per seed, all at ``setting``."""
        drawn = [cls.draw(params, setting, d, seed) for seed in seeds]
        if len(drawn) == 1:
            return drawn[0]
        return cls.of_blocks(np.stack([member.recurrent for member in drawn]),
                             np.vstack([member.input for member in drawn]),
                             np.concatenate([member.bias for member in drawn]),
                             setting.leak, params.squared_readout)

    @classmethod
    def of_blocks(cls, blocks: np.ndarray, input: np.ndarray, bias: np.ndarray, leak: float,
                  squared: bool) -> Reservoir:
        """The committee of the members' recurrent matrices ``blocks`` (members, m, m), with
        input (members m, d) and bias (members m,) stacked member by member."""
        return cls(recurrent=block_diag(*blocks), input=input, bias=bias, leak=leak,
                   squared=squared, members=len(blocks))

    def blocks(self) -> np.ndarray:
        """The members' recurrent matrices (members, m, m), the diagonal blocks of W."""
        m = self.recurrent.shape[0] // self.members
        return np.stack([self.recurrent[j * m:(j + 1) * m, j * m:(j + 1) * m]
                         for j in range(self.members)])

    def _squared_units(self, width: int) -> np.ndarray:
        """Which of ``width`` units the read-out squares: each member's even-numbered ones."""
        return np.arange(width) % (width // self.members) % 2 == 0

    def readout_features(self, r: np.ndarray, z: np.ndarray) -> np.ndarray:
        """The read-out's features (..., n + d) of states r (..., n) and inputs z (..., d):
        [r, z], with r_i^2 in place of r_i for each member's even i where ``squared``."""
        if self.squared:
            r = np.where(self._squared_units(r.shape[-1]), r**2, r)
        return np.concatenate([r, z], axis=-1)

    def readout_gain(self, r: np.ndarray) -> np.ndarray:
        """d(features)/dr along the diagonal (..., n): 1, or 2 r_i for the squared units."""
        if not self.squared:
            return np.ones_like(r)
        return np.where(self._squared_units(r.shape[-1]), 2.0 * r, 1.0)

    def noise_gains(self, previous: np.ndarray, r: np.ndarray) -> np.ndarray:
        """The Jacobian of the read-out's features with respect to the input z_t that drove
        ``previous`` (..., n) to ``r`` (..., n) is diag(gains) @ [W_in; I_d]: gains (..., n +
        d), a (1 - tanh^2) times ``readout_gain`` for the units, 1 for z (``lmnt`` module)."""
        drive = (r - (1.0 - self.leak) * previous) / self.leak  # tanh(.) of the step
        units = self.leak * (1.0 - drive**2) * self.readout_gain(r)
        return np.concatenate([units, np.ones((*r.shape[:-1], self.input.shape[1]))], axis=-1)

    def propagated_noise(self, states: np.ndarray, steps: int) -> np.ndarray:
        """d features_t / d z_{t-j} for j = 1 .. steps - 1, the units' block (the z block is
        0): (steps - 1, T, n, d) for a trial's states (T, n) run from r = 0 (inputs before the
        trial's start are none). By d r_t / d z_{t-j} = ((1 - a) I + a diag(tanh'_t) W) d
        r_{t-1} / d z_{t-j}, one sparse product per step for all t."""
        n, d, a = self.recurrent.shape[0], self.input.shape[1], self.leak
        previous = np.vstack([np.zeros((1, n)), states[:-1]])
        slope = (1.0 - ((states - (1.0 - a) * previous) / a) ** 2)[:, :, None]  # (T, n, 1)
        current = a * slope * self.input  # d r_t / d z_t, (T, n, d)
        out = np.empty((steps - 1, *current.shape))
        for j in range(steps - 1):
            shifted = np.zeros_like(current)
            shifted[1:] = current[:-1]  # d r_{t-1} / d z_{t-j-1}
            spread = (self._sparse_recurrent @ shifted.transpose(1, 0, 2).reshape(n, -1))
            current = (1.0 - a) * shifted + a * slope * spread.reshape(n, -1, d).transpose(1, 0, 2)
            out[j] = current * self.readout_gain(states)[:, :, None]
        return out

    def noise_penalty(self, gains: np.ndarray, propagated: Iterable[np.ndarray] | None = None
                      ) -> NoisePenalty:
        """The ``NoisePenalty`` of rows of ``noise_gains`` (N, n + d), and of the same rows of
        each step of ``propagated_noise`` ((N, n, d) each) where given (k > 1)."""
        penalty = NoisePenalty.of_gains(
            gains, np.vstack([self.input, np.eye(self.input.shape[1])]))
        if propagated is None:
            return penalty
        n = self.recurrent.shape[0]
        gram = penalty.gram.copy()
        for step in propagated:  # one step at a time: each is an (N, n, d) copy
            flat = step.transpose(1, 0, 2).reshape(n, -1)
            gram[:n, :n] += flat @ flat.T
        return NoisePenalty(gram, penalty.cross, penalty.rows)

    @functools.cached_property
    def _sparse_recurrent(self) -> sparse.csr_array:
        """W in compressed rows: about ``connections`` of n entries per row are nonzero, so a
        step costs O(connections n) instead of O(n^2) per run."""
        return sparse.csr_array(self.recurrent)

    def step(self, r: np.ndarray, z: np.ndarray) -> np.ndarray:
        """The next state (..., n) from r (..., n) driven by z (..., d)."""
        flat = r.reshape(-1, r.shape[-1])
        recurrent = (self._sparse_recurrent @ flat.T).T.reshape(r.shape)
        drive = np.tanh(recurrent + z @ self.input.T + self.bias)
        return (1.0 - self.leak) * r + self.leak * drive

    def run(self, z: np.ndarray) -> np.ndarray:
        """States (T, n) driven by z (T, d) from r = 0."""
        states = np.empty((z.shape[0], self.recurrent.shape[0]))
        r = np.zeros(self.recurrent.shape[0])
        for t in range(z.shape[0]):
            r = states[t] = self.step(r, z[t])
        return states

    def rollout(
        self, weights: np.ndarray, bias: np.ndarray, r: np.ndarray, z: np.ndarray, steps: int,
        box: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> np.ndarray:
        """Closed-loop runs (..., steps, d) from states r (..., n) at inputs z (..., d).

        weights (..., n + d, d) and bias (..., d) broadcast against the leading axes, so one call
        runs several read-outs (candidate ridges) from several starts. With an escape ``box``
        the runs stop early once one has left it (``readout.FreeRun``): fewer than steps rows.
        """
        out = np.empty((*z.shape[:-1], steps, z.shape[-1]))
        checked = 0
        for h in range(steps):
            features = self.readout_features(r, z)[..., None, :]
            z = z + (features @ weights)[..., 0, :] + bias
            out[..., h, :] = z
            if box is not None and h + 1 - checked >= ESCAPE_CHECK_STEPS:
                if leaves_box(out[..., checked : h + 1, :], box):
                    return out[..., : h + 1, :]
                checked = h + 1
            r = self.step(r, z)
        return out


class ESN(Backend):
    """Leaky ESN with a ridge read-out on the increment.

    Fitted arrays (n units, d variables): ``recurrent`` (n, n), ``input_weights`` (n, d),
    ``reservoir_bias`` (n,): the fixed random reservoir; ``mean``, ``scale`` (d,) the
    standardisation in data units; ``weights`` (n + d, d) and ``bias`` (d,): the read-out from
    [r_t, z_t] to z_{t+1} - z_t. A committee of K = ``members`` reservoirs of m = ``units``
    each stores its recurrent blocks (K, m, m), and n = K m in the others (members stacked);
    its ``weights`` and ``bias`` are the mean of the members' read-outs.
    """

    name = "esn"
    summary = "leaky echo-state network, ridge read-out chosen by closed-loop skill"
    Params = ESNParams
    capabilities = Capabilities(uniform_steps=True, time_budget=True)
    # Files from before the fit denoised its states hold no smoothing: they load as raw; files
    # from before the squared read-out hold no squared_readout: their read-out is linear.
    legacy_arrays = frozenset({"smoothing", "squared_readout"})

    @property
    def history_length(self) -> int:
        """The washout, or the smoothing's span where that is longer."""
        span = self.smoothing_.span if hasattr(self, "smoothing_") else 1
        return max(self.params.washout, span)  # type: ignore[attr-defined]

    def _history_states(self, history: Trial) -> np.ndarray:
        """(history_length, d): the history's end, standardised and smoothed as in the fit."""
        scaling = Standardiser(self.mean_, self.scale_)
        return self.smoothing_.apply(scaling.forward(history.x[-self.history_length :]))

    def _fit(self, data: Dataset, *, seed: int | None, device: str, progress: Any) -> None:
        # BLAS at one thread: the products and factorisations are a few hundred wide, and
        # OpenBLAS's second thread spin-waits for a core that others hold (on the shared 2-core
        # machine under load, eigh of the 303 x 303 Gram matrix took 2.6 s, 0.03 s with one).
        with threadpool_limits(1, user_api="blas"):
            self._select(data, seed)

    def _select(self, data: Dataset, seed: int | None) -> None:
        """The reservoir setting and read-out with the best held-out closed-loop skill."""
        params: ESNParams = self.params  # type: ignore[assignment]
        scaling = Standardiser.of([trial.x for trial in data.trials])
        trials_z, smoothing = training_states([trial.x for trial in data.trials], scaling,
                                              params.denoise)
        candidates = ReservoirChoice.candidates(params)
        lengths = [len(z) for z in trials_z]
        _check_rows(lengths, params.washout,
                    min_design_rows(len(candidates), params.ridge, params.lmnt))
        row_trial, row_t = design_rows(lengths, params.washout)
        increments = np.vstack([
            z[row_t[row_trial == i] + 1] - z[row_t[row_trial == i]] for i, z in enumerate(trials_z)
        ])

        # Draw k's matrices come from base + k; without a seed the base is drawn once here, so
        # that the chosen draw can be drawn again below (and is recorded).
        base = seed if seed is not None else int(np.random.SeedSequence().generate_state(1)[0])

        solver = (RidgeSolver if params.members == 1 else functools.partial(
            CommitteeSolver, members=params.members, shared=self.n_variables))

        def design(choice: ReservoirChoice) -> Design:
            reservoir = Reservoir.committee(params, choice.setting, self.n_variables,
                                            choice.seeds(base, params.members))
            trials_r = [reservoir.run(z) for z in trials_z]
            features = np.vstack([
                reservoir.readout_features(r[row_t[row_trial == i]],
                                           trials_z[i][row_t[row_trial == i]])
                for i, r in enumerate(trials_r)
            ])
            # Rows t >= washout >= 1, so every row has the state before it.
            gains = None if params.lmnt == 0 else np.vstack([
                reservoir.noise_gains(r[row_t[row_trial == i] - 1], r[row_t[row_trial == i]])
                for i, r in enumerate(trials_r)
            ])
            propagated = None if gains is None or params.lmnt_steps == 1 else np.concatenate([
                reservoir.propagated_noise(r, params.lmnt_steps)[:, row_t[row_trial == i]]
                for i, r in enumerate(trials_r)
            ], axis=1)

            def noise(rows: np.ndarray) -> NoisePenalty:
                assert gains is not None
                steps = None if propagated is None else (step[rows] for step in propagated)
                return reservoir.noise_penalty(gains[rows], steps)

            def rollout_skill(
                weights: np.ndarray, bias: np.ndarray, held_out: np.ndarray
            ) -> np.ndarray:
                """Per read-out in weights (C, n + d, d), bias (C, d): the mean valid steps (C,)
                of free runs from the ``held_out_starts`` of ``held_out``."""
                starts, truth = held_out_starts(held_out, row_trial, row_t, trials_z)
                horizon = truth.shape[1]  # >= 1: every design row has a next sample
                r = np.stack([trials_r[row_trial[s]][row_t[s]] for s in starts])
                z = np.stack([trials_z[row_trial[s]][row_t[s]] for s in starts])
                count = len(weights)
                runs = reservoir.rollout(
                    weights[:, None], bias[:, None],
                    np.broadcast_to(r, (count, *r.shape)), np.broadcast_to(z, (count, *z.shape)),
                    horizon,
                )  # (C, starts, horizon, d)
                return valid_steps(runs, truth, VPT_THRESHOLD).mean(axis=-1)

            def free_run(weights: np.ndarray, bias: np.ndarray, steps: int,
                         box: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
                """(steps, d): the closed loop continuing the longest trial."""
                return reservoir.rollout(weights, bias, trials_r[reference][-1],
                                         trials_z[reference][-1], steps, box)

            return Design(features, increments, rollout_skill, free_run,
                          noise=None if gains is None else noise, solver=solver)

        reference = longest(trials_z)
        budget = self.training_options.max_time_s
        deadline = None if budget is None else time.monotonic() + budget
        with np.errstate(all="ignore"):  # diverging candidate runs are scored, not reported
            choice, chosen, readout, scores = select_readout(
                candidates, design, params.ridge, trials_z[reference], rank_by=params.rank_by,
                out_of_time=None if deadline is None else lambda: time.monotonic() >= deadline,
                lmnt=params.lmnt)
        setting = choice.setting
        seeds = choice.seeds(base, params.members)
        self.reservoir_ = Reservoir.committee(params, setting, self.n_variables, seeds)
        self.smoothing_ = smoothing
        self.mean_, self.scale_ = scaling.mean, scaling.scale
        self.weights_, self.bias_ = readout.weights, readout.bias
        gated = len(candidates) > 1
        self.metrics_ = {
            "draw": choice.draw,
            "reservoir_seed": seeds[0],
            **({"members": params.members, "member_seeds": seeds} if params.members > 1 else {}),
            "spectral_radius": setting.spectral_radius,
            "leak": setting.leak,
            "input_scaling": setting.input_scaling,
            **({"candidates_ranked_by": params.rank_by,
                "gate_steps": gate_steps(len(trials_z[reference]), params.rank_by)} if gated else {}),
            **smoothing.metrics(),
            **setting_metrics(scores, ReservoirChoice.label),
            **readout.metrics(chosen.features, chosen.targets, scaling.scale),
        }
        if 0 < len(scores) < len(candidates):
            self.metrics_["stopped"] = "max_time"
            self.metrics_["candidates_scored"] = len(scores)
            self.training_options.progress.notice(
                f"--max-time {budget:g} s reached after {len(scores)} of {len(candidates)} "
                f"reservoir candidates: keeping the best of those ({choice.label()})")

    def _simulate(
        self, history: Trial, steps: int, future_inputs: np.ndarray | None
    ) -> np.ndarray:
        z = self._history_states(history)
        with threadpool_limits(1, user_api="blas"):  # one matrix-vector product per step
            r = self.reservoir_.run(z)[-1]
            run = self.reservoir_.rollout(self.weights_, self.bias_, r, z[-1], steps)
        return Standardiser(self.mean_, self.scale_).inverse(run)

    def step_map(self, history: Trial) -> StepMap:
        """The closed loop on its state s = [r, z] (n + d; z standardised, which leaves the
        exponents unchanged): z' = z + features(r, z) W + b (``Reservoir.readout_features``),
        then r' = reservoir step of (r, z'), with its analytic Jacobian."""
        self._check_fitted()
        reservoir, n = self.reservoir_, self.reservoir_.recurrent.shape[0]
        a = reservoir.leak
        identity_z = np.hstack([np.zeros((self.n_variables, n)), np.eye(self.n_variables)])

        def advance(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            features = reservoir.readout_features(s[:, :n], s[:, n:])
            z_next = s[:, n:] + features @ self.weights_ + self.bias_
            return z_next, reservoir.step(s[:, :n], z_next)

        def step(s: np.ndarray) -> np.ndarray:
            z_next, r_next = advance(s)
            return np.hstack([r_next, z_next])

        def jacobian(s: np.ndarray) -> np.ndarray:
            z_next, r_next = advance(s)
            # dz'/ds (K, d, n + d): the read-out's weights times d(features)/ds (diagonal).
            feature_gain = np.hstack([reservoir.readout_gain(s[:, :n]),
                                      np.ones((len(s), self.n_variables))])
            dz = identity_z + self.weights_.T[None] * feature_gain[:, None, :]
            drive = (r_next - (1.0 - a) * s[:, :n]) / a  # tanh(.) of each state, (K, n)
            gain = a * (1.0 - drive**2)[:, :, None]  # (K, n, 1)
            dr = gain * (np.hstack([reservoir.recurrent, np.zeros((n, self.n_variables))])
                         + reservoir.input @ dz)
            dr[:, :, :n] += (1.0 - a) * np.eye(n)
            return np.concatenate([dr, dz], axis=1)

        z = self._history_states(history)
        start = np.concatenate([reservoir.run(z)[-1], z[-1]])
        return StepMap(state=start, step=step, jacobian=jacobian)

    def arrays(self) -> dict[str, np.ndarray]:
        self._check_fitted()
        blocks = self.reservoir_.blocks()
        return {
            "recurrent": blocks[0] if len(blocks) == 1 else blocks,
            "input_weights": self.reservoir_.input,
            "reservoir_bias": self.reservoir_.bias,
            "mean": self.mean_,
            "scale": self.scale_,
            "weights": self.weights_,
            "bias": self.bias_,
            "leak": np.array([self.reservoir_.leak]),
            "squared_readout": np.array([float(self.reservoir_.squared)]),
            "smoothing": self.smoothing_.array(),
        }

    def _load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        params: ESNParams = self.params  # type: ignore[assignment]
        m, members, d = params.units, params.members, self.n_variables
        n = members * m
        blocks = expect_array(arrays, "recurrent", (m, m) if members == 1 else (members, m, m))
        self.reservoir_ = Reservoir.of_blocks(
            blocks.astype(float).reshape(members, m, m),
            input=expect_array(arrays, "input_weights", (n, d)).astype(float),
            bias=expect_array(arrays, "reservoir_bias", (n,)).astype(float),
            leak=_stored_leak(arrays, params),
            squared=_stored_squared_readout(arrays),
        )
        self.smoothing_ = stored_smoothing(arrays, d)
        self.mean_ = expect_array(arrays, "mean", (d,)).astype(float)
        self.scale_ = expect_array(arrays, "scale", (d,)).astype(float)
        self.weights_ = expect_array(arrays, "weights", (n + d, d)).astype(float)
        self.bias_ = expect_array(arrays, "bias", (d,)).astype(float)


def _check_rows(lengths: list[int], washout: int, need: int) -> None:
    """DataError, saying what to lower, unless the trials of ``lengths`` samples leave the
    read-out ``need`` training rows after a washout of ``washout`` samples."""
    rows = row_count(lengths, washout)
    if rows >= need:
        return
    shown = ", ".join(map(str, lengths[:5])) + (", ..." if len(lengths) > 5 else "")
    enough = next((w for w in range(washout - 1, 0, -1) if row_count(lengths, w) >= need), None)
    hint = (f"lower -p washout to at most {enough}" if enough is not None
            else f"the esn needs a trial of at least {need + 2} samples")
    raise DataError(
        f"-p washout={washout} leaves the read-out n - {washout + 1} training rows in a trial of "
        f"n samples (the samples after the washout that have a next one); the data's trials "
        f"({shown} samples) give {rows}, and the read-out needs at least {need}: {hint}")


def _stored_leak(arrays: dict[str, np.ndarray], params: ESNParams) -> float:
    """The leak rate of a model file; files written before the leak was chosen from data hold
    no ``leak`` array, and their hyperparameters give it."""
    if "leak" not in arrays and params.leak is not None:
        return float(params.leak)
    return float(expect_array(arrays, "leak", (1,))[0])


def _stored_squared_readout(arrays: dict[str, np.ndarray]) -> bool:
    """Whether the model file's read-out squares the even units; files written before the
    option hold no ``squared_readout`` array, and their read-out is linear in the states."""
    if "squared_readout" not in arrays:
        return False
    flag = float(expect_array(arrays, "squared_readout", (1,))[0])
    if flag not in (0.0, 1.0):
        raise DataError(f"model array 'squared_readout' holds {flag:g}, not 0 or 1")
    return flag == 1.0
