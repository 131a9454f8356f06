"""Worker processes for the tests of one causal method, split by target (``te``, ``ccm``).

``worker_pool(workers, build, problem)`` gives a ``map(function, items)`` that calls
``function(state, item)`` for every item, ``state = build(problem)``: in this process when
``workers`` <= 1, else in that many worker processes, each building its own state once (the
problem travels to each worker once, not with every task) and keeping it between calls, so one
pool serves every round of a sequential test. Results come back in the order of ``items``, and a
function that draws random numbers seeds them from its item, so the answers do not depend on
the number of workers.

Processes are spawned, not forked, as in the batch runner (``dynid.runner``): a fresh
interpreter holds none of the parent's threads or locks. Each worker runs BLAS with one thread
(two workers on two cores; the kNN searches are single-threaded anyway) and leaves SIGINT to the
parent, which stops the pool on Ctrl-C.

A spawned worker first imports the caller's main script again. A script that calls a method at
import time, without ``if __name__ == "__main__":``, would thus start the method again inside
every worker; there the worker ends at once, and the parent raises ``UsageError`` naming the
missing guard (``dynid.worker_processes``). The problem reaches the workers through a temporary
file, not with the spawned process: CPython's spawn writes the process's arguments into the
child's pipe while still holding the pipe's read end itself, so a child that dies before reading
arguments larger than the pipe's buffer (64 KiB) left the caller blocked for ever (seen with te
on 10 x 700 samples) instead of failing.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
from collections.abc import Callable, Iterator, Sequence
from typing import Generic, TypeVar

from dynid import worker_processes
from dynid.runtime import available_cores

P = TypeVar("P")  # the problem every worker receives
S = TypeVar("S")  # what a worker builds from it
T = TypeVar("T")  # one task
R = TypeVar("R")  # one result


def default_workers() -> int:
    """Processes a method may use: the cores this process may run on, at most the thread count
    that ``OMP_NUM_THREADS`` allows it (a batch runner's worker, or a user, sets it lower)."""
    cores = available_cores()
    limit = os.environ.get("OMP_NUM_THREADS", "")
    return max(1, min(cores, int(limit))) if limit.isdigit() and int(limit) > 0 else cores


class Mapper(Generic[S]):
    """``map(function, items)``: ``[function(state, item) for item in items]``, in order, over
    ``workers`` processes."""

    def __init__(self, call: Callable[[Callable[[S, T], R], Sequence[T]], list[R]],
                 workers: int) -> None:
        self._call, self.workers = call, workers

    def map(self, function: Callable[[S, T], R], items: Sequence[T]) -> list[R]:
        return self._call(function, items)


@contextlib.contextmanager
def worker_pool(workers: int, build: Callable[[P], S], problem: P) -> Iterator[Mapper[S]]:
    """A ``Mapper`` over ``workers`` processes (this process when <= 1); ``build`` and every
    function mapped must be module-level functions (they are pickled by name).

    Raises UsageError when the workers re-ran a script that calls this at import time (module
    docstring), ComputationError when a worker died otherwise (e.g. killed for memory).
    """
    if workers <= 1:
        state = build(problem)
        yield Mapper(lambda function, items: [function(state, item) for item in items], 1)
        return
    import pickle
    import tempfile

    with tempfile.TemporaryDirectory(prefix="dynid-pool-") as folder:
        path = os.path.join(folder, "problem.pickle")
        with open(path, "wb") as file:  # read back only by this call's own workers
            pickle.dump(problem, file, protocol=pickle.HIGHEST_PROTOCOL)
        with worker_processes.spawned_pool(workers, _start_worker, (build, path),
                                           "-p workers=1") as pool:
            yield Mapper(lambda function, items: list(pool.map(functools.partial(_call, function),
                                                                items)), workers)

_state: object = None  # in a worker: what ``build`` made of the problem


def _start_worker(build: Callable[[P], S], path: str) -> None:
    import pickle

    global _state
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)
    except ImportError:
        pass
    with open(path, "rb") as file:  # written by worker_pool for this pool
        problem = pickle.load(file)
    _state = build(problem)


def _call(function: Callable[[S, T], R], item: T) -> R:
    return function(_state, item)  # type: ignore[arg-type]
