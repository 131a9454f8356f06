"""``dynid fit DATA... --model NAME [-p KEY=VALUE ...] [-o MODEL.dynid]``."""

from typing import TYPE_CHECKING, Annotated, Optional

import typer

from dynid.cli import completion
from dynid.cli.each import EachSpec
from dynid.cli.options import DataOptions, LabelsOption, OutputPath, ParamsOption, RunOptions, TrainingFlags, split_names, with_options
from dynid.cli.output import Output
from dynid.cli.report_cmd import ReportPath

if TYPE_CHECKING:
    from dynid.models.base import Backend

# The model file written without -o, per input: "lorenz.csv" -> "lorenz.sindy.dynid".
DEFAULT_OUTPUT = "{stem}.{model}.dynid"


def register(app: typer.Typer) -> None:
    app.command("fit")(fit)


@with_options("data", "run", "training", "batch",
              each=EachSpec("fit", data="data_files", default_output=DEFAULT_OUTPUT, model="model"))
def fit(
    data_files: Annotated[list[str], typer.Argument(metavar="DATA", help="Data files (CSV, TSV, HDF5) or '-' for stdin.")],
    model: Annotated[str, typer.Option("--model", "-m", help="Backend name ('dynid models' lists them), or auto: fit every applicable backend, keep the best on held-out data.", autocompletion=completion.models)],
    param: ParamsOption = None,
    output: OutputPath = None,
    labels: LabelsOption = None,
    report: ReportPath = None,
    max_memory: Annotated[Optional[str], typer.Option("--max-memory", help="Memory DATA may take (e.g. 8G); a larger CSV/TSV is read in chunks by var and dmd, refused by other backends [default: half the physical memory].")] = None,
    *,
    data: DataOptions,
    run: RunOptions,
    training: TrainingFlags,
    out: Output,
) -> None:
    """Fit a dynamics model and write it to a .dynid model file."""
    from contextlib import nullcontext

    from dynid import api
    from dynid.models import registry
    from dynid.modelfile import save_model
    from dynid.selection import fit_auto

    from dynid.errors import UsageError

    if out.json_mode and output == "-":
        raise UsageError("--json and -o - both want stdout; write the model to a file")
    if output == "-":
        from dynid.atomic import refuse_binary_terminal

        refuse_binary_terminal()  # before the fit, not after it
    ranking = None
    if model == "auto":
        if param:
            raise UsageError("-p sets one backend's hyperparameters; --model auto uses their defaults")
        if training.checkpoint or training.resume or training.threads or labels:
            raise UsageError("--model auto takes --max-time (its search budget) but not "
                             "--checkpoint, --resume, --threads or --labels")
        dataset = data.load(data_files, out=out)
        with out.status("fitting every applicable backend"):
            auto = fit_auto(dataset, max_time=training.max_time, seed=run.seed, device=run.device,
                            progress=out.debug)
        result, ranking = auto.result, [c.to_dict() for c in auto.ranking]
        model = result.model.name
        out.info(_ranking_text(ranking))
    else:
        backend = registry.get(model)
        hyper = backend.Params.parse(param or [])
        backend.check_inputs(split_names(data.inputs))  # before reading DATA
        if _too_large(data_files, max_memory, model, backend(hyper)):
            with out.status(f"fitting {model}, reading {data_files[0]} in chunks"):
                result = api.fit_stream(data.stream(data_files[0], out=out), model, hyper, seed=run.seed,
                                        device=run.device)
        else:
            dataset = data.with_labels(labels).load(data_files, nan_default="keep" if backend.capabilities.nan else "split", out=out)
            out.debug(f"fitting {model} on {dataset.n_trials} trial(s), {dataset.n_samples} samples")
            options = training.options(out)
            # A training backend shows its own progress; a spinner would fight it for the line.
            spinner = out.status(f"fitting {model}") if not backend.trains_network(hyper) else nullcontext()
            with spinner:
                try:
                    result = api.fit(dataset, model, hyper, seed=run.seed, device=run.device,
                                     training=options, labels=labels)
                finally:
                    options.progress.close()
    path = output or _default_path(data_files[0], model)
    save_model(result.model, path, result.metadata)
    meta = result.metadata
    if report:
        from dynid.cli.report_cmd import run_model, write_run_report

        # The report's data are the model's variables: without the --labels column.
        shown = dataset if labels is None else api.split_labels(dataset, labels)[0]
        write_run_report(report, models=[run_model(path, result.model, meta)], results=[],
                         data=shown, out=out)
    if out.json_mode:
        from dynid.documents import FIT, tagged

        out.emit_json(
            tagged(FIT, {
                "model_path": path,
                "model": model,
                **{k: meta[k] for k in ("hyperparameters", "variables", "inputs", "dt", "n_trials", "n_samples", "metrics", "fit_seconds", "seed")},
                **({"ranking": ranking} if ranking is not None else {}),
            })
        )
    elif path != "-":
        out.info(f"wrote {path} ({model}, {meta['n_samples']} samples, {meta['fit_seconds']:.2f} s)")


def _too_large(data_files: list[str], max_memory: Optional[str], model: str, backend: "Backend") -> bool:
    """Whether DATA is too large to hold in memory (--max-memory): then it is read in chunks,
    which a backend fitting from running sums (var, dmd) can use, one file at a time;
    ResourceUnavailable for the others."""
    from dynid.data.stream import default_memory_limit, format_size, memory_needed, parse_size
    from dynid.errors import ResourceUnavailable, UsageError

    limit = parse_size(max_memory) if max_memory is not None else default_memory_limit()
    needed = sum(memory_needed(spec) for spec in data_files)
    if needed <= limit:
        return False
    what = f"{', '.join(data_files)}: about {format_size(needed)} in memory, more than --max-memory {format_size(limit)}"
    if backend.moments(1, 0) is None:
        raise ResourceUnavailable(f"{what}; the {model} backend needs the whole data in memory "
                                  "(var and dmd read a file in chunks); raise --max-memory or use a smaller file")
    if len(data_files) > 1:
        raise UsageError(f"{what}; a file is read in chunks one at a time: give one DATA file")
    return True


def _ranking_text(ranking: list[dict]) -> str:
    """The --model auto ranking for stderr, best first."""
    lines = ["held-out ranking (multi-step NRMSE on the last 20% of each trial, best first):"]
    for row in ranking:
        if row["status"] == "scored":
            diverged = f", {row['diverged_rollouts']} diverged" if row["diverged_rollouts"] else ""
            nrmse = "diverged" if row.get("nrmse") is None else f"{row['nrmse']:.4g}"
            lines.append(f"  {row['model']:<10} nrmse {nrmse}, VPT {row['valid_prediction_time']:.4g}{diverged}")
        else:
            lines.append(f"  {row['model']:<10} {row['status']}: {row['reason']}")
    return "\n".join(lines)


def _default_path(first: str, model: str) -> str:
    """The model file's name without -o: the same pattern --each uses per input."""
    from dynid.runner import output_path, pattern_fields

    fields = {"stem": "stdin", "name": "stdin", "model": model} if first == "-" else pattern_fields(first, model=model)
    return output_path(DEFAULT_OUTPUT, fields)
