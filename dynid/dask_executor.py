"""The Dask executor of ``--each --executor dask``: one task per input on a Dask cluster.

``--scheduler ADDRESS`` joins a running cluster (its workers need dynid installed, the same
version); without it a ``distributed.LocalCluster`` of worker processes is started for the
batch and closed after it. Results come back in input order, as from ``dynid.runner``'s local
pool, so the JSON lines are the same. ``distributed`` is imported only here, inside the
function: it is the optional extra ``dynid[dask]``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, Optional, TypeVar

from dynid.errors import ResourceUnavailable
J = TypeVar("J")
R = TypeVar("R")

# A worker's tasks change its working directory one at a time (a Dask worker may run several
# threads; dynid's own local cluster runs one).
_directory_lock = threading.Lock()

# How long to wait for the scheduler named by --scheduler before saying it cannot be reached (s).
CONNECT_TIMEOUT_S = 10


@dataclass(frozen=True)
class InDirectory(Generic[J, R]):
    """``task`` run with ``directory`` as the working directory (on a worker)."""

    task: Callable[[J], R]
    directory: str

    def __call__(self, job: J) -> R:
        with _directory_lock:
            before = os.getcwd()
            try:
                os.chdir(self.directory)
            except OSError:
                raise ResourceUnavailable(f"a Dask worker has no directory {self.directory}: "
                                          "the workers need the file system dynid runs on") from None
            try:
                return self.task(job)
            finally:
                os.chdir(before)


def run_on_dask(task: Callable[[J], R], jobs: list[J], scheduler: Optional[str], workers: int,
                environment: dict[str, str]) -> Iterator[tuple[J, R]]:
    """Apply ``task`` to every job on Dask, yielding ``(job, result)`` in the order of ``jobs``.

    ``scheduler``: the address of a running scheduler (``tcp://host:8786``); None starts a local
    cluster of ``workers`` processes, one task thread each, with ``environment`` (the thread
    limits of ``dynid.runner``). On any exception (KeyboardInterrupt, ``Terminated``) the tasks
    not yet finished are cancelled before it propagates.
    """
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ResourceUnavailable("--executor dask needs the optional extra: pip install 'dynid[dask]'") from None
    with contextlib.ExitStack() as stack:
        if scheduler is None:
            cluster = stack.enter_context(LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                silence_logs=logging.ERROR, env=environment))
            client = stack.enter_context(Client(cluster))
        else:
            try:
                client = stack.enter_context(Client(scheduler, timeout=CONNECT_TIMEOUT_S))
            except (OSError, TimeoutError, ValueError) as exc:
                raise ResourceUnavailable(f"--scheduler {scheduler}: cannot reach the Dask scheduler ({exc})") from None
        # pure=False: two inputs never share a key, and a rerun is computed again, not reused.
        futures = client.map(InDirectory(task, os.getcwd()), jobs, pure=False)
        try:
            for job, future in zip(jobs, futures):
                yield job, future.result()
        except BaseException:
            client.cancel(futures)
            raise
