"""The backend protocol: the one place a new dynamics method plugs in.

A backend is a class with a ``name``, a frozen hyperparameter dataclass ``Params``, declared
``capabilities``, and four methods: ``_fit`` (learn from a Dataset), ``_simulate`` (roll forward
from a history window), ``arrays`` (all learned state as named numpy arrays) and ``_load_arrays``
(the inverse). Everything else - validation, model files, the CLI - is shared.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from dynid.data.dataset import Dataset, Trial
from dynid.errors import DataError, UsageError
from dynid.linear.moments import LaggedMoments
from dynid.params import Hyperparameters, param
from dynid.training import TrainingOptions

__all__ = [
    "Backend",
    "Capabilities",
    "Hyperparameters",
    "LatentStates",
    "PredictiveInterval",
    "StepMap",
    "expect_array",
    "param",
]


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do; the shared fit path enforces these."""

    uniform_steps: bool = True
    # Forecasts at any later times (``simulate_at``), so that it is scored on irregular samples.
    forecasts_at_times: bool = False
    inputs: bool = False
    nan: bool = False
    cuda: bool = False
    stochastic: bool = False
    # Trains a network through dynid.training (takes --max-time, --checkpoint, --resume, --threads).
    training: bool = False
    # Searches candidates in closed form and takes --max-time alone: once it is spent, the
    # best candidate scored so far is kept (read as ``training_options.max_time_s``).
    time_budget: bool = False
    # Discrete hidden states that rows of known state can fix (--labels; fit and states).
    labels: bool = False
    # The inputs are conditions, constant within each trial (fit, forecast and states refuse
    # inputs that vary within one); simulate without future inputs keeps the history's.
    conditions: bool = False


@dataclass(frozen=True)
class LatentStates:
    """Inferred hidden states of a Dataset, one row per sample (trials one after another).

    names: the k continuous state columns (``z_0`` ...; none for discrete-state models); t (N,)
    times; trial (N,) trial indices; means (N, k) smoothed means; sds (N, k) their standard
    deviations, None for deterministic models (no uncertainty to state). Discrete-state models
    add state (N,) the most likely state sequence (Viterbi) and probabilities (N, K) the
    smoothed state probabilities p(z_t = K | all of the trial); deterministic models with
    discrete regions (``alrnn``'s subregions) give state alone.
    """

    names: tuple[str, ...]
    t: np.ndarray
    trial: np.ndarray
    means: np.ndarray
    sds: np.ndarray | None
    state: np.ndarray | None = None
    probabilities: np.ndarray | None = None


@dataclass(frozen=True)
class PredictiveInterval:
    """A forecast with a central interval of probability ``level`` per step and variable:
    mean, lower, upper (steps, d)."""

    mean: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    level: float


@dataclass(frozen=True)
class StepMap:
    """A fitted model's map of its own state over ``stride`` samples of ``dt_``: what its
    Lyapunov exponents are exponents of (``dynid score --estimate-lyapunov``).

    state (D,): the state after the history the map was built from; step: states (n, D) ->
    (n, D) ``stride`` samples later; jacobian: states (n, D) -> (n, D, D) the derivative of
    ``step``, or None (finite differences are taken instead).
    """

    state: np.ndarray
    step: Callable[[np.ndarray], np.ndarray]
    jacobian: Callable[[np.ndarray], np.ndarray] | None = None
    stride: int = 1


# Samples per call of the default step map: each call runs ``simulate`` once per state, so the
# solver's start-up cost is shared by this many samples.
WINDOW_STRIDE = 10


class Backend(ABC):
    """A dynamics model: ``fit`` on a Dataset, ``simulate`` forward, export learned arrays.

    Fitted state lives in attributes ending in ``_``: ``variables_``, ``inputs_``, ``dt_`` (set
    by ``fit``), ``metrics_`` (in-sample fit metrics) plus the backend's own arrays.
    ``data_range_`` (2, d): each variable's smallest and largest value in the training data,
    which a forecast that has diverged leaves (``dynid.api.forecast``); None for models from
    files that do not record it.
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    Params: ClassVar[type[Hyperparameters]]
    capabilities: ClassVar[Capabilities] = Capabilities()
    # Arrays that model files of earlier versions lack and that load with the value those
    # versions implied; every other missing array is named in a DataError.
    legacy_arrays: ClassVar[frozenset[str]] = frozenset()
    data_range_: np.ndarray | None = None

    def __init__(self, params: Hyperparameters | None = None) -> None:
        self.params = params if params is not None else self.Params()
        if not isinstance(self.params, self.Params):
            raise TypeError(f"{self.name} expects {self.Params.__name__}")
        self.metrics_: dict[str, Any] = {}

    @classmethod
    def trains_network(cls, params: Hyperparameters) -> bool:
        """Whether a fit with ``params`` trains a network through dynid.training (and so takes
        --max-time, --checkpoint, --resume, --threads): ``capabilities.training``, unless the
        hyperparameters choose between a closed-form fit and a trained one (koopman's basis)."""
        return cls.capabilities.training

    @classmethod
    def check_inputs(cls, inputs: "tuple[str, ...] | list[str] | None") -> None:
        """UsageError (exit 2) when ``inputs`` are given to a backend that takes none: --inputs
        with such a --model is a wrong combination of options, whatever the data hold."""
        if inputs and not cls.capabilities.inputs:
            raise UsageError(f"the {cls.name} backend does not take inputs; drop --inputs")

    # -- public, shared --------------------------------------------------------------------
    def fit(
        self,
        data: Dataset,
        *,
        seed: int | None = None,
        device: str = "cpu",
        progress: Any = None,
        labels: list[np.ndarray] | None = None,
        training: TrainingOptions | None = None,
    ) -> Backend:
        """Learn from ``data``; returns self. Raises DataError if the data do not suit.

        labels: per trial (n_samples,) known discrete states, -1 where unknown (``--labels``),
        for backends with ``capabilities.labels`` (UsageError for others).
        training: ``--max-time``, checkpoints, ``--resume``, threads and the progress display,
        for backends that train a network (``capabilities.training``; they read it as
        ``self.training_options`` in ``_fit``).
        """
        caps = self.capabilities
        if labels is not None:
            check_labels(data, labels, self)
        if caps.uniform_steps and data.dt is None:
            raise DataError(
                f"{data.source}: the {self.name} backend needs uniform time steps but the sampling "
                "is irregular (or differs between trials); resample with --resample DT"
            )
        self.check_inputs(data.inputs)
        if not caps.nan:
            _refuse_missing_values(data, self.name)
        self.variables_ = tuple(data.variables)
        self.inputs_ = tuple(data.inputs)
        self.dt_ = data.dt if data.dt is not None else _median_step(data)
        self.data_range_ = data.value_range()
        self.training_options = training if training is not None else TrainingOptions()
        if labels is None:
            self._fit(data, seed=seed, device=device, progress=progress)
        else:
            self._fit_labelled(data, labels, seed=seed, device=device, progress=progress)
        return self

    # -- fits from running sums (files read in chunks) ---------------------------------------
    def moments(self, n_variables: int, n_inputs: int) -> LaggedMoments | None:
        """Empty running sums to add the data to, for a backend whose fit needs only them (then
        ``fit_moments`` fits from them); None: the fit needs every sample in memory."""
        return None

    def fit_moments(self, moments: LaggedMoments, *, variables: tuple[str, ...], inputs: tuple[str, ...],
                    dt: float | None, source: str, data_range: np.ndarray | None = None) -> Backend:
        """Learn from ``moments`` (from ``self.moments``, filled with the data ``source``,
        whose values span ``data_range`` (2, d), see ``data_range_``); returns self. Data checks
        as in ``fit``."""
        self.check_inputs(inputs)
        if self.capabilities.uniform_steps and dt is None:
            raise DataError(f"{source}: the {self.name} backend needs uniform time steps but the sampling "
                            "is irregular (or differs between trials)")
        self.variables_, self.inputs_, self.dt_ = tuple(variables), tuple(inputs), dt if dt is not None else 1.0
        self.data_range_ = data_range
        self._fit_moments(moments)
        return self

    def _fit_moments(self, moments: LaggedMoments) -> None:
        raise NotImplementedError(f"the {self.name} backend does not fit from running sums")

    def simulate(
        self, history: Trial, steps: int, future_inputs: np.ndarray | None = None
    ) -> np.ndarray:
        """Roll the model ``steps`` samples (of ``dt_``) past the end of ``history``.

        history: a Trial whose last ``history_length`` samples are the initial condition;
        future_inputs: (steps, m) inputs for the forecast when the model has inputs.
        Returns (steps, d) states.
        """
        self._check_history(history, steps, future_inputs)
        return self._simulate(history, steps, future_inputs)

    def simulate_at(
        self, history: Trial, times: np.ndarray, future_inputs: np.ndarray | None = None
    ) -> np.ndarray:
        """The forecast at ``times`` (steps,), increasing and after the end of ``history``, for
        backends with ``capabilities.forecasts_at_times`` (``simulate`` steps by ``dt_``).

        future_inputs: (steps, m) the inputs at ``times`` when the model has inputs.
        Returns (steps, d) states.
        """
        if not self.capabilities.forecasts_at_times:
            raise UsageError(f"the {self.name} model forecasts in steps of dt = {self.dt_:g} only")
        self._check_history(history, times.shape[0], future_inputs)
        if not np.all(np.diff(np.concatenate([history.t[-1:], times])) > 0):
            raise DataError("the forecast times must increase from the end of the history on")
        return self._simulate_at(history, times, future_inputs)

    def _simulate_at(
        self, history: Trial, times: np.ndarray, future_inputs: np.ndarray | None
    ) -> np.ndarray:
        raise NotImplementedError

    def one_step_predictions(self, trial: Trial, count: int) -> np.ndarray:
        """The one-step predictions (m, d) of the last ``m = min(count, n - history_length)``
        samples of ``trial``, each from the ``history_length`` samples before it (the report's
        residuals). This default makes one ``simulate`` call per sample; a backend whose call
        is costly (inference, particles) overrides it to predict them all at once."""
        need = self.history_length
        m = max(min(count, trial.n_samples - need), 0)
        rows = []
        for k in range(trial.n_samples - m, trial.n_samples):
            future = trial.u[k : k + 1] if self.inputs_ and trial.u is not None else None
            rows.append(np.asarray(self.simulate(trial.slice(k - need, k), 1, future), dtype=float).reshape(-1))
        return np.array(rows).reshape(m, self.n_variables)

    def _check_history(
        self, history: Trial, steps: int, future_inputs: np.ndarray | None
    ) -> None:
        """DataError unless ``history`` and ``future_inputs`` suit the fitted model."""
        self._check_fitted()
        if history.x.shape[1] != len(self.variables_):
            raise DataError(
                f"history has {history.x.shape[1]} variables, the model {len(self.variables_)}"
            )
        if history.n_samples < self.history_length:
            raise DataError(
                f"the {self.name} model needs at least {self.history_length} samples of history"
            )
        if self.inputs_:
            if history.u is None:
                raise DataError("the history lacks the model's input columns")
            if future_inputs is None and self.capabilities.conditions:
                return  # the forecast keeps the history's condition
            if future_inputs is None or future_inputs.shape != (steps, len(self.inputs_)):
                raise DataError(
                    f"the model takes inputs {', '.join(self.inputs_)}: give {steps} rows of "
                    "future inputs (--future-inputs FILE)"
                )

    @property
    def history_length(self) -> int:
        """How many trailing samples of history ``simulate`` needs."""
        return 1

    def is_fitted(self) -> bool:
        return hasattr(self, "variables_")

    @classmethod
    def restore(
        cls,
        params: Hyperparameters,
        arrays: dict[str, np.ndarray],
        *,
        variables: tuple[str, ...],
        inputs: tuple[str, ...],
        dt: float,
        metrics: dict[str, Any] | None = None,
        data_range: np.ndarray | None = None,
    ) -> Backend:
        """Rebuild a fitted model from stored arrays; DataError if any array is missing or off.
        data_range: ``data_range_`` as the model file records it (None: not recorded)."""
        model = cls(params)
        model.variables_ = tuple(variables)
        model.inputs_ = tuple(inputs)
        model.dt_ = float(dt)
        model.metrics_ = dict(metrics or {})
        model.data_range_ = data_range
        model._load_arrays(arrays)
        return model

    # -- to implement ------------------------------------------------------------------------
    @abstractmethod
    def _fit(self, data: Dataset, *, seed: int | None, device: str, progress: Any) -> None: ...

    @abstractmethod
    def _simulate(
        self, history: Trial, steps: int, future_inputs: np.ndarray | None
    ) -> np.ndarray: ...

    @abstractmethod
    def arrays(self) -> dict[str, np.ndarray]:
        """All learned state as named arrays (what a model file stores)."""

    @abstractmethod
    def _load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Set learned state from ``arrays``, checking names and shapes with ``expect_array``."""

    def _fit_labelled(
        self, data: Dataset, labels: list[np.ndarray], *, seed: int | None, device: str, progress: Any
    ) -> None:
        """``_fit`` with partially known discrete states; backends with ``capabilities.labels``."""
        raise NotImplementedError

    # -- optional, shown by info/report when present -------------------------------------------
    def equations(self) -> list[tuple[str, str]] | None:
        """(lhs, rhs) pairs of the identified equations, if the model has them."""
        return None

    def equation_lines(self, precision: int = 6) -> list[str] | None:
        """The equations as lines for people (``info``, reports), coefficients to ``precision``
        significant digits where the backend formats them; None without equations."""
        equations = self.equations()
        return [f"{lhs} = {rhs}" for lhs, rhs in equations] if equations else None

    def eigenvalues(self) -> np.ndarray | None:
        """Discrete-time eigenvalues of the linear(ised) dynamics, if the model has them."""
        return None

    def step_map(self, history: Trial) -> StepMap:
        """The model's state map, started after ``history`` (for Lyapunov exponents).

        This default takes the state to be the last ``history_length`` samples, flattened
        (D = history_length * d), and advances it ``WINDOW_STRIDE`` samples per step with
        ``simulate``, one state at a time; derivatives by finite differences. That is the
        state of models that forecast from a window of samples (equations, lagged regressions,
        delay embeddings); backends with a hidden state (reservoirs, recurrent networks)
        override it, with analytic Jacobians where they have them. UsageError for models
        with inputs (their exponents depend on the inputs).
        """
        self._check_fitted()
        if self.inputs_:
            raise UsageError(f"the {self.name} model takes inputs; Lyapunov exponents are "
                             "defined for autonomous models only")
        window, d = self.history_length, self.n_variables
        times = self.dt_ * np.arange(window)

        def step(states: np.ndarray) -> np.ndarray:
            out = np.empty_like(states)
            for i, flat in enumerate(states):
                x = flat.reshape(window, d)
                ahead = self.simulate(Trial(times, x), WINDOW_STRIDE)
                out[i] = np.concatenate([x, ahead])[-window:].reshape(-1)
            return out

        start = np.asarray(history.x[-window:], dtype=float).reshape(-1)
        return StepMap(state=start, step=step, stride=WINDOW_STRIDE)

    # -- optional, for models with hidden states or a predictive distribution ----------------
    def states(self, data: Dataset, labels: list[np.ndarray] | None = None) -> LatentStates:
        """The hidden states of ``data`` (``dynid states``); UsageError for models without.
        labels: as ``fit``'s, for backends with ``capabilities.labels``."""
        raise UsageError(
            f"the {self.name} model has no hidden states; fit a latent-state model (lds, ctlds, clds, hmm, arhmm, slds, gpsde, plrnn, alrnn)"
        )

    def predictive(
        self, history: Trial, steps: int, future_inputs: np.ndarray | None, level: float
    ) -> PredictiveInterval:
        """The forecast of ``simulate`` with a central ``level`` interval (``--interval``);
        UsageError for models without a predictive distribution."""
        raise UsageError(
            f"--interval: the {self.name} model has no predictive distribution; "
            "fit a stochastic model (lds, ctlds, clds, hmm, gpsde) or drop --interval"
        )

    def sample(
        self, history: Trial, steps: int, future_inputs: np.ndarray | None, seed: int | None
    ) -> np.ndarray:
        """One path (steps, d) drawn from the predictive distribution after ``history``
        (``--sample``), the same for the same ``seed``; UsageError for models without."""
        raise UsageError(
            f"--sample: the {self.name} model draws no sample paths; fit lds, ctlds or gpsde, or drop --sample"
        )

    # -- helpers -------------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not self.is_fitted():
            raise UsageError(f"the {self.name} model is not fitted; call fit first")

    @property
    def n_variables(self) -> int:
        return len(self.variables_)

    @property
    def n_inputs(self) -> int:
        return len(self.inputs_)


def expect_array(
    arrays: dict[str, np.ndarray], name: str, shape: tuple[int | None, ...]
) -> np.ndarray:
    """``arrays[name]`` checked against ``shape`` (None = any length); DataError otherwise."""
    if name not in arrays:
        raise DataError(f"model file lacks the array {name!r}")
    array = np.asarray(arrays[name])
    if array.ndim != len(shape) or any(
        want is not None and have != want for have, want in zip(array.shape, shape)
    ):
        raise DataError(f"model array {name!r} has shape {array.shape}, expected {shape}")
    return array


# Relative spread of an input within a trial still taken as one condition (capabilities.conditions).
CONDITION_RTOL = 1e-9


def trial_condition(trial: Trial, names: tuple[str, ...], model: str, source: str = "data") -> np.ndarray:
    """The condition (M,) of a trial for a backend whose inputs ``names`` are per-trial
    conditions (``Capabilities.conditions``): its input row, which must be complete and must
    not vary within the trial (DataError naming the column otherwise); (0,) without inputs."""
    if trial.u is None or trial.u.shape[1] == 0:
        return np.zeros(0)
    for k, name in enumerate(names):
        column = trial.u[:, k]
        if not np.isfinite(column).all():
            raise DataError(f"{source}: input {name!r} has missing values; the {model} model needs the "
                            "condition of every trial")
        if np.ptp(column) > CONDITION_RTOL * max(1.0, abs(float(column[0]))):
            raise DataError(
                f"{source}: input {name!r} varies within a trial; the {model} model takes its inputs "
                "as conditions, constant within each trial (one trial per condition: --trial-column)"
            )
    return np.array(trial.u[0], dtype=float)


def check_labels(data: Dataset, labels: list[np.ndarray], model: Backend) -> None:
    """UsageError unless ``model`` takes labels; ValueError unless there is one (n_samples,)
    integer array per trial of ``data``."""
    if not model.capabilities.labels:
        raise UsageError(f"--labels: the {model.name} model has no discrete states to fix; fit hmm, arhmm or slds")
    if len(labels) != data.n_trials or any(
        np.shape(known) != (trial.n_samples,) or not np.issubdtype(np.asarray(known).dtype, np.integer)
        for known, trial in zip(labels, data.trials)
    ):
        raise ValueError("labels: one integer array of n_samples per trial")


def _refuse_missing_values(data: Dataset, backend: str) -> None:
    """DataError naming the first column with a NaN: the backend cannot use missing values,
    and without this check they surface as an SVD or solver failure far from the cause."""
    names = data.variables + data.inputs
    for trial in data.trials:
        values = trial.x if trial.u is None else np.hstack([trial.x, trial.u])
        missing = np.isnan(values)
        if missing.any():
            column = names[int(np.argwhere(missing)[0][1])]
            raise DataError(
                f"{data.source}: column {column!r} has missing values, which the {backend} "
                "backend cannot use; choose --nan split, drop or interpolate"
            )


def _median_step(data: Dataset) -> float:
    steps = np.concatenate([np.diff(trial.t) for trial in data.trials if trial.n_samples > 1])
    if steps.size == 0:
        raise DataError(f"{data.source}: too few samples to estimate a time step")
    return float(np.median(steps))
