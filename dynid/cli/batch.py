"""``--each``: one job per input through ``dynid.runner``, each job the command's own body.

The body runs unchanged for one input with ``-o`` resolved from the pattern; what it would
print on stdout is captured and becomes that input's JSON line (``"kind"``, ``"input"``,
``"output"`` or ``"error"``, plus the command's own fields). A failing input is one line on
stderr and the batch goes on; exit 1 at the end if any failed. A usage error stops the batch
(it would fail every input alike). Lines come in input order, whatever ``--jobs``.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import typer

from dynid.cli.each import BODIES, BatchOptions, EachSpec
from dynid.cli.output import Output
from dynid.errors import UsageError
from dynid.runner import Job

# Modules every job imports (the API, readers, model files and their libraries): a worker
# imports them as it starts, not during its first job.
WORKER_PRELOAD = ("dynid.api", "dynid.data.load", "dynid.modelfile", "pandas", "h5py")


@dataclass(frozen=True)
class Outcome:
    """What one job gave: the document it would have printed (or its text), or its error."""

    document: Optional[dict[str, Any]] = None
    text: Optional[str] = None
    error: Optional[str] = None
    exit_code: int = 0


class _CapturingOutput(Output):
    """An Output whose stdout is kept for the batch line instead of printed."""

    def __init__(self, **flags: bool) -> None:
        super().__init__(**flags)
        self.document: Optional[dict[str, Any]] = None
        self.text: Optional[str] = None

    def emit_json(self, document: Mapping[str, Any]) -> None:
        self.document = dict(document)

    def emit_text(self, text: str) -> None:
        self.text = text


@dataclass(frozen=True)
class CommandTask:
    """The command body ``key`` with ``kwargs``, applied to one job (picklable for workers)."""

    key: str
    spec: EachSpec
    kwargs: dict[str, Any]
    flags: dict[str, bool]

    def __call__(self, job: Job) -> Outcome:
        from dynid.errors import DynidError

        module, _, _ = self.key.partition(":")
        importlib.import_module(module)  # registers the body in a fresh worker
        body = BODIES[self.key]
        kwargs = dict(self.kwargs)
        leading = kwargs[self.spec.data][: self.spec.leading]
        kwargs[self.spec.data] = [*leading, job.input]
        if self.spec.output is not None:
            kwargs[self.spec.output] = job.output
        out = _CapturingOutput(**self.flags)
        try:
            body(out=out, **kwargs)
        except DynidError as exc:
            return Outcome(error=str(exc).splitlines()[0] if str(exc) else type(exc).__name__, exit_code=exc.exit_code)
        except MemoryError:
            return Outcome(error="out of memory", exit_code=1)
        except Exception as exc:  # noqa: BLE001 - one input's failure must not end the batch
            return Outcome(error=f"internal error: {type(exc).__name__}: {exc}", exit_code=1)
        document = out.document
        if document is None and out.text is not None and self.flags["json"]:
            document = _parsed(out.text)  # symbolic/causal print their JSON as text
        return Outcome(document=document, text=None if document is not None else out.text)


def _parsed(text: str) -> Optional[dict[str, Any]]:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def run_each(key: str, spec: EachSpec, kwargs: dict[str, Any], batch: BatchOptions, out: Output) -> None:
    """Run the command body ``key`` once per input named by ``kwargs[spec.data]``."""
    from dynid import runner
    from dynid.documents import batch_line

    runner.check_executor(batch.executor, batch.scheduler, batch.jobs)
    jobs = _jobs(spec, kwargs, out)
    runner.check_distinct(jobs)  # over all inputs, so that every shard agrees
    shard = runner.Shard.parse(batch.shard) if batch.shard else runner.Shard.from_environment(os.environ)
    if shard is not None:
        jobs = shard.select(jobs)
        out.debug(f"shard {shard.index}/{shard.count}: {len(jobs)} input(s)")
    if batch.resume:
        if spec.output is None or any(job.output is None for job in jobs):
            raise UsageError("--resume skips inputs whose output file exists: give -o PATTERN")
        done = [job for job in jobs if runner.output_is_valid(job.output)]  # type: ignore[arg-type]
        for job in done:
            out.info(f"{job.input}: {job.output} is done, skipped")
            if out.json_mode:
                out.emit_text(batch_line(spec.kind, job.input, output=job.output, skipped=True))
        jobs = [job for job in jobs if job not in done]
    for job in jobs:
        if job.output not in (None, "-"):
            Path(job.output).parent.mkdir(parents=True, exist_ok=True)
    task = CommandTask(key, spec, _inner_kwargs(kwargs), {"json": out.json_mode, "quiet": out.quiet, "verbose": out.verbose})
    failed = 0
    for job, outcome in runner.run_jobs(task, jobs, batch.jobs or 1, executor=batch.executor,
                                        scheduler=batch.scheduler, preload=(key.partition(":")[0], *WORKER_PRELOAD)):
        if outcome.exit_code == UsageError.exit_code:
            raise UsageError(outcome.error or "bad usage")
        if outcome.error is not None:
            failed += 1
            named = outcome.error if outcome.error.startswith(job.input) else f"{job.input}: {outcome.error}"
            print(f"dynid: error: {named}", file=sys.stderr, flush=True)
            if out.json_mode:
                out.emit_text(batch_line(spec.kind, job.input, error=outcome.error, exit_code=outcome.exit_code))
        elif out.json_mode:
            out.emit_text(batch_line(spec.kind, job.input, output=job.output, document=outcome.document))
        elif outcome.text is not None:
            out.emit_text(f"# {job.input}\n{outcome.text}")
    if failed:
        out.info(f"{failed} of {len(jobs)} input(s) failed")
        raise typer.Exit(1)


def _jobs(spec: EachSpec, kwargs: dict[str, Any], out: Output) -> list[Job]:
    """One job per input, its output resolved from -o's pattern (or the default)."""
    from dynid import runner

    values = kwargs[spec.data] or []
    inputs = runner.expand_inputs(list(values[spec.leading :]))
    if any(value == "-" for value in values[: spec.leading]):
        raise UsageError("--each reads the model once per input: give MODEL as a file, not '-'")
    pattern = kwargs.get(spec.output) if spec.output else None
    if pattern == "-":
        raise UsageError("--each writes one output per input: -o - (stdout) cannot hold them; use --json")
    if spec.json_only_stdout and pattern is not None:
        out.check_json_target(pattern)
    pattern = pattern or spec.default_output
    if pattern is None and not out.json_mode:
        raise UsageError("--each needs -o PATTERN (e.g. -o 'out/{stem}.json') or --json (one line per input)")
    model = kwargs.get(spec.model) if spec.model else None
    if spec.model_file:
        model = Path(values[0]).name.split(".")[0]
    method = kwargs.get(spec.method) if spec.method else None
    return [
        Job(name, None if pattern is None else runner.output_path(pattern, runner.pattern_fields(name, model=model, method=method)))
        for name in inputs
    ]


def _inner_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments every job gets: the batch's --jobs is not the body's (symbolic's sweeps
    run single-process inside a batch), and --resume means skip-done, not resume training
    from checkpoints that are not there."""
    inner = dict(kwargs)
    if "jobs" in inner:
        inner["jobs"] = None
    training = inner.get("training")
    if training is not None and training.resume and not training.checkpoint:
        inner["training"] = dataclasses.replace(training, resume=False)
    return inner
