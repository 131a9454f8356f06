"""``dynid discover-causal DATA --method NAME [--max-lag L] [--alpha A]``: who drives whom.

The default ``--method auto`` chooses sindy, consensus or granger from the data and says which
and why on stderr (``dynid.causal.auto``). ``--clusters "A=x1,x2;B=x3"`` tests links between
groups of variables (granger only; auto then runs granger);
``--dynamic-output FILE`` writes ``--method dynamic``'s strength series (.h5/.hdf5 or .json).
"""

import math
from typing import Annotated, Any, Optional

import typer

from dynid.cli import completion
from dynid.cli.each import EachSpec
from dynid.cli.options import DataOptions, OutputPath, ParamsOption, RunOptions, TrainingFlags
from dynid.cli.options import with_options
from dynid.cli.output import Output
from dynid.cli.report_cmd import ReportPath

FORMATS = ("json", "csv", "dot", "graphml", "text")
# Without --dynamic-output, strength series up to this many numbers (T' * d * d) go in the JSON.
MAX_INLINE_DYNAMIC = 10_000


def register(app: typer.Typer) -> None:
    app.command("discover-causal")(discover_causal)


@with_options("data", "run", "training", "batch", each=EachSpec("causal", data="data_files", method="method"))
def discover_causal(
    data_files: Annotated[Optional[list[str]], typer.Argument(metavar="DATA", help="Data files or '-' for stdin.")] = None,
    method: Annotated[str, typer.Option("--method", help="Method name; 'dynid discover-causal --list' shows them with their -p options.", autocompletion=completion.causal_methods)] = "auto",
    param: ParamsOption = None,
    max_lag: Annotated[int, typer.Option("--max-lag", help="Largest lag tested (samples).")] = 5,
    alpha: Annotated[float, typer.Option("--alpha", help="Significance level after correction.")] = 0.05,
    correction: Annotated[str, typer.Option("--correction", help="Multiple-testing correction: bh (Benjamini-Hochberg FDR), bonferroni or none.")] = "bh",
    output_format: Annotated[str, typer.Option("--format", help="json, csv (edge list; a method without p-values leaves p_value empty), dot, graphml or text (a table by p-value, then score; by score without p-values) [default: text on a terminal, else json].", autocompletion=completion.choices(FORMATS))] = "",
    list_methods: Annotated[bool, typer.Option("--list", help="List the methods and their -p options, then exit.")] = False,
    clusters: Annotated[Optional[str], typer.Option("--clusters", help='Test links between groups of variables, e.g. "A=x1,x2;B=x3,x4" (granger only: the default auto runs granger); unlisted variables are conditioned on but not shown.')] = None,
    dynamic_output: Annotated[Optional[str], typer.Option("--dynamic-output", help="--method dynamic: write the strength series to FILE (.h5/.hdf5 or .json).")] = None,
    output: OutputPath = None,
    report: ReportPath = None,
    *,
    data: DataOptions,
    run: RunOptions,
    training: TrainingFlags,
    out: Output,
) -> None:
    """Discover which variable drives which, at which lag."""
    import contextlib
    import sys

    from dynid import api
    from dynid.atomic import write_text
    from dynid.causal import registry
    from dynid.errors import UsageError

    if list_methods:
        _list(out, registry)
        return
    if not data_files:
        raise UsageError("give DATA (a file, or '-' for stdin)")
    _check_dynamic_output(dynamic_output, method)
    method = api.causal_method(method, clusters)
    cls = registry.get(method)
    hyper = cls.Params.parse(param or [])
    options = training.options(out)
    chosen = "json" if out.json_mode else output_format
    if not chosen:
        chosen = "text" if (output in (None, "-") and sys.stdout.isatty()) else "json"
    if chosen not in FORMATS:
        raise UsageError(f"--format {output_format}: expected one of {', '.join(FORMATS)}")
    dataset = data.load(data_files, out=out)
    # A method that reports progress shows it; a spinner would fight it for the line.
    spinner = not (cls.trains or cls.reports_progress)
    with out.status(f"running {method}") if spinner else contextlib.nullcontext():
        try:
            graph = api.discover_causal(
                dataset, method, hyper, clusters=clusters, max_lag=max_lag, alpha=alpha,
                correction=correction, seed=run.seed, device=run.device, training=options,
            )
        finally:
            options.progress.close()
    if "auto" in graph.extra:
        out.info(f"auto chose {graph.extra['auto']['method']}: {graph.extra['auto']['reason']}")
    if "dynamic" in graph.extra:
        if dynamic_output:
            from dynid.causal.dynamic import write_strength_series

            write_strength_series(graph, dynamic_output)
            out.info(f"wrote {dynamic_output}")
        if chosen == "json":
            graph = _inline_dynamic(graph, out, written=bool(dynamic_output))
    if chosen == "json":
        from dynid.documents import to_text

        text = to_text(api.causal_document(graph))
    elif chosen == "csv":
        text = graph.to_csv()
    elif chosen == "dot":
        text = graph.to_dot()
    elif chosen == "graphml":
        text = graph.to_graphml()
    else:
        text = _table(graph)
    if output and output != "-":
        write_text(output, text)
        out.info(f"wrote {output}")
    else:
        out.emit_text(text)
    if report:
        from dynid.cli.report_cmd import write_run_report

        write_run_report(report, models=[], results=[(output or method, api.causal_document(graph))],
                         data=dataset, out=out)


def _check_dynamic_output(path: Optional[str], method: str) -> None:
    """UsageError for --dynamic-output without --method dynamic or with an unknown suffix,
    before any data are read."""
    from dynid.causal.dynamic import check_strength_path
    from dynid.errors import UsageError

    if path is None:
        return
    if method != "dynamic":
        raise UsageError("--dynamic-output needs --method dynamic")
    check_strength_path(path)


def _inline_dynamic(graph: Any, out: Output, *, written: bool) -> Any:
    """The graph with the dynamic arrays dropped from ``extra`` when they are too large for the
    JSON output (more than ``MAX_INLINE_DYNAMIC`` numbers); a note says so unless ``written``."""
    import dataclasses

    dynamic = graph.extra["dynamic"]
    size = int(dynamic["strength"].size)
    if size <= MAX_INLINE_DYNAMIC:
        return graph
    if not written:
        out.info(
            f"the strength series ({size} numbers) is left out of the output; "
            "write it with --dynamic-output FILE.h5"
        )
    kept = {key: value for key, value in dynamic.items() if key not in ("times", "trial", "strength")}
    kept["n_times"] = int(dynamic["strength"].shape[0])
    return dataclasses.replace(graph, extra={**graph.extra, "dynamic": kept})


def _list(out: Output, registry) -> None:  # type: ignore[no-untyped-def]
    from dynid.documents import METHODS

    out.emit_catalogue(
        METHODS,
        [
            {"name": name, "summary": f"{cls.summary}. Use for {cls.use_when}.", "use_when": cls.use_when,
             "cuda": cls.cuda, "hyperparameters": cls.Params.describe()}
            for name, cls in ((name, registry.get(name)) for name in registry.names())
        ]
    )


def _table(graph) -> str:  # type: ignore[no-untyped-def]
    """The significant links, strongest evidence first (``CausalGraph.evidence_order``, the
    HTML report's order): by p-value, or for methods without p-values by their pair's score,
    which the table then shows in the p-value's place; the title line says which."""
    # An undirected lag-0 link (o-o, x-x) is one row, not one per direction.
    significant = sorted(
        (e for e in graph.edges if e.significant and not (e.undirected and e.source > e.target)),
        key=graph.evidence_order,
    )
    by_p_value = any(math.isfinite(e.p_value) for e in significant)
    chosen = graph.extra.get("auto", {}).get("method")
    name = f"{graph.method} ({chosen})" if chosen else graph.method
    order = "by p-value, then score" if by_p_value else "by score (no p-values)"
    lines = [f"{name}: {len(significant)} significant link(s) at alpha {graph.alpha:g} (max lag {graph.max_lag}), {order}"]
    lines.append(f"{'source':>12}  {'target':<12} {'lag':>3}  {'strength':>9}  {'p (adj.)' if by_p_value else 'score':>9}")
    for e in significant:
        if by_p_value:
            evidence = f"{e.p_value:>9.2e}" if math.isfinite(e.p_value) else f"{'n/a':>9}"
        else:
            evidence = f"{graph.pair_score(e):>9.3g}"
        arrow = e.link if e.undirected else "->"
        lines.append(f"{e.source:>12}{arrow}{e.target:<12} {e.lag:>3}  {e.strength:>9.3g}  {evidence}")
    changes = graph.extra.get("dynamic", {}).get("change_points", [])
    if changes:
        lines.append(f"{len(changes)} change point(s) in link strength:")
        for c in changes:
            lines.append(f"{c['source']:>12}->{c['target']:<12} at t={c['time']:g}: {c['before']:.3g} -> {c['after']:.3g}")
    return "\n".join(lines)
