"""Shared fixtures: the CLI run in process (``cli``) or in a real subprocess (``cli_subprocess``),
and small data files built from the catalogued systems."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest


@dataclass
class CliResult:
    """What a CLI run left behind: the fields of ``subprocess.CompletedProcess`` tests read."""

    args: list[str]
    returncode: int
    stdout: bytes
    stderr: bytes


def run_cli_subprocess(*args, input=None, cwd=None, env=None) -> subprocess.CompletedProcess:
    """Run ``python -m dynid ARGS`` and return the CompletedProcess (bytes stdout/stderr)."""
    full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "dynid", *map(str, args)],
        input=input,
        capture_output=True,
        cwd=cwd,
        env=full_env,
        timeout=300,
    )


def run_script(text: str, cwd, timeout: float = 120) -> subprocess.CompletedProcess:
    """Write ``text`` to ``cwd/script.py`` and run it as a user would (``python script.py``, so
    that it is the main module) with this checkout first on PYTHONPATH; text stdout/stderr."""
    script = os.path.join(cwd, "script.py")
    with open(script, "w", encoding="utf-8") as file:
        file.write(text)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, script], cwd=cwd, env=env, timeout=timeout,
                          capture_output=True, text=True)


def run_cli_in_process(*args, input=None, cwd=None, env=None) -> CliResult:
    """Run ``dynid.cli.app.main(ARGS)`` in this process, as ``run_cli_subprocess`` would run it.

    stdin/stdout/stderr are byte buffers behind text wrappers (``.buffer`` works for binary
    output such as HDF5 on ``-o -``), none of them a terminal; NO_COLOR is set. Process-wide
    state a command may change - working directory, environment, numpy's global random state
    and print options, warnings filters, logging handlers, torch's thread count - is restored
    afterwards, so one run cannot leak into the next test.
    """
    from dynid.cli.app import main

    argv = [str(a) for a in args]
    stdout, stderr = _KeptBytes(), _KeptBytes()
    with _restored_process_state(cwd, {"NO_COLOR": "1", **(env or {})}):
        with _swapped_streams(_text(_KeptBytes(input or b"")), _text(stdout), _text(stderr)):
            code = main(argv)
    return CliResult(argv, code, stdout.getvalue(), stderr.getvalue())


class _KeptBytes(io.BytesIO):
    """A byte buffer whose contents outlive ``close`` (main closes stderr on a broken pipe)."""

    def close(self) -> None:
        pass


def _text(buffer: io.BytesIO) -> io.TextIOWrapper:
    return io.TextIOWrapper(buffer, encoding="utf-8", newline="", write_through=True)


@contextlib.contextmanager
def _swapped_streams(stdin, stdout, stderr) -> Iterator[None]:
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
    try:
        yield
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved


@contextlib.contextmanager
def _restored_process_state(cwd, env: dict[str, str]) -> Iterator[None]:
    saved_cwd = os.getcwd()
    saved_env = dict(os.environ)
    saved_random = np.random.get_state()
    saved_print = np.get_printoptions()
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    torch = sys.modules.get("torch")
    saved_threads = torch.get_num_threads() if torch is not None else None
    os.environ.update({k: str(v) for k, v in env.items()})
    if cwd is not None:
        os.chdir(cwd)
    try:
        with warnings.catch_warnings():
            yield
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        np.random.set_state(saved_random)
        np.set_printoptions(**saved_print)
        root.handlers[:], root.level = saved_handlers, saved_level
        torch = sys.modules.get("torch")
        if torch is not None and saved_threads is not None:
            torch.set_num_threads(saved_threads)


@pytest.fixture
def cli():
    """The CLI in process: ``cli(*args, input=bytes, cwd=..., env={...})`` -> CliResult."""
    return run_cli_in_process


@pytest.fixture
def cli_subprocess():
    """The CLI in a real ``python -m dynid`` subprocess, for pipes and start-up checks."""
    return run_cli_subprocess


@pytest.fixture(scope="module")
def one_torch_thread():
    """torch on one thread for the module: the networks in tests are tiny, so one thread is as
    fast, and threads competing with other processes for two cores slow training tenfold."""
    try:
        import torch
    except ImportError:  # nothing to set; the tests that need torch skip themselves
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def assert_registered_and_documented(cls, name: str) -> None:
    """A registry entry (backend or causal method) has its registry name, a summary and a doc
    line for every hyperparameter (``dynid models`` / ``--list`` show them)."""
    assert cls.name == name and cls.summary
    assert all(field["doc"] for field in cls.Params.describe())


TYPO = "no_such_key"  # a hyperparameter no backend or method has


def assert_typo_named_with_valid_keys(result, params) -> None:
    """``result`` (a CLI run with ``-p no_such_key=1``) failed with exit 2 and one stderr line
    naming the typo and every valid key of the hyperparameter class ``params``."""
    assert result.returncode == 2, result.stderr
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and TYPO in lines[0], lines
    for field in params.describe():
        assert field["name"] in lines[0], (field["name"], lines[0])


def write_csv(path, x: np.ndarray, names, t: np.ndarray | None = None, dt: float = 1.0):
    """``path`` as a CSV: a ``t`` column (``t``, or ``dt`` apart from 0) then one per name."""
    frame = pd.DataFrame(np.asarray(x, dtype=float).reshape(len(x), -1), columns=list(names))
    frame.insert(0, "t", np.arange(len(x)) * dt if t is None else t)
    frame.to_csv(path, index=False)
    return path


def var_process(lag_matrices, noise: np.ndarray) -> np.ndarray:
    """x(t) = sum_k A_k x(t-k) + noise(t) from x = 0, for the test files' known VAR processes.

    lag_matrices: [A_1, ..., A_p], each (d, d) indexed [target, source]; noise: (..., n, d),
    leading axes independent realisations. Returns (..., n, d); the first p samples are 0.
    """
    x = np.zeros_like(noise)
    for t in range(len(lag_matrices), noise.shape[-2]):
        drive = x[..., t - 1, :] @ lag_matrices[0].T
        for k, a in enumerate(lag_matrices[1:], start=2):
            drive = drive + x[..., t - k, :] @ a.T
        x[..., t, :] = drive + noise[..., t, :]
    return x


def damped_rotation(n: int = 300, theta: float = 0.2, decay: float = 0.99) -> np.ndarray:
    """(n, 2) noise-free x[k+1] = decay * R(theta) x[k] from x[0] = (1, 0)."""
    a = decay * np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
    x = np.zeros((n, 2))
    x[0] = [1.0, 0.0]
    for k in range(n - 1):
        x[k + 1] = a @ x[k]
    return x


@pytest.fixture
def linear_csv(tmp_path):
    """A noise-free 2-D damped rotation (columns p, q) sampled at dt=0.1 (uniform), 300 samples."""
    return write_csv(tmp_path / "linear.csv", damped_rotation(), ["p", "q"], dt=0.1)


class Interrupt(Exception):
    """Raised by ``StopAt`` in place of a Ctrl-C."""


class StopAt:
    """A progress display that interrupts a fit when epoch ``epoch`` reports (as Ctrl-C would),
    for the bit-identical ``--resume`` tests of the training backends."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def update(self, report) -> None:  # type: ignore[no-untyped-def]
        if report.epoch == self.epoch:
            raise Interrupt

    def notice(self, message: str) -> None:
        pass

    def close(self) -> None:
        pass


def fit_interrupted_and_resumed(make, data, seed: int, stop_epoch: int, checkpoints):  # type: ignore[no-untyped-def]
    """(the uninterrupted fit, the fit interrupted when epoch ``stop_epoch`` reports and then
    resumed from its checkpoint in ``checkpoints``): ``make()`` builds a fresh backend."""
    from dynid.training import TrainingOptions

    whole = make().fit(data, seed=seed)
    with pytest.raises(Interrupt):
        make().fit(data, seed=seed, training=TrainingOptions(
            checkpoint_dir=str(checkpoints), checkpoint_every_s=0.0, progress=StopAt(stop_epoch)))
    resumed = make().fit(data, seed=seed, training=TrainingOptions(checkpoint_dir=str(checkpoints), resume=True))
    return whole, resumed


def assert_same_arrays(expected, actual) -> None:  # type: ignore[no-untyped-def]
    """Every array of fitted model ``expected`` equals ``actual``'s, bit for bit."""
    for name, value in expected.arrays().items():
        assert np.array_equal(actual.arrays()[name], value), name
