"""SIGTERM (how SLURM, cron and service managers cancel a job) ends one command as Ctrl-C does:
exit 130, one line on stderr, no temporary or partial file left. Batches: tests/test_batch.py."""

import os
import signal
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from conftest import run_script

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _start(tmp_path, prelude: str, *args: str) -> subprocess.Popen:
    """``dynid ARGS`` in a fresh interpreter run from ``tmp_path``, after ``prelude`` (Python
    that instruments it), as the console script runs it."""
    t = np.arange(300) * 0.05
    pd.DataFrame({"t": t, "x": np.sin(t), "y": np.cos(t)}).to_csv(tmp_path / "data.csv", index=False)
    script = tmp_path / "script.py"
    script.write_text(f"import sys\n{prelude}\nfrom dynid.cli.app import run\nsys.argv = ['dynid', *{list(args)!r}]\nrun()\n")
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _assert_terminated_cleanly(process: subprocess.Popen, stderr: bytes, tmp_path) -> None:
    assert process.returncode == 130, stderr.decode()
    assert stderr.decode().splitlines()[-1] == "dynid: terminated"
    assert b"Traceback" not in stderr
    assert sorted(os.listdir(tmp_path)) == ["data.csv", "script.py"]  # no model, no temp file


def test_sigterm_during_a_fit_exits_130_without_a_model_file(tmp_path):
    announce = ("from dynid.models.base import Backend\n"
                "fit = Backend.fit\n"
                "def announced(self, *args, **kwargs):\n"
                "    print('fitting', file=sys.stderr, flush=True)\n"
                "    return fit(self, *args, **kwargs)\n"
                "Backend.fit = announced")
    process = _start(tmp_path, announce, "fit", "data.csv", "--model", "node", "-p", "epochs=100000",
                     "-o", "m.dynid")
    assert process.stderr.readline() == b"fitting\n"  # the fit is under way
    process.send_signal(signal.SIGTERM)
    _, rest = process.communicate(timeout=60)
    _assert_terminated_cleanly(process, b"fitting\n" + rest, tmp_path)


def test_sigterm_while_the_model_file_is_written_removes_the_temporary_file(tmp_path):
    # SIGTERM lands after the model's bytes are on disk in the temporary file, before the
    # rename that would make it the model file.
    terminate_in_fsync = ("import os, signal\n"
                          "fsync = os.fsync\n"
                          "def fsync_then_sigterm(fd):\n"
                          "    fsync(fd)\n"
                          "    os.kill(os.getpid(), signal.SIGTERM)\n"
                          "os.fsync = fsync_then_sigterm")
    process = _start(tmp_path, terminate_in_fsync, "fit", "data.csv", "--model", "var", "-o", "m.dynid")
    _, stderr = process.communicate(timeout=120)
    _assert_terminated_cleanly(process, stderr, tmp_path)


def test_a_worker_still_importing_the_main_script_keeps_the_default_sigterm(monkeypatch):
    # The workers of a batch started from an unguarded script run `main` while they import it;
    # the parent ends them with SIGTERM, and each would add its own "terminated" line to the
    # one error line that names the missing guard.
    import multiprocessing
    import signal

    from dynid.runner import sigterm_raises

    monkeypatch.setattr(multiprocessing.current_process(), "_inheriting", True, raising=False)
    before = signal.getsignal(signal.SIGTERM)
    with sigterm_raises():
        assert signal.getsignal(signal.SIGTERM) is before


def test_ctrl_c_ends_a_command_with_one_line_and_exit_130(cli, linear_csv, tmp_path, monkeypatch):
    # Typer turns KeyboardInterrupt into a silent exit 130; dynid says so, as for SIGTERM.
    from dynid import api

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(api, "fit", interrupted)
    result = cli("fit", linear_csv, "--model", "var", "-o", tmp_path / "m.dynid")
    assert result.returncode == 130
    assert result.stderr.decode().splitlines()[-1:] == ["dynid: interrupted"]
    assert b"Traceback" not in result.stderr and not (tmp_path / "m.dynid").exists()


def test_a_pool_stopped_before_os_exit_leaves_nothing_for_the_resource_tracker(tmp_path):
    # dynid leaves with os._exit on SIGTERM, right after the pool's workers are stopped: the
    # pool's queues must be closed by then, or multiprocessing's resource tracker warns about
    # their semaphores on stderr after "dynid: terminated" (seen in most --jobs 2 runs). The
    # pool's manager thread, which closes them, is slowed here as on a loaded machine.
    result = run_script(
        "import os, time\n"
        "from concurrent.futures import process\n"
        "from dynid.worker_processes import spawned_pool\n"
        "close = process._ExecutorManagerThread.join_executor_internals\n"
        "def slowly(self):\n"
        "    time.sleep(1)\n"
        "    close(self)\n"
        "process._ExecutorManagerThread.join_executor_internals = slowly\n"
        "if __name__ == '__main__':\n"
        "    try:\n"
        "        with spawned_pool(2, time.sleep, (0,), '--jobs 1') as pool:\n"
        "            busy = [pool.submit(time.sleep, 60) for _ in range(4)]\n"
        "            time.sleep(1)  # the workers have started their jobs\n"
        "            raise KeyboardInterrupt\n"
        "    except KeyboardInterrupt:\n"
        "        os._exit(130)  # as dynid leaves on SIGTERM\n",
        cwd=tmp_path)
    assert result.returncode == 130 and result.stderr == ""


def test_a_signal_during_a_read_of_data_is_never_lost(tmp_path):
    # pyarrow, which reads CSV for dynid, set its own SIGINT/SIGTERM handlers for the length of
    # a read and lost a signal now and then (about 1 in 7 in this loop): a batch sent SIGTERM
    # ran on to exit 0. SIGTERM at random moments of a loop of reads must always raise.
    import random
    import threading
    import time

    from dynid.data import load
    from dynid.runner import Terminated, sigterm_raises

    t = np.arange(400) * 0.05
    pd.DataFrame({"t": t, "x": np.sin(t), "y": np.cos(t)}).to_csv(tmp_path / "data.csv", index=False)
    lost, rng = 0, random.Random(0)
    with sigterm_raises():
        for _ in range(60):
            try:
                timer = threading.Timer(rng.uniform(0, 0.01), os.kill, (os.getpid(), signal.SIGTERM))
                timer.start()
                end = time.monotonic() + 0.03
                while time.monotonic() < end:
                    load(str(tmp_path / "data.csv"))
                time.sleep(0.05)  # a signal not raised by now was lost
                lost += 1
            except Terminated:
                timer.join()
    assert lost == 0


def test_a_signal_as_the_temporary_file_is_created_leaves_no_file(tmp_path, monkeypatch):
    # A signal that arrives during the slow open of an atomic write's temporary file (a busy
    # disk) is handled as the open returns; tempfile.mkstemp had not yet named the file to the
    # write, which then left it behind (seen in --jobs 2 batches ended by SIGTERM).
    from dynid import atomic
    from dynid.runner import Terminated

    opened = os.open

    def open_then_signal(path, flags, mode=0o777, **kwargs):
        fd = opened(path, flags, mode, **kwargs)
        if str(path).endswith(".tmp"):
            os.close(fd)
            raise Terminated()  # as the SIGTERM handler raises it when the open returns
        return fd

    monkeypatch.setattr(atomic.os, "open", open_then_signal)
    with pytest.raises(Terminated):
        with atomic.atomic_path(tmp_path / "m.dynid"):
            pass
    assert os.listdir(tmp_path) == []
