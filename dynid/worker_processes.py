"""What dynid's pools of spawned worker processes share: the batch runner's (``dynid.runner``,
``--jobs``) and the causal methods' (``dynid.causal.pool``, ``-p workers``).

A spawned worker first imports the caller's main script again. A script that starts a pool at
import time, without ``if __name__ == "__main__":``, would thus start the pool again inside every
worker, where multiprocessing refuses with a long traceback per worker. ``spawned_pool`` ends
such a worker at once with an exit code of its own (``leave_if_reimporting_main``), and the
parent turns that code into one ``UsageError`` naming the missing guard (``worker_death``).

Only the standard library at import time: the runner's workers import this before their thread
limits are set.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from dynid.errors import ComputationError, UsageError

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

# Exit code of a worker that found itself re-running the caller's script.
UNGUARDED_SCRIPT = 86
# Seconds a worker has, after SIGTERM, to clean up (remove temporary files) before SIGKILL.
STOP_GRACE = 10.0


@contextlib.contextmanager
def spawned_pool(workers: int, initializer: Callable[..., None], initargs: tuple[object, ...],
                 one_process: str) -> Iterator[ProcessPoolExecutor]:
    """A pool of ``workers`` processes started with the 'spawn' method, each first running
    ``initializer(*initargs)``. Leaving the block waits for the pool's tasks; an exception that
    leaves it stops the workers first (``stop_workers``). A worker that died raises UsageError
    when the workers re-ran the caller's script (module docstring), else ComputationError;
    ``one_process`` names the option that runs without workers (e.g. ``--jobs 1``)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    leave_if_reimporting_main()
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=initializer, initargs=initargs)
    try:
        yield pool
    except BrokenProcessPool as error:
        raise worker_death(stop_workers(pool), one_process) from error
    except BaseException:
        stop_workers(pool)
        raise
    pool.shutdown(wait=True)


def reimporting_main() -> bool:
    """Whether this process is a spawned worker that is still starting: its import of the main
    script is what is running."""
    import multiprocessing

    return bool(getattr(multiprocessing.current_process(), "_inheriting", False))


def leave_if_reimporting_main() -> None:
    """Call before starting a pool: in a spawned worker that is still starting (its import of
    the main script is what got here), end the process with ``UNGUARDED_SCRIPT``."""
    if reimporting_main():
        raise SystemExit(UNGUARDED_SCRIPT)


def stop_workers(pool: ProcessPoolExecutor) -> list[int | None]:
    """Cancel the pool's queued tasks, end its running workers (SIGTERM: they may clean up, then
    exit; SIGKILL after ``STOP_GRACE`` s), wait for the pool to close its queues and return the
    workers' exit codes (negative: ended by that signal). Also collects the workers of a pool
    that broke because one died."""
    processes = list((pool._processes or {}).values())  # no public way to reach the workers
    manager = pool._executor_manager_thread  # nor to its thread, which shutdown forgets
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=STOP_GRACE)
        if process.is_alive():
            process.kill()
            process.join()
    if manager is not None:
        # It closes the pool's queues once it sees the workers gone. A SIGTERM ends dynid with
        # os._exit, and queues still open then leave their semaphores to multiprocessing's
        # resource tracker, which warns on stderr after dynid's last line.
        manager.join(timeout=STOP_GRACE)
    return [process.exitcode for process in processes]


def worker_death(exit_codes: list[int | None], one_process: str) -> Exception:
    """The error for a pool whose worker died, from the workers' exit codes (``stop_workers``);
    ``one_process`` names the option that runs without workers (e.g. ``--jobs 1``)."""
    if UNGUARDED_SCRIPT in exit_codes:
        return UsageError(
            "the worker processes re-ran the main script, which calls dynid at import time: put "
            'the script\'s work under `if __name__ == "__main__":` (each worker is a fresh '
            f"interpreter that imports the script), or use one process with {one_process}")
    return ComputationError(
        f"a worker process ended unexpectedly (exit codes {exit_codes}; negative: killed by "
        f"that signal, e.g. -9 for lack of memory); {one_process} runs in this process only")
