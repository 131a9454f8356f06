"""Progress of long computations (symbolic sweeps and ensembles, causal methods): reported
through ``dynid.runtime``'s one progress mechanism, shown by the CLI as a line every few seconds
with -v off a terminal, not at all with -q, and never changing a result."""

import re

import numpy as np
import pytest

import dynid
from dynid.causal.base import CausalSettings
from dynid.causal.registry import get as causal_method
from dynid.runtime import LineProgress, StepReport, Steps, describe
from dynid.symbolic.identify import identify
from dynid.symbolic.options import SymbolicParams
from dynid.systems import simulate
from dynid.training import TrainingOptions

# What LineProgress prints for a StepReport: "stage  done/total  elapsed s[, ~left s left]".
STATUS_LINE = re.compile(r"^.+  \d+/\d+  \d+ s(, ~\d+ s left)?$", re.MULTILINE)


class Recorder:
    """A Progress that keeps every report."""

    def __init__(self) -> None:
        self.reports: list[StepReport] = []

    def update(self, report: StepReport) -> None:
        self.reports.append(report)

    def notice(self, message: str) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def lorenz():
    sim = simulate("lorenz", n=400)
    return dynid.Dataset.from_arrays(sim.x, t=sim.t, variables=["x", "y", "z"])


def test_steps_count_and_describe_the_time_left():
    recorder = Recorder()
    steps = Steps(recorder, 4)
    steps.start("a")
    steps.finish("a")
    assert [(r.stage, r.done, r.total) for r in recorder.reports] == [("a", 0, 4), ("a", 1, 4)]
    line = describe(StepReport("x: library poly2", 1, 4, 10.0))
    assert line == "x: library poly2  1/4  10 s, ~30 s left"
    assert STATUS_LINE.fullmatch(line)
    assert describe(StepReport("done", 4, 4, 12.0)) == "done  4/4  12 s"  # no estimate at the end


def test_line_progress_prints_steps_only_every_interval(capsys):
    progress = LineProgress(interval_s=3600.0)
    for done in range(3):
        progress.update(StepReport("s", done, 3, 0.0))
    assert capsys.readouterr().err == "s  0/3  0 s\n"  # the first, then none within the hour
    LineProgress().update(StepReport("s", 0, 3, 0.0))  # no interval: no step lines at all
    assert capsys.readouterr() == ("", "")


def test_symbolic_reports_every_equation_and_the_same_model(lorenz):
    params = SymbolicParams(library="poly2", ensemble=2)
    recorder = Recorder()
    with_progress = identify(lorenz, params, seed=1, progress=recorder)
    without = identify(lorenz, params, seed=1)
    np.testing.assert_array_equal(with_progress.coefficients, without.coefficients)
    for a, b in zip(with_progress.equations, without.equations, strict=True):
        np.testing.assert_array_equal(a.interval, b.interval)
    done = [r.done for r in recorder.reports]
    assert done == sorted(done) and done[-1] == 6 == recorder.reports[-1].total  # sweep + ensemble
    stages = " | ".join(r.stage for r in recorder.reports)
    for name in ("x", "y", "z"):
        assert f"{name}: library poly2" in stages and f"{name}: ensemble of 2" in stages


def test_parallel_symbolic_sweep_counts_every_equation(lorenz):
    recorder = Recorder()
    identify(lorenz, SymbolicParams(library="poly2", ensemble=0, jobs=2), progress=recorder)
    assert [r.done for r in recorder.reports if r.stage.startswith("selected")] == [1, 2, 3]


@pytest.mark.parametrize("method, params, total", [
    # te and ccm: the estimates, then the sequential Monte-Carlo tests of all links together
    ("pcmci", {}, 2), ("te", {"n_permutations": 19}, 2), ("ccm", {"n_surrogates": 19}, 2),
    ("dynamic", {"window": 150, "step": 75}, None), ("consensus", {}, 2),
])
def test_slow_causal_methods_report_progress_and_the_same_graph(lorenz, method, params, total):
    cls = causal_method(method)
    recorder = Recorder()
    seen = cls(cls.Params.build(params)).discover(
        lorenz, CausalSettings(max_lag=2, seed=0, training=TrainingOptions(progress=recorder)))
    plain = cls(cls.Params.build(params)).discover(lorenz, CausalSettings(max_lag=2, seed=0))
    np.testing.assert_array_equal(seen.score_matrix, plain.score_matrix)
    assert recorder.reports, f"{method} reported nothing"
    last = recorder.reports[-1]
    assert last.done == last.total and (total is None or last.total == total)
    if method == "dynamic":  # one step per window; the windows' own base runs stay silent
        assert all("window" in r.stage for r in recorder.reports) and last.total >= 3
    if method == "consensus":  # one step per member; the members' own stages stay silent
        assert {r.stage for r in recorder.reports} == {"consensus: crosspred", "consensus: pcmci"}


def test_symbolic_cli_status_lines_with_verbose_none_with_quiet(cli, tmp_path):
    sim = simulate("lorenz", n=400)
    path = tmp_path / "lorenz.csv"
    np.savetxt(path, np.column_stack([sim.t, sim.x]), delimiter=",", header="t,x,y,z", comments="")
    args = ("symbolic", path, "--library", "poly2", "--ensemble", "2", "--seed", "0")
    plain = cli(*args)
    verbose = cli(*args, "-v")
    quiet = cli(*args, "-q")
    assert plain.returncode == verbose.returncode == quiet.returncode == 0, verbose.stderr
    # Off a terminal (a pipe here) -v shows status lines on stderr, at least the first.
    assert STATUS_LINE.search(verbose.stderr.decode())
    assert not STATUS_LINE.search(plain.stderr.decode())
    assert quiet.stderr == b""
    assert verbose.stdout == plain.stdout == quiet.stdout  # progress never reaches stdout
