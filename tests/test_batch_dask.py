"""--each --executor dask: the same JSON lines and model files as the local executor, on a real
``distributed.LocalCluster`` of worker processes (one joined with --scheduler, one started by
dynid)."""

import json
from pathlib import Path

import pytest

from tests.test_batch import _arrays, folder  # noqa: F401 - folder is a fixture

distributed = pytest.importorskip("distributed")

VARYING = ("fit_seconds", "output", "model_path")  # timing, and the output folder of each run


def _run(cli, folder: Path, name: str, *options: str) -> list[dict]:
    result = cli("fit", "data", "--each", "--model", "var", "--json", "-o", f"{name}/{{stem}}.dynid", *options, cwd=folder)
    assert result.returncode == 1, result.stderr.decode()  # bad.csv fails, the others go on
    stderr = result.stderr.decode().splitlines()  # nothing from dask: its logs are silenced
    assert len(stderr) == 2 and stderr[0].startswith("dynid: error: data/bad.csv: ")
    assert stderr[1] == "1 of 4 input(s) failed"
    lines = [json.loads(line) for line in result.stdout.decode().splitlines()]
    assert [line.get("output") for line in lines] == [f"{name}/a.dynid", f"{name}/b.dynid", None, f"{name}/c.dynid"]
    for line in lines:
        for key in VARYING:
            line.pop(key, None)
    return lines


def test_dask_gives_the_same_lines_and_files_as_local(cli, folder):
    local = _run(cli, folder, "local")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        joined = _run(cli, folder, "joined", "--executor", "dask", "--scheduler", cluster.scheduler_address)
    started = _run(cli, folder, "started", "--executor", "dask", "--jobs", "2")
    assert joined == local and started == local
    for stem in ("a", "b", "c"):
        reference = _arrays(folder / "local" / f"{stem}.dynid")
        assert _arrays(folder / "joined" / f"{stem}.dynid") == reference
        assert _arrays(folder / "started" / f"{stem}.dynid") == reference


def test_dask_options_that_do_not_fit_are_usage_errors(cli, folder):
    scheduler_alone = cli("fit", "data", "--each", "--model", "var", "--json", "--scheduler", "tcp://h:1", cwd=folder)
    assert scheduler_alone.returncode == 2 and b"--executor dask" in scheduler_alone.stderr
    both = cli("fit", "data", "--each", "--model", "var", "--json", "--executor", "dask",
               "--scheduler", "tcp://h:1", "--jobs", "2", cwd=folder)
    assert both.returncode == 2 and b"--jobs" in both.stderr
    unknown = cli("fit", "data", "--each", "--model", "var", "--json", "--executor", "slurm", cwd=folder)
    assert unknown.returncode == 2 and b"local, dask" in unknown.stderr
    assert not (folder / "m").exists()
