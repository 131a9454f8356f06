"""Executors for many inputs (``--each``): input expansion, output patterns, SLURM-style
shards, ``--resume``, and running one job per input serially, in local worker processes or
(``dynid.dask_executor``) on a Dask cluster.

A job is a picklable callable applied to one ``Job``; it returns a picklable result. The
executors yield ``(job, result)`` in input order, so ``--jobs K`` prints the same lines in the
same order as ``--jobs 1``. Keep this module free of numpy/torch at import time: spawned
workers import it before their thread limits are set.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import glob
import importlib
import os
import signal
import string
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, TypeVar

from dynid import worker_processes
from dynid.errors import UsageError
from dynid.runtime import available_cores

# What a directory given as DATA expands to (with the HDF5 family: ``dynid.data.readers``).
TEXT_DATA_SUFFIXES = (".csv", ".tsv", ".csv.gz", ".tsv.gz")
PATTERN_FIELDS = ("stem", "name", "model", "method")
EXECUTORS = ("local", "dask")
# The most jobs sent to a worker in one message (see chunk_size).
MAX_CHUNK = 16
# Variables that size the thread pools of the BLAS libraries and of torch (OpenMP) in a worker.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")

R = TypeVar("R")


@dataclass(frozen=True)
class Job:
    """One input of a batch and where its result goes (None: no file, the result is the line)."""

    input: str
    output: Optional[str]


class Terminated(BaseException):
    """SIGTERM arrived (how SLURM, cron and service managers cancel a job). A BaseException,
    like KeyboardInterrupt, so that no ``except Exception`` swallows it and atomic writes
    remove their temporary files; it ends dynid as SIGINT does (CONTRACT: 130 interrupted)."""

    exit_code = 130


# ---------------------------------------------------------------------------- inputs and outputs
def expand_inputs(specs: list[str]) -> list[str]:
    """Every file named by ``specs`` (files, globs, directories of data files), sorted and
    without repeats. UsageError for stdin (``-``) or a spec that names no file."""
    from dynid.data.readers import HDF5_FAMILY_SUFFIXES

    data_suffixes = (*TEXT_DATA_SUFFIXES, *HDF5_FAMILY_SUFFIXES)
    found: set[str] = set()
    for spec in specs:
        if spec == "-":
            raise UsageError("--each runs one job per file: stdin ('-') cannot be one of them")
        path_part, colon, inner = spec.partition(":") if not os.path.exists(spec) else (spec, "", "")
        if os.path.isdir(spec):
            found.update(str(p) for p in Path(spec).iterdir()
                         if p.is_file() and p.name.lower().endswith(data_suffixes))
        elif glob.has_magic(path_part):
            matches = sorted(glob.glob(path_part))
            if not matches:
                raise UsageError(f"{spec}: no file matches")
            found.update(m + colon + inner for m in matches)
        else:
            found.add(spec)  # a missing file fails as that input's own error
    if not found:
        raise UsageError(f"{' '.join(specs)}: no data files ({', '.join(data_suffixes)}) there")
    return sorted(found)


def pattern_fields(input_spec: str, **extra: Optional[str]) -> dict[str, Optional[str]]:
    """The fields an ``-o`` pattern may use for ``input_spec``: ``stem`` (file name up to its
    first dot), ``name`` (file name with its suffixes), plus ``model``/``method`` as given."""
    name = Path(input_spec.split(":")[0]).name
    return {"stem": name.split(".")[0], "name": name, **extra}


def output_path(pattern: str, fields: Mapping[str, Optional[str]]) -> str:
    """``pattern`` with its ``{field}`` replaced; UsageError for an unknown or unset field."""
    used = [field for _, field, _, _ in string.Formatter().parse(pattern) if field is not None]
    for field in used:
        if field not in PATTERN_FIELDS:
            raise UsageError(f"-o {pattern}: unknown field {{{field}}} (use {', '.join('{' + f + '}' for f in PATTERN_FIELDS)})")
        if fields.get(field) is None:
            raise UsageError(f"-o {pattern}: {{{field}}} has no value for this command")
    return pattern.format(**{k: v for k, v in fields.items() if k in used})


def check_distinct(jobs: list[Job]) -> None:
    """UsageError when two inputs would write the same output file."""
    seen: dict[str, str] = {}
    for job in jobs:
        if job.output is None:
            continue
        key = os.path.abspath(job.output)
        if key in seen:
            raise UsageError(f"{seen[key]} and {job.input} would both write {job.output}: "
                             "put {stem} or {name} in the -o pattern")
        seen[key] = job.input


# ---------------------------------------------------------------------------------------- shards
@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count``, 1-based (``--shard 1/4`` .. ``4/4``)."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> "Shard":
        head, slash, tail = text.partition("/")
        try:
            index, count = int(head), int(tail)
        except ValueError:
            raise UsageError(f"--shard {text}: expected I/N, e.g. 1/4") from None
        if not slash or count < 1 or not 1 <= index <= count:
            raise UsageError(f"--shard {text}: expected I/N with 1 <= I <= N")
        return cls(index, count)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> Optional["Shard"]:
        """The shard of a SLURM array task (``SLURM_ARRAY_TASK_ID`` minus ``_MIN`` plus one, of
        ``SLURM_ARRAY_TASK_COUNT``), or None outside an array."""
        if "SLURM_ARRAY_TASK_ID" not in environ or "SLURM_ARRAY_TASK_COUNT" not in environ:
            return None
        try:
            task = int(environ["SLURM_ARRAY_TASK_ID"]) - int(environ.get("SLURM_ARRAY_TASK_MIN", "0"))
            count = int(environ["SLURM_ARRAY_TASK_COUNT"])
        except ValueError:
            raise UsageError("SLURM_ARRAY_TASK_ID/_MIN/_COUNT are not integers; give --shard I/N") from None
        if not 0 <= task < count:
            raise UsageError(f"SLURM array task {task + 1} of {count}: use a contiguous --array or give --shard I/N")
        return cls(task + 1, count)

    def select(self, items: list[Job]) -> list[Job]:
        """Every ``count``-th item from the ``index``-th: the shards of one list are disjoint
        and together hold every item (round robin spreads large and small files)."""
        return items[self.index - 1 :: self.count]


# ---------------------------------------------------------------------------------------- resume
def output_is_valid(path: str) -> bool:
    """Whether ``path`` exists and reads back whole: model files through the model loader,
    JSON parsed, CSV/TSV parsed, HDF5 opened (the suffixes dynid writes HDF5 to, by
    ``is_hdf5_target``: outputs are dynid's own); other text formats non-empty."""
    if not os.path.isfile(path):
        return False
    from dynid.data.writers import is_hdf5_target
    from dynid.errors import DataError

    lower = path.lower()
    try:
        if lower.endswith(".dynid"):
            from dynid.modelfile import load_model

            load_model(path)
        elif lower.endswith(".json"):
            import json

            with open(path, encoding="utf-8") as handle:
                json.load(handle)
        elif lower.endswith((".csv", ".tsv", ".csv.gz", ".tsv.gz")):
            import pandas as pd

            return not pd.read_csv(path, sep=None, engine="python").empty
        elif is_hdf5_target(path):
            import h5py

            with h5py.File(path, "r"):
                pass
        else:
            return os.path.getsize(path) > 0
    except (DataError, OSError, ValueError, UnicodeDecodeError):
        return False
    except Exception:  # noqa: BLE001 - any parser failure means "redo it"
        return False
    return True


# ------------------------------------------------------------------------------------- executors
def worker_threads(jobs: int, cores: Optional[int] = None) -> int:
    """BLAS/torch threads per worker so that ``jobs`` x threads <= cores (at least 1)."""
    return max(1, (available_cores() if cores is None else cores) // jobs)


def thread_limits(threads: int) -> dict[str, str]:
    """The environment that limits BLAS and torch to ``threads`` in a process started with it."""
    return {variable: str(threads) for variable in THREAD_VARIABLES}


def chunk_size(jobs: int, workers: int) -> int:
    """Jobs handed to a worker at once: few round trips for many small inputs, yet about four
    chunks per worker so that a slow input does not leave the other workers idle at the end."""
    return max(1, min(MAX_CHUNK, jobs // (4 * workers)))


def _start_worker(threads: int, preload: tuple[str, ...]) -> None:
    """Initializer of each worker process: thread limits before numpy or torch load, SIGTERM
    as an exception (so atomic writes clean up), SIGINT left to the parent (it stops the pool);
    then the ``preload`` modules, so that their import is paid while the parent still submits."""
    os.environ.update(thread_limits(threads))
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(threads)  # for libraries already loaded by the import of this module
    except ImportError:
        pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _worker_sigterm)
    sys.unraisablehook = _redeliver_signal
    for module in preload:
        importlib.import_module(module)


_busy = False  # in a worker: whether a job is running (SIGTERM then unwinds it first)
_unwinding = False  # in a worker: whether a SIGTERM's Terminated is unwinding the job


def _run_in_worker(task: Callable[[Job], R], job: Job, threads: int) -> R:
    global _busy
    if "torch" in sys.modules:  # loaded by an earlier job; later imports read OMP_NUM_THREADS
        sys.modules["torch"].set_num_threads(threads)
    _busy = True
    try:
        return task(job)
    except Terminated:
        pass  # the job has unwound, its atomic writes removing their temporary files
    finally:
        _busy = False
    # The pool's worker loop would report the exception and wait for more work, so leave; only
    # now that the exception and the frames of its traceback are released (gc.collect: they may
    # hold each other), so that a context manager the signal caught between two steps (its
    # generator suspended, an atomic write's exit not yet begun) is closed and cleans up too.
    gc.collect()
    os._exit(Terminated.exit_code)


def _worker_sigterm(signum: int, frame: object) -> None:
    global _unwinding
    if _unwinding:
        # A second SIGTERM: the pool's manager thread, finding a worker gone, ends the others
        # too (concurrent.futures' terminate_broken). Raised now, it would cut short the
        # cleanup of the first and leave an atomic write's temporary file; the worker leaves
        # by itself once that is done (_run_in_worker).
        return
    if not _busy:
        os._exit(Terminated.exit_code)  # idle: nothing to clean up
    _unwinding = True
    raise Terminated()


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated()


# Seconds after which a signal whose exception Python could not raise is sent again.
REDELIVERY_DELAY = 0.01
# The signal whose handler raises each exception (KeyboardInterrupt: Python's own for SIGINT).
SIGNAL_OF = ((Terminated, signal.SIGTERM), (KeyboardInterrupt, signal.SIGINT))


def _redeliver_signal(unraisable: sys.UnraisableHookArgs) -> None:
    """``sys.unraisablehook``: a ``Terminated`` (SIGTERM) or KeyboardInterrupt (SIGINT) raised
    where Python cannot propagate it (a weakref callback or ``__del__`` that the signal happened
    to interrupt) would be printed with a traceback and lost, and the batch would go on; send
    the signal again instead, so that its handler raises at the next safe point. Only while a
    Python handler takes that signal (one raised the exception; an ignored or default signal
    is left as it is). From another thread, a moment later: sent from here, the handler could
    run before this hook returns, and raise inside the hook, where it is printed and lost the
    same way."""
    global _unwinding
    for exception, signum in SIGNAL_OF:
        if isinstance(unraisable.exc_value, exception) and callable(signal.getsignal(signum)):
            _unwinding = False  # in a worker: nothing is unwinding, so the resent SIGTERM raises
            resend = threading.Timer(REDELIVERY_DELAY, os.kill, (os.getpid(), signum))
            resend.daemon = True
            resend.start()
            return
    sys.__unraisablehook__(unraisable)


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """SIGTERM raises ``Terminated`` in the main thread within the block (a CLI command, a
    batch); restored after. Elsewhere than in the main thread, which alone receives signals,
    nothing changes; nor in a spawned worker still importing an unguarded main script, which
    its parent ends with SIGTERM when the batch stops and whose line would repeat the parent's."""
    main_thread = threading.current_thread() is threading.main_thread()
    if not main_thread or worker_processes.reimporting_main():
        yield
        return
    before = signal.signal(signal.SIGTERM, _raise_terminated)
    hook, sys.unraisablehook = sys.unraisablehook, _redeliver_signal
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
        sys.unraisablehook = hook


def check_executor(executor: str, scheduler: Optional[str], workers: Optional[int]) -> None:
    """UsageError for an unknown executor or options that do not go with it (``workers``:
    --jobs as given, None when not)."""
    if executor not in EXECUTORS:
        raise UsageError(f"--executor {executor}: expected one of {', '.join(EXECUTORS)}")
    if scheduler is not None and executor != "dask":
        raise UsageError("--scheduler: only with --executor dask")
    if scheduler is not None and workers is not None:
        raise UsageError("--jobs with --scheduler: the Dask cluster's workers decide how many run at once")


def run_jobs(task: Callable[[Job], R], jobs: list[Job], workers: int = 1, *, executor: str = "local",
             scheduler: Optional[str] = None, preload: tuple[str, ...] = ()) -> Iterator[tuple[Job, R]]:
    """Apply ``task`` to every job, yielding ``(job, result)`` in the order of ``jobs``.

    ``executor`` "local", ``workers`` > 1: a pool of that many processes started with the
    'spawn' method: a fresh interpreter holds none of the parent's threads or locks (forking a
    process with BLAS/OpenMP or torch threads can deadlock) and behaves the same on Linux and
    macOS; its start-up cost (``preload``: modules every job needs) is paid once per worker, and
    jobs go to workers in chunks (``chunk_size``). Each worker runs BLAS and torch with
    ``worker_threads(workers)`` threads. ``executor`` "dask": ``dynid.dask_executor`` (on the
    cluster at ``scheduler``, else a local one of ``workers`` processes, default one per core). SIGINT
    (KeyboardInterrupt) or SIGTERM (``Terminated``) stops the workers, which remove their
    temporary files, before the exception propagates. A local worker that dies raises
    UsageError when the workers re-ran a script that calls this at import time
    (``dynid.worker_processes``), else ComputationError.
    """
    check_executor(executor, scheduler, None)
    with sigterm_raises():
        if executor == "dask":
            from dynid.dask_executor import run_on_dask

            count = workers if workers > 1 else available_cores()
            yield from run_on_dask(task, jobs, scheduler, count, thread_limits(worker_threads(count)))
            return
        if workers <= 1:
            for job in jobs:
                yield job, task(job)
            return
        threads = worker_threads(workers)
        with worker_processes.spawned_pool(workers, _start_worker, (threads, preload), "--jobs 1") as pool:
            yield from zip(jobs, pool.map(functools.partial(_run_in_worker, task, threads=threads), jobs,
                                          chunksize=chunk_size(len(jobs), workers)))
