"""--each over many inputs: patterns, failing inputs, shards, --resume, --jobs, signals."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pytest

from conftest import run_script
from dynid import runner
from dynid.errors import UsageError

TIMING = ("fit_seconds",)


def _write_var(path: Path, seed: int, n: int = 120) -> None:
    rng = np.random.default_rng(seed)
    x = np.zeros((n, 2))
    for k in range(1, n):
        x[k] = np.array([[0.8, 0.1], [-0.2, 0.7]]) @ x[k - 1] + rng.normal(size=2)
    pd.DataFrame({"t": np.arange(n) * 0.1, "x": x[:, 0], "y": x[:, 1]}).to_csv(path, index=False)


@pytest.fixture
def folder(tmp_path):
    """data/ with three good CSV files, one without numbers and a file dynid does not read."""
    data = tmp_path / "data"
    data.mkdir()
    for seed, name in enumerate(("a", "b", "c")):
        _write_var(data / f"{name}.csv", seed)
    (data / "bad.csv").write_text("x,y\n1,oops\n")
    (data / "notes.txt").write_text("not data")
    return tmp_path


def _lines(stdout: bytes) -> list[dict]:
    return [json.loads(line) for line in stdout.decode().splitlines()]


def _arrays(path: Path) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    with h5py.File(path, "r") as handle:
        handle.visititems(lambda name, obj: found.__setitem__(name, obj[()].tobytes())
                          if isinstance(obj, h5py.Dataset) else None)
    return found


def test_failing_input_is_reported_and_the_others_go_on(cli, folder):
    result = cli("fit", "data", "--each", "--model", "var", "--json", "-o", "m/{stem}.{model}.dynid", cwd=folder)
    assert result.returncode == 1
    lines = _lines(result.stdout)
    assert [line["input"] for line in lines] == ["data/a.csv", "data/b.csv", "data/bad.csv", "data/c.csv"]
    assert all(line["kind"] == "fit" for line in lines)
    bad = lines[2]
    assert "output" not in bad and bad["exit_code"] == 3 and "bad.csv" in bad["error"]
    for line in (lines[0], lines[1], lines[3]):
        assert line["output"] == line["model_path"] == f"m/{Path(line['input']).stem}.var.dynid"
        assert line["n_samples"] == 120 and (folder / line["output"]).is_file()
    assert sorted(p.name for p in (folder / "m").iterdir()) == ["a.var.dynid", "b.var.dynid", "c.var.dynid"]
    errors = [line for line in result.stderr.decode().splitlines() if line.startswith("dynid: error")]
    assert len(errors) == 1 and "data/bad.csv" in errors[0]
    assert b"Traceback" not in result.stderr


def test_default_output_name_works_per_input(cli, folder):
    result = cli("fit", "data/a.csv", "data/b.csv", "--each", "--model", "var", "-q", cwd=folder)
    assert result.returncode == 0 and result.stdout == b""
    assert (folder / "a.var.dynid").is_file() and (folder / "b.var.dynid").is_file()


def test_without_each_several_data_stay_trials_of_one_dataset(cli, folder):
    result = cli("fit", "data/a.csv", "data/b.csv", "--model", "var", "--json", "-o", "one.dynid", cwd=folder)
    assert result.returncode == 0
    assert json.loads(result.stdout)["n_trials"] == 2


@pytest.mark.parametrize("pattern", ["same.dynid", "m/{model}.dynid"])
def test_two_inputs_on_one_output_is_a_usage_error_before_anything_runs(cli, folder, pattern):
    result = cli("fit", "data", "--each", "--model", "var", "-o", pattern, cwd=folder)
    assert result.returncode == 2
    assert b"would both write" in result.stderr
    assert not (folder / "same.dynid").exists() and not (folder / "m").exists()


def test_bad_patterns_and_missing_pattern_are_usage_errors(cli, folder):
    unknown = cli("fit", "data", "--each", "--model", "var", "-o", "{stem}.{colour}.dynid", cwd=folder)
    assert unknown.returncode == 2 and b"{colour}" in unknown.stderr
    unset = cli("discover-causal", "data", "--each", "-o", "{model}.json", cwd=folder)
    assert unset.returncode == 2 and b"{model}" in unset.stderr
    missing = cli("symbolic", "data", "--each", cwd=folder)
    assert missing.returncode == 2 and b"-o PATTERN" in missing.stderr
    assert cli("fit", "data/a.csv", "--model", "var", "--jobs", "2", cwd=folder).returncode == 2
    assert cli("score", "a.dynid", "data/a.csv", "--resume", cwd=folder).returncode == 2
    assert cli("fit", "data", "--each", "--model", "var", "-o", "-", cwd=folder).returncode == 2


def test_each_on_score_forecast_and_causal(cli, folder):
    assert cli("fit", "data/a.csv", "--model", "var", "-o", "a.dynid", "-q", cwd=folder).returncode == 0
    score = cli("score", "a.dynid", "data/a.csv", "data/b.csv", "--each", "--json", "--horizon", "5", cwd=folder)
    assert score.returncode == 0
    lines = _lines(score.stdout)
    assert [(line["kind"], line["input"], line["output"]) for line in lines] == [
        ("score", "data/a.csv", None), ("score", "data/b.csv", None)]
    assert all(line["horizon"] == 5 and line["rmse"] > 0 for line in lines)
    forecast = cli("forecast", "a.dynid", "data/a.csv", "data/b.csv", "--each", "-n", "4",
                   "-o", "f/{stem}.{model}.csv", cwd=folder)
    assert forecast.returncode == 0
    for stem in ("a", "b"):
        table = pd.read_csv(folder / "f" / f"{stem}.a.csv")
        assert list(table.columns) == ["t", "x", "y"] and len(table) == 4
    causal = cli("discover-causal", "data/a.csv", "data/c.csv", "--each", "--json", "--max-lag", "2", cwd=folder)
    assert causal.returncode == 0
    lines = _lines(causal.stdout)
    assert [line["input"] for line in lines] == ["data/a.csv", "data/c.csv"]
    assert all(line["kind"] == "causal" and line["variables"] == ["x", "y"] for line in lines)


def test_each_on_symbolic_writes_one_file_per_input(cli, folder):
    result = cli("symbolic", "data/a.csv", "data/b.csv", "--each", "--json", "--ensemble", "0",
                 "--library", "poly1", "-o", "eq/{stem}.json", cwd=folder)
    assert result.returncode == 0
    assert [(line["kind"], line["output"]) for line in _lines(result.stdout)] == [
        ("symbolic", "eq/a.json"), ("symbolic", "eq/b.json")]
    for stem in ("a", "b"):
        document = json.loads((folder / "eq" / f"{stem}.json").read_text())
        assert document["kind"] == "symbolic" and [e["lhs"] for e in document["equations"]] == ["x", "y"]


def test_expand_inputs_sorts_globs_and_directories(folder):
    data = folder / "data"
    names = runner.expand_inputs([str(data / "*.csv"), str(data)])
    assert names == sorted(str(data / f"{n}.csv") for n in ("a", "b", "bad", "c"))
    with pytest.raises(UsageError):
        runner.expand_inputs([str(data / "*.h5")])
    with pytest.raises(UsageError):
        runner.expand_inputs(["-"])


def test_shards_partition_the_inputs():
    jobs = [runner.Job(f"in{k:03d}.csv", None) for k in range(23)]
    for count in (1, 2, 5, 23, 30):
        shards = [runner.Shard(index, count).select(jobs) for index in range(1, count + 1)]
        together = [job for shard in shards for job in shard]
        assert sorted(together, key=lambda j: j.input) == jobs  # every input, none twice
    env = {"SLURM_ARRAY_TASK_ID": "12", "SLURM_ARRAY_TASK_MIN": "10", "SLURM_ARRAY_TASK_COUNT": "4"}
    assert runner.Shard.from_environment(env) == runner.Shard(3, 4)
    assert runner.Shard.from_environment({}) is None
    assert runner.Shard.parse("2/4") == runner.Shard(2, 4)
    for text in ("0/4", "5/4", "2", "a/b"):
        with pytest.raises(UsageError):
            runner.Shard.parse(text)


def test_slurm_array_tasks_together_run_every_input_once(cli, folder):
    seen = []
    for task in (1, 2, 3):  # --array=1-3
        env = {"SLURM_ARRAY_TASK_ID": str(task), "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_COUNT": "3"}
        result = cli("fit", "data", "--each", "--model", "var", "--json", "-o", "m/{stem}.dynid", cwd=folder, env=env)
        assert result.returncode in (0, 1)
        seen += [line["input"] for line in _lines(result.stdout)]
    assert sorted(seen) == ["data/a.csv", "data/b.csv", "data/bad.csv", "data/c.csv"]
    explicit = cli("fit", "data", "--each", "--model", "var", "--json", "--shard", "2/3", "-o", "m/{stem}.dynid", cwd=folder)
    assert [line["input"] for line in _lines(explicit.stdout)] == ["data/b.csv"]


def test_resume_skips_valid_outputs_redoes_truncated_and_retries_failed(cli, folder):
    args = ("fit", "data", "--each", "--model", "var", "--json", "-o", "m/{stem}.dynid")
    assert cli(*args, cwd=folder).returncode == 1
    good = (folder / "m" / "a.dynid").read_bytes()
    truncated = folder / "m" / "b.dynid"
    truncated.write_bytes(truncated.read_bytes()[:300])
    _write_var(folder / "data" / "bad.csv", 7)  # the failed input is fixed
    result = cli(*args, "--resume", cwd=folder)
    assert result.returncode == 0
    lines = {line["input"]: line for line in _lines(result.stdout)}
    assert lines["data/a.csv"]["skipped"] and lines["data/c.csv"]["skipped"]
    assert "skipped" not in lines["data/b.csv"] and lines["data/b.csv"]["n_samples"] == 120
    assert "skipped" not in lines["data/bad.csv"] and (folder / "m" / "bad.dynid").is_file()
    assert (folder / "m" / "a.dynid").read_bytes() == good
    assert runner.output_is_valid(str(truncated))


def test_output_validity_by_format(tmp_path):
    (tmp_path / "ok.json").write_text('{"kind": "causal"}')
    (tmp_path / "cut.json").write_text('{"kind": "cau')
    (tmp_path / "ok.csv").write_text("t,x\n0,1\n")
    (tmp_path / "empty.csv").write_text("")
    assert runner.output_is_valid(str(tmp_path / "ok.json"))
    assert not runner.output_is_valid(str(tmp_path / "cut.json"))
    assert runner.output_is_valid(str(tmp_path / "ok.csv"))
    assert not runner.output_is_valid(str(tmp_path / "empty.csv"))
    assert not runner.output_is_valid(str(tmp_path / "missing.dynid"))


def test_hdf5_output_validity_follows_what_dynid_writes_as_hdf5(tmp_path, monkeypatch):
    """--resume opens as HDF5 exactly the outputs ``write_table`` writes as HDF5 (one function,
    ``is_hdf5_target``): a whole table is valid, a truncated one is redone; a family suffix
    dynid refuses to write (``.nc``, ``check_table_target``) is never opened as HDF5."""
    from dynid.data import writers

    t = np.arange(5.0)
    for name in ("out.h5", "OUT.HDF5", "out.csv"):
        path = tmp_path / name
        writers.write_table(str(path), "t", t, ("x",), t[:, None] ** 2)
        assert runner.output_is_valid(str(path))
    whole = (tmp_path / "out.h5").read_bytes()
    (tmp_path / "cut.h5").write_bytes(whole[: len(whole) // 2])
    assert not runner.output_is_valid(str(tmp_path / "cut.h5"))
    # Were dynid to write HDF5 to another suffix, --resume would follow without a second list.
    (tmp_path / "junk.hdf").write_bytes(b"not HDF5")
    assert runner.output_is_valid(str(tmp_path / "junk.hdf"))
    monkeypatch.setattr(writers, "HDF5_SUFFIXES", (*writers.HDF5_SUFFIXES, ".hdf"))
    assert not runner.output_is_valid(str(tmp_path / "junk.hdf"))


def test_jobs_two_gives_the_same_results_as_jobs_one(cli, folder):
    def run(jobs: int) -> list[dict]:
        result = cli("fit", "data", "--each", "--model", "var", "--json", "--jobs", str(jobs),
                     "-o", f"j{jobs}/{{stem}}.dynid", cwd=folder)
        assert result.returncode == 1
        lines = _lines(result.stdout)
        for line in lines:
            for key in (*TIMING, "output", "model_path"):
                line.pop(key, None)
        return lines

    assert run(2) == run(1)  # same lines, same (input) order
    for stem in ("a", "b", "c"):
        assert _arrays(folder / "j1" / f"{stem}.dynid") == _arrays(folder / "j2" / f"{stem}.dynid")


def test_worker_threads_fit_the_cores():
    assert runner.worker_threads(1, cores=8) == 8
    assert runner.worker_threads(3, cores=8) == 2
    assert runner.worker_threads(4, cores=2) == 1


@contextlib.contextmanager
def _children_start_with_sigint(disposition: str):
    """Processes started in the block begin with SIGINT at its default ("default") or ignored
    ("ignored"), whatever this process got: a handler is reset to the default across exec, an
    ignored signal stays ignored. pytest run as a background job of a script (``cmd &``, as
    CI may run it) starts with SIGINT ignored, and so would every child it starts."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler if disposition == "default" else signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def _start_batch(data: Path, outputs: Path, jobs: int, sigint: str) -> subprocess.Popen:
    """``dynid fit DATA --each --model var --json --jobs JOBS -o OUTPUTS/{stem}.dynid`` started
    with SIGINT ``sigint`` (``_children_start_with_sigint``); its pipes are bytes."""
    env = {**os.environ, "NO_COLOR": "1"}
    with _children_start_with_sigint(sigint):
        return subprocess.Popen(
            [sys.executable, "-m", "dynid", "fit", str(data), "--each", "--model", "var", "--json",
             "--jobs", str(jobs), "-o", str(outputs / "{stem}.dynid")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


@pytest.mark.parametrize(("jobs", "signum", "code"), [
    (1, signal.SIGTERM, 130), (2, signal.SIGTERM, 130), (2, signal.SIGINT, 130)])
def test_a_signal_ends_the_batch_promptly_without_partial_outputs(tmp_path, jobs, signum, code):
    data = tmp_path / "data"
    data.mkdir()
    for k in range(60):
        _write_var(data / f"s{k:02d}.csv", k, n=400)
    # SIGINT at its default, as a terminal's Ctrl-C finds it: started with it ignored, dynid
    # keeps ignoring it (test_a_batch_started_with_sigint_ignored_keeps_ignoring_it).
    process = _start_batch(data, tmp_path / "m", jobs, "default")
    first = process.stdout.readline()  # the batch is under way
    assert json.loads(first)["kind"] == "fit"
    process.send_signal(signum)
    start = time.monotonic()
    rest, stderr = process.communicate(timeout=30)
    assert time.monotonic() - start < 10
    assert process.returncode == code, stderr.decode()
    said = {signal.SIGINT: "dynid: interrupted", signal.SIGTERM: "dynid: terminated"}[signum]
    assert stderr.decode().splitlines()[-1:] == [said]
    assert b"Traceback" not in stderr
    written = sorted((tmp_path / "m").iterdir())
    assert len(written) < 60  # it stopped before the end
    time.sleep(1.5)
    assert sorted((tmp_path / "m").iterdir()) == written  # no worker outlived the batch
    assert [path.name for path in written if not (path.suffix == ".dynid" and runner.output_is_valid(str(path)))] == []


def test_a_batch_started_with_sigint_ignored_keeps_ignoring_it(tmp_path):
    # POSIX: a shell without job control starts background jobs (`dynid ... &` in a script)
    # with SIGINT ignored, so that a Ctrl-C meant for the script does not end them; a program
    # keeps an ignored SIGINT ignored (Python then installs no KeyboardInterrupt handler, and
    # dynid installs none of its own). SIGTERM is the signal that cancels such a batch.
    data = tmp_path / "data"
    data.mkdir()
    for k in range(6):
        _write_var(data / f"s{k:02d}.csv", k)
    process = _start_batch(data, tmp_path / "m", 1, "ignored")
    first = process.stdout.readline()  # the batch is under way
    assert json.loads(first)["kind"] == "fit"
    process.send_signal(signal.SIGINT)
    rest, stderr = process.communicate(timeout=120)
    assert process.returncode == 0 and stderr == b"", stderr.decode()
    assert sorted(path.name for path in (tmp_path / "m").iterdir()) == [f"s{k:02d}.dynid" for k in range(6)]


def test_a_script_without_main_guard_gets_one_error_line(tmp_path):
    # A batch started from a user's script: each spawned worker imports the script again, so an
    # unguarded script starts the batch again in every worker. That must end in one line naming
    # the guard and exit 2; before, every worker printed multiprocessing's traceback.
    data = tmp_path / "data"
    data.mkdir()
    for seed, name in enumerate(("a", "b")):
        _write_var(data / f"{name}.csv", seed)
    result = run_script(
        "import sys\n"
        "from dynid.cli.app import main\n"
        "sys.exit(main(['fit', 'data', '--each', '--model', 'var', '--jobs', '2', '-o', 'm/{stem}.dynid']))\n",
        cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("dynid: error: the worker processes re-ran the main script")
    assert '`if __name__ == "__main__":`' in line and "--jobs 1" in line
    assert not (tmp_path / "m").exists() or not any((tmp_path / "m").iterdir())


def _thread_settings(job: runner.Job) -> tuple[str, list[int]]:
    """In a worker: its OMP_NUM_THREADS and the thread counts of the BLAS numpy loaded."""
    import numpy  # noqa: F401 - loaded after the worker's limits, as a job would load it
    from threadpoolctl import threadpool_info

    return os.environ["OMP_NUM_THREADS"], [pool["num_threads"] for pool in threadpool_info()]


def test_workers_run_blas_with_their_share_of_the_cores():
    pytest.importorskip("threadpoolctl")
    jobs = [runner.Job(f"in{k}", None) for k in range(4)]
    results = list(runner.run_jobs(_thread_settings, jobs, workers=2))
    assert [job for job, _ in results] == jobs  # input order
    share = runner.worker_threads(2)
    for _, (omp, blas) in results:
        assert omp == str(share) and blas and all(n == share for n in blas)


def test_a_termination_swallowed_by_a_callback_is_delivered_again_after_the_hook_returns():
    """A SIGTERM that lands inside a weakref callback or __del__ raises where Python can only
    print it; the hook sends it again, to be raised at the next safe point, and only once the
    hook has returned: raised inside the hook it would be printed with a traceback and lost
    (seen in a --jobs 2 batch)."""
    before = signal.signal(signal.SIGTERM, runner._raise_terminated)
    try:
        lost = types.SimpleNamespace(exc_type=runner.Terminated, exc_value=runner.Terminated(),
                                     exc_traceback=None, err_msg=None, object=None)
        runner._redeliver_signal(lost)  # returns without raising
        with pytest.raises(runner.Terminated):
            time.sleep(5)
    finally:
        signal.signal(signal.SIGTERM, before)


class _InterruptedWhileCollected:
    """An object whose ``__del__`` the signal ``signum`` interrupts: the signal's handler
    raises there, where Python can only print the exception and go on."""

    def __init__(self, signum: int) -> None:
        self.signum = signum

    def __del__(self) -> None:
        os.kill(os.getpid(), self.signum)
        time.sleep(1)  # the handler runs in this call


@pytest.mark.parametrize(("signum", "raised"), [(signal.SIGTERM, runner.Terminated), (signal.SIGINT, KeyboardInterrupt)])
def test_a_signal_that_lands_in_a_finaliser_still_stops_the_work(capsys, signum, raised):
    # Where a batch's parent collects the pool's objects (weakref callbacks, __del__), a signal's
    # exception was printed and lost, and the batch ran to its end (SIGINT: exit 0).
    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # even where pytest ignores it
    try:
        with runner.sigterm_raises(), pytest.raises(raised):
            _InterruptedWhileCollected(signum)  # collected at once
            time.sleep(5)
    finally:
        signal.signal(signal.SIGINT, before)
    assert "Exception ignored" not in capsys.readouterr().err


def test_a_second_sigterm_does_not_cut_short_a_workers_cleanup(tmp_path, monkeypatch):
    # The parent ends its workers with SIGTERM, and the pool's manager thread, seeing one of
    # them gone, sends the others another (concurrent.futures' terminate_broken). Raised while
    # the first unwound a job, it left the temporary file of the atomic write it cut short.
    from dynid import atomic

    unlink, sent = os.unlink, []

    def terminated_again(path):  # the second SIGTERM lands as the cleanup starts
        if not sent:
            sent.append(path)
            os.kill(os.getpid(), signal.SIGTERM)
        unlink(path)

    monkeypatch.setattr(runner, "_busy", True)  # as in a job; idle, the handler would os._exit
    monkeypatch.setattr(runner, "_unwinding", False, raising=False)
    monkeypatch.setattr(atomic.os, "unlink", terminated_again)
    before = signal.signal(signal.SIGTERM, runner._worker_sigterm)
    try:
        with pytest.raises(runner.Terminated), atomic.atomic_path(tmp_path / "m.dynid") as temp:
            Path(temp).write_bytes(b"half a model")
            os.kill(os.getpid(), signal.SIGTERM)  # the first: the job unwinds
            time.sleep(5)
    finally:
        signal.signal(signal.SIGTERM, before)
    assert sent and os.listdir(tmp_path) == []


def test_a_worker_leaves_only_once_the_interrupted_job_has_closed_its_files(tmp_path):
    # A SIGTERM can land between two steps of a with statement: the atomic write's context
    # manager has yielded its temporary path and its exit has not begun. Held by the frames of
    # the exception's traceback, it removes the file only when released: before the worker's
    # os._exit, or never.
    result = run_script(
        "from pathlib import Path\n"
        "from dynid import runner\n"
        "from dynid.atomic import atomic_path\n"
        "def job(_):\n"
        "    write = atomic_path('m.dynid')\n"
        "    Path(write.__enter__()).write_bytes(b'half a model')\n"
        "    raise runner.Terminated()  # as the signal's handler raises it, the with's exit not begun\n"
        "runner._run_in_worker(job, runner.Job('in.csv', 'm.dynid'), 1)\n",
        cwd=tmp_path)
    assert result.returncode == 130, result.stderr
    assert sorted(os.listdir(tmp_path)) == ["script.py"]
