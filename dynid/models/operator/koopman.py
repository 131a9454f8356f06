"""Koopman operator by extended DMD (Williams, Kevrekidis & Rowley 2015) on a dictionary.

The states are lifted to features psi(x) (``dynid.models.operator.dictionaries``), and a linear
one-step operator K with psi(x_{k+1}) ~ K psi(x_k) is fitted by exact DMD on the lifted snapshot
pairs (within each trial), truncated by the SVD rank that ``dmd`` uses (Gavish-Donoho optimal hard
threshold when the dropped singular values look like noise, else all nonzero ones). The states
are columns of every dictionary, so a linear read-out C gives x = C psi exactly; forecasts roll
K on the lifted state and read the states out.

When the dictionary spans a Koopman-invariant subspace (e.g. polynomials of degree 2 for
x' = mu x, y' = lambda (y - x^2), linear in (x, y, x^2)), the eigenvalues of that subspace are
recovered exactly from noise-free data. Kernel EDMD (Williams, Rowley & Kevrekidis 2015) is
EDMD on Nystrom coordinates of a Gaussian kernel.

Two bases are learned by networks trained through the shared loop (seeded, ``--max-time``,
checkpoints and ``--resume``): ``learned``, low-rank singular functions of the Koopman operator by
the nested LoRA objective (``singular_functions``; METHODS.md section 4), whose CCA step gives the
operator on the aligned basis, and ``autoencoder``, an encoder, a linear K and a decoder
(``autoencoder``). Their eigenvalues are stored exactly as the dictionaries' are.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from dynid.data.dataset import Dataset, Trial
from dynid.errors import DataError
from dynid.linear.dmd import exact_dmd
from dynid.linear.dynamics import sort_by_modulus
from dynid.metrics.forecast import one_step_metrics
from dynid.models.base import Backend, Capabilities, Hyperparameters, expect_array, param
from dynid.models.operator.dictionaries import (
    DelayDictionary,
    Dictionary,
    NystromDictionary,
    PolynomialDictionary,
    RBFDictionary,
)
from dynid.training import TRAINING_CURVE, TrainingResult, block_split

if TYPE_CHECKING:
    import torch

    from dynid.models.operator.autoencoder import KoopmanAutoencoder
    from dynid.models.operator.singular_functions import LearnedLift

BasisName = Literal["poly", "rbf", "delay", "kernel", "learned", "autoencoder"]
# Bases learned by a network (trained through dynid.training) rather than fixed.
TRAINED_BASES = ("learned", "autoencoder")
# Model-file prefix of the learned networks' weights.
_NETWORK = "net."


@dataclass(frozen=True)
class KoopmanParams(Hyperparameters):
    basis: BasisName = param(
        "poly",
        "dictionary: poly (monomials up to degree; the default), rbf (Gaussians at k-means++ "
        "centres, median-distance width), delay (the last `delays` states) or kernel (kernel "
        "EDMD, Gaussian kernel in Nystrom coordinates); every one contains 1 and the states. "
        "Learned by networks (trained; take --max-time, --checkpoint, --resume): learned (1, "
        "the states and `features` singular functions of the Koopman operator by the nested "
        "LoRA objective; meant for stochastic dynamics) or autoencoder (encoder to `latent` "
        "coordinates, linear K, decoder)",
    )
    degree: int = param(2, "poly: highest total degree of the monomials")
    centers: int = param(20, "rbf: number of Gaussian centres")
    delays: int = param(4, "delay: number of consecutive states in the lifted state")
    landmarks: int = param(
        300,
        "kernel: Nystrom landmarks, a seeded subsample of the states; with at least as many "
        "as distinct states, every state is one and this is exact kernel EDMD",
    )
    rank: int | None = param(
        None,
        "poly, rbf, delay, kernel: SVD truncation rank of the lifted snapshots; none = "
        "Gavish-Donoho optimal hard threshold where the dropped singular values look like "
        "noise, else all nonzero ones",
    )
    features: int = param(8, "learned: singular functions learned besides 1 and the states")
    latent: int = param(4, "autoencoder: latent coordinates (eigenvalues of K)")
    horizon: int = param(10, "autoencoder: steps of the latent rollout in the training loss")
    reencode: int = param(
        0, "autoencoder: forecasts re-encode the decoded state every this many steps (0: "
        "never; each re-encoding adds the autoencoder's reconstruction error, so it pays only "
        "where the latent rollout drifts off the encoder's image)")
    width: int = param(64, "learned, autoencoder: hidden units per layer of each network")
    depth: int = param(2, "learned, autoencoder: hidden layers of each network")
    epochs: int = param(300, "learned, autoencoder: most training epochs")
    lr: float = param(3e-3, "learned, autoencoder: Adam learning rate")
    batch: int = param(128, "learned, autoencoder: snapshot pairs or windows per Adam step")
    patience: int = param(30, "learned, autoencoder: epochs without a lower validation loss "
                              "before stopping")
    validation: float = param(0.2, "learned, autoencoder: fraction of every trial's end held "
                                   "out for early stopping (0: none, train all epochs)")

    def __post_init__(self) -> None:
        for name in ("degree", "centers", "delays", "landmarks", "features", "latent",
                     "horizon", "width", "depth", "epochs", "batch", "patience"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, not {getattr(self, name)}")
        if self.rank is not None and self.rank < 1:
            raise ValueError(f"rank must be a positive integer or none, not {self.rank}")
        if self.reencode < 0:
            raise ValueError(f"reencode must be 0 or a positive integer, not {self.reencode}")
        if not self.lr > 0:
            raise ValueError(f"lr must be positive, not {self.lr}")
        if not 0 <= self.validation < 1:
            raise ValueError(f"validation must lie in [0, 1), not {self.validation}")


class Koopman(Backend):
    """Koopman operator on a dictionary of observables (EDMD) or on a learned basis.

    Fitted arrays (d variables, F features, r = rank kept): ``center``, ``scale`` (d,) the
    standardisation z = (x - center) / scale the basis works on; ``operator`` (F, F) K, one
    step of dt on the lifted state; ``readout`` (d, F) C with x = C psi; ``eigenvalues`` (r,)
    complex discrete-time (per step), by decreasing modulus; ``continuous_eigenvalues`` (r,) =
    log(eigenvalues) / dt (per time unit, as ``dmd``'s); ``timescales`` (r,) = -1 / their real
    parts (time units; negative for growing modes); ``modes`` (d, r) complex Koopman modes of
    the states (C times the eigenvectors of K, unit norm); dictionary arrays: ``exponents``
    (F, d) for poly, ``rbf_centers`` (c, d) and ``rbf_width`` (1,) for rbf, ``kernel_landmarks``
    (m, d), ``kernel_width`` (1,) and ``kernel_projection`` (m, p) for kernel.

    learned: psi = phi(z) = A_f f(z), the r aligned singular functions (``align_f`` (r, 1 + d +
    features), ``singular_values`` (r,)); K the CCA estimate on them; C the least-squares
    read-out of the states from phi (exact: 1 and z are in f's span). autoencoder: psi = the
    ``latent`` coordinates, K the trained linear layer, forecasts decoded by the decoder (C, the
    least-squares linear read-out of the states from the latents, serves only the modes). Both
    store the networks' weights under ``net.`` + their torch names (float64).
    """

    name = "koopman"
    summary = ("Koopman operator by (kernel) EDMD on a dictionary, or on learned singular "
               "functions or an autoencoder's latents: eigenvalues, modes")
    Params = KoopmanParams
    # Not ``training``: the default basis is closed-form (``--model auto`` tries it); the
    # trained bases say so through ``trains_network``.
    capabilities = Capabilities(uniform_steps=True)

    @classmethod
    def trains_network(cls, params: Hyperparameters) -> bool:
        return getattr(params, "basis", None) in TRAINED_BASES

    # -- fitting -----------------------------------------------------------------------------
    def _fit(self, data: Dataset, *, seed: int | None, device: str, progress: Any) -> None:
        params: KoopmanParams = self.params  # type: ignore[assignment]
        stacked = np.vstack([trial.x for trial in data.trials])
        self.center_ = stacked.mean(axis=0)
        spread = stacked.std(axis=0)
        self.scale_ = np.where(spread > 0, spread, 1.0)
        if params.basis == "autoencoder":
            self._fit_autoencoder(data, seed)
            return
        if params.basis == "learned":
            self._fit_singular_functions(data, seed)
            return
        d = data.n_variables
        if params.basis == "poly":
            self.dictionary_: Dictionary | LearnedLift = PolynomialDictionary.of_degree(
                d, params.degree)
        elif params.basis == "rbf":
            self.dictionary_ = RBFDictionary.from_states(
                self._standardise(stacked), params.centers, seed
            )
        elif params.basis == "kernel":
            self.dictionary_ = NystromDictionary.from_states(
                self._standardise(stacked), params.landmarks, seed
            )
        else:
            self.dictionary_ = DelayDictionary(params.delays)
        now, later, x_later = self._snapshot_pairs(data)
        operators, rank = exact_dmd(now.T, later.T, params.rank)
        self.operator_ = operators.a
        n_features = now.shape[1]
        self.readout_ = np.zeros((d, n_features))
        self.readout_[:, 0] = self.center_
        self.readout_[:, 1 : d + 1] = np.diag(self.scale_)
        self._set_spectrum(operators.reduced, operators.lift)
        self.metrics_ = {"rank": rank, "n_features": n_features, "n_pairs": now.shape[0]}
        self.metrics_.update(one_step_metrics(x_later, now @ self.operator_.T @ self.readout_.T))

    def _fit_singular_functions(self, data: Dataset, seed: int | None) -> None:
        """The learned basis: train f, g by the nested LoRA loss, then the CCA step over every
        snapshot pair; C by least squares of the states on phi."""
        import torch

        from dynid.models.operator.singular_functions import (
            LearnedLift,
            SingularFunctionPair,
            cca_estimate,
        )

        params: KoopmanParams = self.params  # type: ignore[assignment]
        network, result = self._train(
            lambda: SingularFunctionPair(data.n_variables, params.features, params.width,
                                         params.depth),
            lambda module: module.nested_lora_loss, 1, data, seed)
        pairs = torch.as_tensor(self._windows(data, 1))
        with torch.no_grad():
            now, later = pairs[:, 0], pairs[:, 1]
            features = [network.features(net, z).numpy()
                        for net, z in ((network.f, now), (network.g, later), (network.f, later))]
        estimate = cca_estimate(*features)
        self.singular_values_ = estimate.singular_values
        self.dictionary_ = LearnedLift(network, estimate.align_f)
        self.operator_ = np.ascontiguousarray(estimate.operator.T)
        phi = self.dictionary_.lift(now.numpy())
        x_now = now.numpy() * self.scale_ + self.center_
        self.readout_ = _least_squares_readout(phi, x_now)
        r = phi.shape[1]
        self._set_spectrum(self.operator_, np.eye(r))
        self._training_metrics(result, {"rank": r, "n_features": features[0].shape[1],
                                        "singular_values": estimate.singular_values.tolist()},
                               later.numpy() * self.scale_ + self.center_,
                               phi @ self.operator_.T @ self.readout_.T)

    def _fit_autoencoder(self, data: Dataset, seed: int | None) -> None:
        """The autoencoder basis: train it on windows of ``horizon`` + 1 states; C by least
        squares of the states on the latents (for the modes)."""
        import torch

        from dynid.models.operator.autoencoder import KoopmanAutoencoder

        params: KoopmanParams = self.params  # type: ignore[assignment]
        network, result = self._train(
            lambda: KoopmanAutoencoder(data.n_variables, params.latent, params.width,
                                       params.depth),
            lambda module: module.loss, params.horizon, data, seed)
        self.autoencoder_ = network
        self.operator_ = network.operator.weight.detach().numpy().copy()
        pairs = self._windows(data, 1)
        latents = network.encode(pairs[:, 0])
        centred = latents - latents.mean(axis=0)
        self.readout_ = _least_squares_readout(centred, pairs[:, 0] * self.scale_)
        self._set_spectrum(self.operator_, np.eye(params.latent))
        with torch.no_grad():
            decoded = network.decoder(network.operator(torch.as_tensor(latents))).numpy()
        self._training_metrics(result, {"rank": params.latent},
                               pairs[:, 1] * self.scale_ + self.center_,
                               decoded * self.scale_ + self.center_)

    def _train(self, build: Callable[[], torch.nn.Module],
               loss_of: Callable[[Any], Callable[[torch.Tensor], torch.Tensor]], horizon: int,
               data: Dataset, seed: int | None) -> tuple[Any, TrainingResult]:
        """A network from ``build`` (seeded) trained by Adam on ``loss_of(network)`` over
        windows (B, horizon + 1, d) of standardised states, early-stopped on windows of every
        trial's held-out end; returns it (best weights) and the loop's result."""
        import torch

        from dynid.models.operator.networks import windows
        from dynid.runtime import torch_threads
        from dynid.training import TrainingConfig, TrainingSession, train
        from dynid.training.minibatch import MinibatchAdam
        from dynid.training.networks import seeded

        params: KoopmanParams = self.params  # type: ignore[assignment]
        trials = [self._standardise(trial.x) for trial in data.trials]
        head, tail = (block_split(trials, params.validation, context=horizon)
                      if params.validation else (trials, []))
        fit_rows = windows(head, horizon) if head else np.empty((0,))
        if fit_rows.shape[0] == 0:
            raise DataError(f"{data.source}: the koopman {params.basis} basis needs a trial of "
                            f"more than {horizon + 1} samples after holding out -p validation")
        held_out = windows(tail, horizon) if tail else np.empty((0,))
        session = TrainingSession(self.training_options, 0 if seed is None else seed)
        with torch_threads(self.training_options.threads):
            network = seeded(build, session.seed)
            strategy = MinibatchAdam(
                network, loss_of(network), torch.as_tensor(fit_rows),
                torch.as_tensor(held_out) if held_out.shape[0] else None,
                lr=params.lr, batch=params.batch, session=session)
            result = train(strategy, TrainingConfig(
                max_epochs=params.epochs,
                patience=params.patience if held_out.shape[0] else None,
                name=f"koopman-{params.basis}", stage=f"koopman ({params.basis})"), session)
        return network, result

    def _windows(self, data: Dataset, horizon: int) -> np.ndarray:
        """Windows (N, horizon + 1, d) of standardised states of every trial."""
        from dynid.models.operator.networks import windows

        return windows([self._standardise(trial.x) for trial in data.trials], horizon)

    def _training_metrics(self, result: TrainingResult, extra: dict[str, Any],
                          x_later: np.ndarray, predictions: np.ndarray) -> None:
        self.metrics_ = {"epochs": result.epochs, "stopped": result.stopped,
                         "best_validation_loss": result.best_validation_loss,
                         "resumed_from": result.resumed_from, "n_pairs": x_later.shape[0],
                         **extra, TRAINING_CURVE: result.curve()}
        self.metrics_.update(one_step_metrics(x_later, predictions))

    def _snapshot_pairs(self, data: Dataset) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Lifted states at k and k+1 (N, F) over all trials, and the states at k+1 (N, d)."""
        window = self.dictionary_.window
        now, later, x_later = [], [], []
        for trial in data.trials:
            if trial.n_samples <= window:
                continue
            lifted = self.dictionary_.lift(self._standardise(trial.x))
            now.append(lifted[:-1])
            later.append(lifted[1:])
            x_later.append(trial.x[window:])
        if not now:
            raise DataError(
                f"{data.source}: the koopman model needs a trial of more than {window} samples"
            )
        return np.vstack(now), np.vstack(later), np.vstack(x_later)

    def _standardise(self, x: np.ndarray) -> np.ndarray:
        return (x - self.center_) / self.scale_

    def _set_spectrum(self, reduced: np.ndarray, lift: np.ndarray) -> None:
        """Eigenvalues of K from its (r, r) reduced operator; the modes are the state read-out of
        K's eigenvectors ``lift @ w``, so x_k = sum_j b_j lambda_j^k modes_j."""
        values, vectors = np.linalg.eig(reduced)
        order = sort_by_modulus(values)
        modes = self.readout_ @ (lift @ vectors[:, order])
        norms = np.linalg.norm(modes, axis=0)
        self.eigenvalues_ = values[order].astype(complex)
        self.modes_ = (modes / np.where(norms > 0, norms, 1.0)).astype(complex)
        with np.errstate(divide="ignore"):
            self.continuous_eigenvalues_ = np.log(self.eigenvalues_) / self.dt_

    # -- simulation --------------------------------------------------------------------------
    @property
    def history_length(self) -> int:
        return self.dictionary_.window if hasattr(self, "dictionary_") else 1

    def _simulate(
        self, history: Trial, steps: int, future_inputs: np.ndarray | None
    ) -> np.ndarray:
        """psi_{k+1} = K psi_k from the lifted last history window; x = C psi (the
        autoencoder decodes psi instead, re-encoding every ``reencode`` steps)."""
        if hasattr(self, "autoencoder_"):
            params: KoopmanParams = self.params  # type: ignore[assignment]
            z = self.autoencoder_.rollout(self._standardise(history.x[-1]), steps,
                                          params.reencode)
            return z * self.scale_ + self.center_
        window = self.dictionary_.window
        psi = self.dictionary_.lift(self._standardise(history.x[-window:]))[-1]
        operator = np.ascontiguousarray(self.operator_)
        out = np.empty((steps, self.n_variables))
        for j in range(steps):
            psi = operator @ psi
            out[j] = self.readout_ @ psi
        return out

    # -- arrays ------------------------------------------------------------------------------
    def arrays(self) -> dict[str, np.ndarray]:
        from dynid.training import module_to_arrays

        self._check_fitted()
        lam = self.continuous_eigenvalues_
        with np.errstate(divide="ignore"):
            timescales = -1.0 / lam.real
        arrays = {
            "center": self.center_,
            "scale": self.scale_,
            "operator": self.operator_,
            "readout": self.readout_,
            "eigenvalues": self.eigenvalues_,
            "continuous_eigenvalues": lam,
            "timescales": timescales,
            "modes": self.modes_,
        }
        network = self._network()
        if network is not None:
            arrays.update({_NETWORK + k: v for k, v in module_to_arrays(network).items()})
        dictionary = getattr(self, "dictionary_", None)
        if isinstance(dictionary, PolynomialDictionary):
            arrays["exponents"] = dictionary.exponents
        elif isinstance(dictionary, RBFDictionary):
            arrays["rbf_centers"] = dictionary.centers
            arrays["rbf_width"] = np.array([dictionary.width])
        elif isinstance(dictionary, NystromDictionary):
            arrays["kernel_landmarks"] = dictionary.landmarks
            arrays["kernel_width"] = np.array([dictionary.width])
            arrays["kernel_projection"] = dictionary.projection
        elif self.params.basis == "learned":  # type: ignore[attr-defined]
            arrays["align_f"] = dictionary.align_f  # type: ignore[union-attr]
            arrays["singular_values"] = self.singular_values_
        return arrays

    def _network(self) -> torch.nn.Module | None:
        """The trained network of a learned basis; None for a dictionary."""
        if hasattr(self, "autoencoder_"):
            return self.autoencoder_
        return getattr(getattr(self, "dictionary_", None), "network", None)

    def _load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        params: KoopmanParams = self.params  # type: ignore[assignment]
        d = self.n_variables
        self.center_ = expect_array(arrays, "center", (d,)).astype(float)
        self.scale_ = expect_array(arrays, "scale", (d,)).astype(float)
        if params.basis == "poly":
            exponents = expect_array(arrays, "exponents", (None, d)).astype(np.int64)
            self.dictionary_ = PolynomialDictionary(exponents)
        elif params.basis == "rbf":
            centers = expect_array(arrays, "rbf_centers", (params.centers, d)).astype(float)
            width = float(expect_array(arrays, "rbf_width", (1,))[0])
            self.dictionary_ = RBFDictionary(centers, width)
        elif params.basis == "kernel":
            landmarks = expect_array(arrays, "kernel_landmarks", (None, d)).astype(float)
            width = float(expect_array(arrays, "kernel_width", (1,))[0])
            projection = expect_array(
                arrays, "kernel_projection", (landmarks.shape[0], None)
            ).astype(float)
            self.dictionary_ = NystromDictionary(landmarks, width, projection)
        elif params.basis == "delay":
            self.dictionary_ = DelayDictionary(params.delays)
        else:
            self._load_network(arrays)
        self.operator_ = expect_array(arrays, "operator", (None, None)).astype(float)
        n_features = self.operator_.shape[0]
        self.readout_ = expect_array(arrays, "readout", (d, n_features)).astype(float)
        self.eigenvalues_ = expect_array(arrays, "eigenvalues", (None,)).astype(complex)
        r = self.eigenvalues_.shape[0]
        self.continuous_eigenvalues_ = expect_array(
            arrays, "continuous_eigenvalues", (r,)
        ).astype(complex)
        self.modes_ = expect_array(arrays, "modes", (d, r)).astype(complex)
        expect_array(arrays, "timescales", (r,))

    def _load_network(self, arrays: dict[str, np.ndarray]) -> None:
        """Rebuild the learned basis's network (and, for ``learned``, its alignment)."""
        from dynid.training import arrays_to_module, module_to_arrays

        params: KoopmanParams = self.params  # type: ignore[assignment]
        d = self.n_variables
        network: torch.nn.Module
        if params.basis == "autoencoder":
            from dynid.models.operator.autoencoder import KoopmanAutoencoder

            network = self.autoencoder_ = KoopmanAutoencoder(d, params.latent, params.width,
                                                             params.depth)
        else:
            from dynid.models.operator.singular_functions import (
                LearnedLift,
                SingularFunctionPair,
            )

            network = SingularFunctionPair(d, params.features, params.width, params.depth)
            align = expect_array(arrays, "align_f", (None, 1 + d + params.features))
            self.dictionary_ = LearnedLift(network, align.astype(float))
            self.singular_values_ = expect_array(
                arrays, "singular_values", (align.shape[0],)).astype(float)
        for name, like in module_to_arrays(network).items():
            expect_array(arrays, _NETWORK + name, like.shape)
        arrays_to_module(network, {k[len(_NETWORK):]: v for k, v in arrays.items()
                                   if k.startswith(_NETWORK)})

    def eigenvalues(self) -> np.ndarray | None:
        """The discrete-time (per step) Koopman eigenvalues, (r,) complex."""
        self._check_fitted()
        return self.eigenvalues_


def _least_squares_readout(features: np.ndarray, x: np.ndarray) -> np.ndarray:
    """C (d, F) minimising |features C^T - x|^2 over rows (N, F) and (N, d); C order, as a
    model file restores it, so a restored model forecasts bit-identically."""
    return np.ascontiguousarray(np.linalg.lstsq(features, x, rcond=None)[0].T)
