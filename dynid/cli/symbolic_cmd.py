"""``dynid symbolic DATA [...] [-o FILE] [--format text|latex|json]``: governing equations."""

from typing import Annotated, Optional

import typer

from dynid.cli import completion
from dynid.cli.each import EachSpec
from dynid.cli.options import DataOptions, OutputPath, ParamsOption, RunOptions, with_options
from dynid.cli.output import Output
from dynid.cli.report_cmd import ReportPath

FORMATS = ("text", "latex", "json")


def register(app: typer.Typer) -> None:
    app.command("symbolic")(symbolic)


@with_options("data", "run", "batch", each=EachSpec("symbolic", data="data_files"))
def symbolic(
    data_files: Annotated[list[str], typer.Argument(metavar="DATA", help="Data files or '-' for stdin.")],
    param: ParamsOption = None,
    library: Annotated[Optional[str], typer.Option("--library", help="Term library: auto (default: a sweep chosen per equation on held-out data) or e.g. poly3+trig, poly2*trig, trigdiff, rational, saturating (Hill exponent and constant profiled per equation), explog.")] = None,
    terms: Annotated[Optional[str], typer.Option("--terms", help="Extra terms, comma-separated, in the variable names: 'sin(x-y), x/(1+x**2)'.")] = None,
    derivative: Annotated[Optional[str], typer.Option("--derivative", help="auto (from the estimated noise), finite_difference, savgol, spectral, tv, spline or weak.")] = None,
    discrete: Annotated[bool, typer.Option("--discrete", help="Identify a discrete-time map x[k+1] = f(x[k]).")] = False,
    pde: Annotated[bool, typer.Option("--pde", help="Identify PDEs u_t = f(u, u_x, ...) from space-time fields in an HDF5 group: datasets (n_t, n_x) or (n_t, n_x, n_y), coordinates t, x, y (datasets or dt/dx/dy attributes); --columns picks fields; -p sets the PDE hyperparameters (max_degree, max_order, ensemble, half_widths, ...).")] = False,
    ensemble: Annotated[Optional[int], typer.Option("--ensemble", min=0, help="Bootstrap models for inclusion probabilities and intervals (0: none) [default: 20].")] = None,
    jobs: Annotated[Optional[int], typer.Option("--jobs", "-j", min=0, help="Worker processes for the sweeps (0: one per CPU) [default: 1].")] = None,
    output_format: Annotated[str, typer.Option("--format", help="text, latex or json (--json is the same as --format json).", autocompletion=completion.choices(FORMATS))] = "text",
    precision: Annotated[int, typer.Option("--precision", help="Significant digits of the coefficients in text and LaTeX (JSON keeps them all).")] = 6,
    save_model: Annotated[Optional[str], typer.Option("--save-model", help="Also write the identified model as a .dynid file.")] = None,
    output: OutputPath = None,
    report: ReportPath = None,
    *,
    data: DataOptions,
    run: RunOptions,
    out: Output,
) -> None:
    """Identify governing equations with uncertainty; -p sets any 'symbolic' model hyperparameter."""
    from dynid import api
    from dynid.atomic import write_text
    from dynid.cli.output import stderr_is_tty
    from dynid.documents import to_text
    from dynid.errors import UsageError
    from dynid.modelfile import save_model as write_model
    from dynid.models import registry
    from dynid.params import split_assignments
    from dynid.runtime import make_progress
    from dynid.symbolic import format_latex, format_text

    chosen = "json" if out.json_mode else output_format
    if chosen not in FORMATS:
        raise UsageError(f"--format {output_format}: expected one of {', '.join(FORMATS)}")
    if pde:
        ode_only = {"--library": library, "--terms": terms, "--derivative": derivative, "--discrete": discrete or None,
                    "--jobs": jobs, "--save-model": save_model, "--report": report}
        given = [name for name, value in ode_only.items() if value is not None]
        if given:
            raise UsageError(f"{given[0]} does not apply to --pde")
        text = _identify_pde(data_files, data, param, ensemble, run.seed, chosen, precision, out)
        if output and output != "-":
            write_text(output, text)
            out.info(f"wrote {output}")
        else:
            out.emit_text(text)
        return
    flags = {"library": library, "terms": terms, "derivative": derivative, "ensemble": ensemble, "jobs": jobs}
    # -p wins over these flags, and --discrete over -p, as they always have.
    values = {**{k: v for k, v in flags.items() if v is not None}, **split_assignments(param or [])}
    if discrete:
        values["discrete"] = True
    hyper = registry.get("symbolic").Params.from_values(values, option="-p ")
    dataset = data.load(data_files, out=out)
    # A live line on a terminal; off one, a status line every few seconds with -v; none with -q.
    progress = make_progress(quiet=out.quiet, verbose=out.verbose, terminal=stderr_is_tty())
    try:
        fitted = api.identify_model(dataset, hyper, seed=run.seed, device=run.device, progress=progress)
    finally:
        progress.close()
    result = api.equations_document(fitted.model, run.seed)
    if chosen == "json":
        text = to_text(result)
    else:
        text = (format_latex if chosen == "latex" else format_text)(result, precision)
    if save_model:
        write_model(fitted.model, save_model, fitted.metadata)
        out.info(f"wrote {save_model}")
    if output and output != "-":
        write_text(output, text)
        out.info(f"wrote {output}")
    else:
        out.emit_text(text)
    if report:
        from dynid.cli.report_cmd import run_model, write_run_report

        # The model section: equations with intervals and Pareto fronts, and free runs on DATA.
        write_run_report(report, models=[run_model(save_model, fitted.model, fitted.metadata)],
                         results=[], data=dataset, out=out)


def _identify_pde(
    data_files: list[str], data: DataOptions, param: Optional[list[str]], ensemble: Optional[int], seed: Optional[int],
    chosen: str, precision: int, out: Output,
) -> str:
    """``--pde``: the fields of the one HDF5 DATA, identified and rendered in ``chosen`` format."""
    from dynid import api
    from dynid.cli.options import split_names
    from dynid.data.fields import read_fields
    from dynid.documents import to_text
    from dynid.errors import UsageError
    from dynid.params import split_assignments
    from dynid.symbolic import format_latex, format_text
    from dynid.symbolic.pde import PdeParams

    if len(data_files) != 1:
        raise UsageError(f"--pde reads one HDF5 file of fields, got {len(data_files)} DATA arguments")
    values = {**({"ensemble": ensemble} if ensemble is not None else {}), **split_assignments(param or [])}
    hyper = PdeParams.from_values(values, option="-p ")
    fields = read_fields(data_files[0], split_names(data.columns), data.dt)
    for note in fields.notes:
        out.info(note)
    result = api.identify_pde(fields, hyper, seed=seed)
    if chosen == "json":
        return to_text(result)
    return (format_latex if chosen == "latex" else format_text)(result, precision)
