"""The shared training loop (``dynid.training``): early stopping, ``--max-time``, checkpoints and
exact resume, named-array weights, the contiguous-block split, device parsing and progress."""

from __future__ import annotations

import time

import numpy as np
import pytest

from dynid.errors import DataError, ResourceUnavailable, UsageError
from dynid.runtime import (
    EpochReport,
    LineProgress,
    RichProgress,
    SilentProgress,
    make_progress,
    resolve_device,
    torch_threads,
)
from dynid.training import (
    TrainingConfig,
    TrainingOptions,
    TrainingSession,
    TrainingStep,
    arrays_to_module,
    block_split,
    module_to_arrays,
    train,
)

from conftest import Interrupt

torch = pytest.importorskip("torch")


class Descent:
    """One weight w (float64) descending ``(w - 2)^2`` by gradient steps from 0; the validation
    loss ``(w - 1)^2`` falls until w passes 1, then rises. ``seen`` records w after each epoch."""

    def __init__(self, rate: float = 0.1, pause_s: float = 0.0) -> None:
        self.w = torch.zeros(1, dtype=torch.float64)
        self.rate, self.pause_s = rate, pause_s
        self.seen: list[float] = []

    def train_step(self, epoch: int) -> TrainingStep:
        time.sleep(self.pause_s)
        self.w = self.w - self.rate * 2.0 * (self.w - 2.0)
        self.seen.append(float(self.w))
        return TrainingStep(float((self.w - 2.0) ** 2))

    def validation_loss(self) -> float:
        return float((self.w - 1.0) ** 2)

    def state_arrays(self) -> dict[str, np.ndarray]:
        return {"w": self.w.numpy().copy()}

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        self.w = torch.from_numpy(arrays["w"].copy())


class Minibatches:
    """A small tanh MLP (1 -> 8 -> 1) fitting sin on shuffled minibatches by momentum SGD, the
    order drawn from the session's torch generator: resuming must restore weights, velocities
    and the generator alike. No validation set."""

    def __init__(self, session: TrainingSession) -> None:
        generator = session.torch_generator
        self.generator = generator
        self.net = torch.nn.Sequential(torch.nn.Linear(1, 8), torch.nn.Tanh(),
                                       torch.nn.Linear(8, 1))
        with torch.no_grad():
            for p in self.net.parameters():
                p.copy_(torch.randn(p.shape, generator=generator) * 0.5)
        self.x = torch.linspace(-3, 3, 64).reshape(-1, 1)
        self.y = torch.sin(self.x)
        self.velocity = [torch.zeros_like(p) for p in self.net.parameters()]

    def train_step(self, epoch: int) -> TrainingStep:
        order = torch.randperm(64, generator=self.generator)
        total = 0.0
        for batch in order.reshape(4, 16):
            loss = (self.net(self.x[batch]) - self.y[batch]).pow(2).mean()
            grads = torch.autograd.grad(loss, list(self.net.parameters()))
            with torch.no_grad():
                for p, v, g in zip(self.net.parameters(), self.velocity, grads):
                    v.mul_(0.9).add_(g)
                    p.sub_(0.05 * v)
            total += float(loss.detach())
        return TrainingStep(total / 4)

    def validation_loss(self) -> None:
        return None

    def state_arrays(self) -> dict[str, np.ndarray]:
        arrays = module_to_arrays(self.net)
        arrays.update({f"velocity.{k}": v.numpy().copy() for k, v in enumerate(self.velocity)})
        return arrays

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        arrays_to_module(self.net, {k: v for k, v in arrays.items()
                                    if not k.startswith("velocity")})
        self.velocity = [torch.from_numpy(arrays[f"velocity.{k}"].copy())
                         for k in range(len(self.velocity))]


class Recorder:
    def __init__(self) -> None:
        self.reports: list[EpochReport] = []
        self.notices: list[str] = []

    def update(self, report: EpochReport) -> None:
        self.reports.append(report)

    def notice(self, message: str) -> None:
        self.notices.append(message)

    def close(self) -> None:
        pass


# -- early stopping and --max-time ---------------------------------------------------------------
def test_early_stopping_restores_the_best_weights():
    model = Descent()
    result = train(model, TrainingConfig(max_epochs=100, patience=5))
    seen = np.array(model.seen)
    best = int(np.argmin((seen - 1.0) ** 2))  # w passes 1 after a few steps, then moves away
    assert 0 < best < len(seen) - 1
    assert result.stopped == "patience" and result.epochs == best + 1 + 5
    assert result.best_epoch == best + 1
    assert float(model.w) == seen[best] and result.best_validation_loss == (seen[best] - 1) ** 2
    # Without patience it runs to max_epochs and still ends at the best weights.
    model = Descent()
    result = train(model, TrainingConfig(max_epochs=30))
    assert result.stopped == "max_epochs" and result.epochs == 30 and float(model.w) == seen[best]


def test_the_loss_history_is_recorded_and_thinned_for_the_fit_metrics():
    model = Descent()
    result = train(model, TrainingConfig(max_epochs=30))
    seen = np.array(model.seen)
    assert result.losses == tuple(((seen - 2.0) ** 2).tolist())
    assert result.validation_losses == tuple(((seen - 1.0) ** 2).tolist())
    curve = result.curve()
    assert curve["epoch"] == list(range(1, 31)) and curve["loss"] == list(result.losses)
    # Thinned: the first, the last and the best epoch stay, in order, about max_points in all.
    thin = result.curve(max_points=7)
    assert thin["epoch"][0] == 1 and thin["epoch"][-1] == 30 and result.best_epoch in thin["epoch"]
    assert thin["epoch"] == sorted(thin["epoch"]) and 7 <= len(thin["epoch"]) <= 8
    assert thin["validation_loss"] == [result.validation_losses[e - 1] for e in thin["epoch"]]
    # No validation: no validation curve.
    session = TrainingSession(seed=0)
    plain = train(Minibatches(session), TrainingConfig(max_epochs=3), session)
    assert set(plain.curve()) == {"epoch", "loss"} and plain.validation_losses == (None,) * 3


def test_max_time_stops_with_the_best_weights_and_says_so(capsys):
    recorder = Recorder()
    session = TrainingSession(TrainingOptions(max_time_s=0.5, progress=recorder))
    model = Descent(rate=0.02, pause_s=0.02)  # w passes 1 after 17 epochs (>= 0.34 s)
    result = train(model, TrainingConfig(max_epochs=10_000, patience=10_000), session)
    assert result.stopped == "max_time" and 0 < result.epochs < 10_000
    assert session.time_up and len(recorder.notices) == 1
    assert "--max-time 0.5 s" in recorder.notices[0] and "best weights" in recorder.notices[0]
    assert float(model.w) == model.seen[result.best_epoch - 1]
    assert recorder.reports[-1].epoch == result.epochs and recorder.reports[-1].eta_s <= 0.5
    # Later calls in the same session stop at once, without a second notice.
    again = train(Descent(), TrainingConfig(max_epochs=10), session)
    assert again.epochs == 0 and again.stopped == "max_time" and len(recorder.notices) == 1
    # The notice on stderr through the line progress a command uses off a terminal.
    session = TrainingSession(TrainingOptions(max_time_s=0.05, progress=LineProgress()))
    train(Descent(pause_s=0.02), TrainingConfig(max_epochs=1000), session)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("--max-time 0.05 s reached")


def test_max_time_spent_before_the_first_epoch_still_trains_one():
    """A deadline passed before training starts (setting up a large fit can take it all) stops
    the session after its first epoch, never with the initial weights; later calls in the
    session, and a resumed one, stop at once."""
    recorder = Recorder()
    session = TrainingSession(TrainingOptions(max_time_s=1e-9, progress=recorder))
    time.sleep(1e-3)
    model = Descent()
    result = train(model, TrainingConfig(max_epochs=10), session)
    assert result.epochs == 1 and result.stopped == "max_time" and len(model.seen) == 1
    assert float(model.w) == pytest.approx(0.4)  # one step from 0 towards 2 at rate 0.1
    assert "at epoch 1" in recorder.notices[0]
    again = train(Descent(), TrainingConfig(max_epochs=10), session)
    assert again.epochs == 0 and again.stopped == "max_time"


def test_divergence_is_a_computation_error():
    from dynid.errors import ComputationError

    with pytest.raises(ComputationError, match="diverged at epoch 1"):
        train(Descent(rate=np.inf), TrainingConfig(max_epochs=5))


# -- checkpoints and resume ----------------------------------------------------------------------
def test_resume_after_an_interruption_is_bit_identical(tmp_path):
    whole_session = TrainingSession(seed=3)
    whole = Minibatches(whole_session)
    train(whole, TrainingConfig(max_epochs=40), whole_session)

    options = TrainingOptions(checkpoint_dir=str(tmp_path), checkpoint_every_s=0.0)
    session = TrainingSession(options, seed=3)
    broken = Minibatches(session)
    step = broken.train_step

    def crash_at_25(epoch: int) -> TrainingStep:
        if epoch == 25:
            raise Interrupt
        return step(epoch)

    broken.train_step = crash_at_25  # type: ignore[method-assign]
    with pytest.raises(Interrupt):
        train(broken, TrainingConfig(max_epochs=40), session)
    # A new process: fresh objects from the same seed, then the checkpoint (epoch 24).
    resumed_session = TrainingSession(
        TrainingOptions(checkpoint_dir=str(tmp_path), resume=True), seed=3)
    resumed = Minibatches(resumed_session)
    result = train(resumed, TrainingConfig(max_epochs=40), resumed_session)
    assert result.resumed_from == 24 and result.epochs == 40
    for name, value in module_to_arrays(whole.net).items():
        assert np.array_equal(module_to_arrays(resumed.net)[name], value), name
    assert torch.equal(whole_session.torch_generator.get_state(),
                       resumed_session.torch_generator.get_state())
    # A finished call is restored, not rerun.
    again_session = TrainingSession(
        TrainingOptions(checkpoint_dir=str(tmp_path), resume=True), seed=3)
    again = Minibatches(again_session)
    result = train(again, TrainingConfig(max_epochs=40), again_session)
    assert result.resumed_from == 40 and result.stopped == "max_epochs"
    assert all(np.array_equal(a, b) for a, b in zip(module_to_arrays(again.net).values(),
                                                    module_to_arrays(whole.net).values()))


def test_a_checkpoint_of_another_start_is_not_resumed(tmp_path):
    options = TrainingOptions(checkpoint_dir=str(tmp_path))
    first = TrainingSession(options, seed=1)
    train(Minibatches(first), TrainingConfig(max_epochs=5), first)
    other = TrainingSession(TrainingOptions(checkpoint_dir=str(tmp_path), resume=True), seed=2)
    result = train(Minibatches(other), TrainingConfig(max_epochs=5), other)
    assert result.resumed_from is None and result.epochs == 5


def test_early_stopping_state_survives_a_resume(tmp_path):
    options = TrainingOptions(checkpoint_dir=str(tmp_path), checkpoint_every_s=0.0)
    model = Descent()
    model.train_step = _failing_after(model.train_step, 4)  # type: ignore[method-assign]
    with pytest.raises(Interrupt):
        train(model, TrainingConfig(max_epochs=100, patience=5), TrainingSession(options))
    resumed = Descent()
    session = TrainingSession(TrainingOptions(checkpoint_dir=str(tmp_path), resume=True))
    result = train(resumed, TrainingConfig(max_epochs=100, patience=5), session)
    reference = Descent()
    expected = train(reference, TrainingConfig(max_epochs=100, patience=5))
    assert result.resumed_from == 4
    assert (result.epochs, result.best_epoch, result.best_validation_loss) == (
        expected.epochs, expected.best_epoch, expected.best_validation_loss)
    assert result.losses == expected.losses  # the history before the interruption is kept
    assert float(resumed.w) == float(reference.w)


def _failing_after(step, epochs):  # type: ignore[no-untyped-def]
    def wrapped(epoch: int) -> TrainingStep:
        if epoch > epochs:
            raise Interrupt
        return step(epoch)

    return wrapped


def test_checkpoint_files_are_ours(tmp_path):
    (tmp_path / "training.npz").write_bytes(b"not a checkpoint")
    session = TrainingSession(TrainingOptions(checkpoint_dir=str(tmp_path), resume=True))
    with pytest.raises(DataError, match="training.npz"):
        train(Descent(), TrainingConfig(max_epochs=3), session)
    with pytest.raises(UsageError, match="--resume needs --checkpoint"):
        TrainingOptions(resume=True)
    for bad in ({"max_time_s": 0.0}, {"max_time_s": float("nan")}, {"threads": 0}):
        with pytest.raises(UsageError):
            TrainingOptions(**bad)


# -- weights as named arrays ---------------------------------------------------------------------
def test_named_arrays_round_trip_bit_identically():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.BatchNorm1d(5),
                              torch.nn.Linear(5, 2).double())
    net[1].running_mean.normal_()
    arrays = module_to_arrays(net)
    assert set(arrays) == set(net.state_dict())
    assert arrays["2.weight"].dtype == np.float64
    assert arrays["1.num_batches_tracked"].dtype == np.int64
    other = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.BatchNorm1d(5),
                                torch.nn.Linear(5, 2).double())
    arrays_to_module(other, arrays)
    for name, tensor in other.state_dict().items():
        original = net.state_dict()[name]
        assert torch.equal(tensor, original) and tensor.dtype == original.dtype
    # The arrays are copies: changing the network leaves them alone.
    with torch.no_grad():
        net[0].weight.add_(1.0)
    assert not np.array_equal(arrays["0.weight"], module_to_arrays(net)["0.weight"])


def test_named_arrays_are_checked():
    net = torch.nn.Linear(3, 2)
    arrays = module_to_arrays(net)
    with pytest.raises(DataError, match="missing \\['bias'\\]"):
        arrays_to_module(net, {"weight": arrays["weight"]})
    with pytest.raises(DataError, match="unexpected \\['extra'\\]"):
        arrays_to_module(net, {**arrays, "extra": arrays["bias"]})
    with pytest.raises(DataError, match="'weight' is float32\\[2, 2\\]"):
        arrays_to_module(net, {**arrays, "weight": arrays["weight"][:, :2]})
    with pytest.raises(DataError, match="'bias' is float64"):
        arrays_to_module(net, {**arrays, "bias": arrays["bias"].astype(np.float64)})


# -- split, threads, devices, progress -----------------------------------------------------------
def test_block_split_holds_out_the_end_of_every_trial():
    a, b = np.arange(10.0)[:, None], np.arange(3.0)[:, None]
    head, tail = block_split([a, b], 0.2, context=2)
    # a: the last 2 samples held out, its validation part starting 2 earlier; b: cut at 2, too
    # short a fit part for 2 lags of context, so it only validates.
    assert [h[:, 0].tolist() for h in head] == [list(range(8))]
    assert [t[:, 0].tolist() for t in tail] == [[6, 7, 8, 9], [0, 1, 2]]
    with pytest.raises(ValueError):
        block_split([a], 1.0)


def test_torch_threads_are_set_and_restored():
    before = torch.get_num_threads()
    with torch_threads(None) as count:
        assert count == 1 and torch.get_num_threads() == 1
    with torch_threads(2):
        assert torch.get_num_threads() == 2
    assert torch.get_num_threads() == before


def test_device_parsing(monkeypatch):
    import dynid.runtime as runtime

    monkeypatch.setattr(runtime, "cuda_device_count", lambda: 0)
    assert resolve_device("auto", "m", True) == "cpu" and resolve_device("cpu", "m", True) == "cpu"
    for request in ("cuda", "cuda:0"):
        with pytest.raises(ResourceUnavailable, match="no CUDA GPU"):
            resolve_device(request, "m", True)
    monkeypatch.setattr(runtime, "cuda_device_count", lambda: 2)
    assert resolve_device("auto", "m", True) == "cuda"
    assert resolve_device("cuda:1", "m", True) == "cuda:1"
    with pytest.raises(ResourceUnavailable, match="numbered 0 to 1"):
        resolve_device("cuda:2", "m", True)
    with pytest.raises(UsageError, match="CPU only"):
        resolve_device("cuda:0", "m", False)
    for bad in ("gpu", "cuda:", "cuda:-1", "cuda:x", "CUDA"):
        with pytest.raises(UsageError, match="expected one of"):
            resolve_device(bad, "m", True)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only case")
def test_cuda_index_without_a_gpu_is_unavailable():
    with pytest.raises(ResourceUnavailable):
        resolve_device("cuda:0", "m", True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_training_on_cuda_round_trips_weights():
    device = resolve_device(f"cuda:{torch.cuda.device_count() - 1}", "m", True)
    net = torch.nn.Linear(3, 2).to(device)
    arrays = module_to_arrays(net)
    other = torch.nn.Linear(3, 2).to(device)
    arrays_to_module(other, arrays)
    assert other.weight.device == net.weight.device and torch.equal(other.weight, net.weight)


def test_progress_is_silent_when_quiet_or_off_a_terminal(capsys):
    assert isinstance(make_progress(quiet=True, verbose=True, terminal=True), SilentProgress)
    assert isinstance(make_progress(quiet=False, verbose=False, terminal=True), RichProgress)
    for verbose in (False, True):
        progress = make_progress(quiet=False, verbose=verbose, terminal=False)
        session = TrainingSession(TrainingOptions(progress=progress))
        train(Descent(), TrainingConfig(max_epochs=5), session)
        err = capsys.readouterr().err
        # Off a terminal: no epoch lines, except one every few seconds with -v (the first).
        assert err.count("epoch") == (1 if verbose else 0)
    train(Descent(), TrainingConfig(max_epochs=5),
          TrainingSession(TrainingOptions(max_time_s=1e-9, progress=SilentProgress())))
    assert capsys.readouterr() == ("", "")
