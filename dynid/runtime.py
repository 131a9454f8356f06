"""Run-time choices shared by commands: compute device, seeding, torch threads and the progress
objects that training, symbolic sweeps and causal methods report to. torch (and rich) are
imported lazily."""

from __future__ import annotations

import contextlib
import math
import os
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from dynid.errors import ResourceUnavailable, UsageError

DEVICES = ("auto", "cpu", "cuda", "cuda:N")
_CUDA_INDEX = re.compile(r"cuda:(\d+)")

# torch's intra-op threads for training. Measured on the 2-core development machine while other
# jobs kept it busy (load 11-16), medians of 3 runs each, 1 vs 2 threads: the cMLP of
# ``discover-causal --method neural`` on sample_data/var5.csv (-p lam=0.05 -p max_iter=60)
# 20.7 s vs 20.2 s (same weights bit for bit); a small MLP (10 -> 64 -> 10, Adam, 50 epochs of
# 2000 rows in minibatches of 200) 7.4 s vs 158 s. A second thread gains nothing on dynid's small
# networks and, when another process holds the other core, makes every op wait for it.
DEFAULT_TORCH_THREADS = 1


def available_cores() -> int:
    """The cores this process may run on (a SLURM or cgroup allocation, not the whole node)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def resolve_device(requested: str, name: str, supports_cuda: bool) -> str:
    """``auto``/``cpu``/``cuda``/``cuda:N`` -> the device method ``name`` will run on.

    ``cuda`` and ``cuda:N`` need a method that runs on CUDA (UsageError otherwise) and a
    visible GPU, for ``cuda:N`` GPU number N of those visible (ResourceUnavailable, exit 4,
    otherwise). ``auto`` picks CUDA only when both hold. Returns ``cpu``, ``cuda`` or ``cuda:N``.
    """
    index = _CUDA_INDEX.fullmatch(requested)
    if requested not in DEVICES[:3] and index is None:
        raise UsageError(f"--device {requested}: expected one of {', '.join(DEVICES)}")
    if requested == "cpu" or (requested == "auto" and not supports_cuda):
        return "cpu"
    if not supports_cuda:
        raise UsageError(f"--device {requested}: {name} runs on the CPU only")
    count = cuda_device_count()
    if requested == "auto":
        return "cuda" if count else "cpu"
    if not count:
        raise ResourceUnavailable(f"--device {requested}: no CUDA GPU is visible to torch")
    if index is not None and int(index.group(1)) >= count:
        raise ResourceUnavailable(
            f"--device {requested}: torch sees {count} GPU(s), numbered 0 to {count - 1}"
        )
    return requested


def cuda_available() -> bool:
    """True when torch is installed and sees a GPU; never imports torch if nothing needs it."""
    return cuda_device_count() > 0


def cuda_device_count() -> int:
    """The GPUs torch sees (0 without torch or CUDA)."""
    try:
        import torch
    except ImportError:
        return 0
    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def seed_everything(seed: int | None) -> None:
    """Seed numpy's legacy global state and, if it is already imported, torch."""
    if seed is None:
        return
    import numpy as np

    np.random.seed(seed % 2**32)
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(seed)


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[int]:
    """Run the block with torch's intra-op thread count at ``threads`` (None:
    ``DEFAULT_TORCH_THREADS``), restoring the previous count after; yields the count used."""
    import torch

    count = DEFAULT_TORCH_THREADS if threads is None else int(threads)
    if count < 1:
        raise UsageError(f"--threads {threads}: must be at least 1")
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield count
    finally:
        torch.set_num_threads(before)


# -- progress ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class EpochReport:
    """One epoch's numbers, as the training loop reports them.

    ``stage``: what is being trained (e.g. "lam 0.08"); ``epoch`` counts from 1 up to at most
    ``max_epochs``; losses in the strategy's units (``validation_loss`` None when there is no
    validation set); ``elapsed_s`` since the training call began; ``eta_s`` the seconds left at
    most (remaining epochs at the mean pace so far, capped by ``--max-time``).
    """

    stage: str
    epoch: int
    max_epochs: int
    loss: float
    validation_loss: float | None
    elapsed_s: float
    eta_s: float


@dataclass(frozen=True)
class StepReport:
    """Where a computation of counted steps stands (a symbolic sweep over equations, a causal
    test per target variable): ``stage`` what runs now (e.g. "x3: library poly3"), ``done``
    of ``total`` steps finished, ``elapsed_s`` since the computation began."""

    stage: str
    done: int
    total: int
    elapsed_s: float


Report = EpochReport | StepReport


class Progress(Protocol):
    """Where long computations report to: ``update`` after every epoch or step, ``notice`` for
    what the user must know (e.g. that ``--max-time`` stopped training), ``close`` once at the
    end."""

    def update(self, report: Report) -> None: ...

    def notice(self, message: str) -> None: ...

    def close(self) -> None: ...


class SilentProgress:
    """Reports nothing (``-q``, or a library call that asked for no progress)."""

    def update(self, report: Report) -> None:
        pass

    def notice(self, message: str) -> None:
        pass

    def close(self) -> None:
        pass


class LineProgress:
    """Notices on stderr; with ``interval_s`` also one line of progress (epoch or step) at most
    that often (``-v`` off a terminal). Without it, off a terminal, progress is not shown."""

    def __init__(self, interval_s: float | None = None) -> None:
        self.interval_s = interval_s
        self._last = -math.inf

    def update(self, report: Report) -> None:
        now = time.monotonic()
        if self.interval_s is None or now - self._last < self.interval_s:
            return
        self._last = now
        print(describe(report), file=sys.stderr, flush=True)

    def notice(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    def close(self) -> None:
        pass


class RichProgress:
    """A live line on a terminal's stderr (rich), notices printed above it."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.live import Live

        self._console = Console(stderr=True, highlight=False)
        self._live = Live("", console=self._console, transient=True, refresh_per_second=4)
        self._started = False

    def update(self, report: Report) -> None:
        if not self._started:
            self._live.start()
            self._started = True
        self._live.update(describe(report))

    def notice(self, message: str) -> None:
        self._console.print(message, markup=False)

    def close(self) -> None:
        if self._started:
            self._live.stop()
            self._started = False


def make_progress(*, quiet: bool, verbose: bool, terminal: bool) -> Progress:
    """The progress a command shows: a live line on a terminal; off one, notices only, plus a
    line every ``VERBOSE_INTERVAL_S`` with ``-v``; nothing at all with ``-q``."""
    if quiet:
        return SilentProgress()
    if terminal:
        return RichProgress()
    return LineProgress(VERBOSE_INTERVAL_S if verbose else None)


VERBOSE_INTERVAL_S = 5.0


class Steps:
    """Counts the steps of one computation and reports each to ``progress`` as a
    ``StepReport`` (the elapsed time measured from this object's creation)."""

    def __init__(self, progress: Progress, total: int) -> None:
        self.progress = progress
        self.total = total
        self.done = 0
        self._started = time.monotonic()

    def start(self, stage: str) -> None:
        """Say that ``stage`` runs now (the count unchanged)."""
        self.progress.update(StepReport(stage, self.done, self.total, time.monotonic() - self._started))

    def finish(self, stage: str) -> None:
        """Count one step done, ``stage`` having finished it."""
        self.done += 1
        self.start(stage)


def describe(report: Report) -> str:
    """One line for a report of either kind."""
    return describe_epoch(report) if isinstance(report, EpochReport) else describe_step(report)


def describe_step(report: StepReport) -> str:
    """One line: stage, steps done and, once one is, an estimate of the time left."""
    left = ""
    if 0 < report.done < report.total:
        left = f", ~{report.elapsed_s / report.done * (report.total - report.done):.0f} s left"
    return f"{report.stage}  {report.done}/{report.total}  {report.elapsed_s:.0f} s{left}"


def describe_epoch(report: EpochReport) -> str:
    """One line: stage, epoch, losses and ETA."""
    validation = "" if report.validation_loss is None else f"  val {report.validation_loss:.4g}"
    return (f"{report.stage}  epoch {report.epoch}/{report.max_epochs}  loss {report.loss:.4g}"
            f"{validation}  {report.elapsed_s:.0f} s, <= {report.eta_s:.0f} s left")
