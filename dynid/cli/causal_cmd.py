"""``dynid discover-causal DATA --method NAME [--max-lag L] [--alpha A]``: who drives whom."""

from typing import Annotated, Optional

import typer

from dynid.cli.options import DataOptions, OutputPath, ParamsOption, RunOptions, with_options
from dynid.cli.output import Output

FORMATS = ("json", "csv", "dot", "graphml", "text")


def register(app: typer.Typer) -> None:
    app.command("discover-causal")(discover_causal)


@with_options("data", "run")
def discover_causal(
    data_files: Annotated[Optional[list[str]], typer.Argument(metavar="DATA", help="Data files or '-' for stdin.")] = None,
    method: Annotated[str, typer.Option("--method", help="Method name; 'dynid discover-causal --list' shows them with their -p options.")] = "granger",
    param: ParamsOption = None,
    max_lag: Annotated[int, typer.Option("--max-lag", help="Largest lag tested (samples).")] = 5,
    alpha: Annotated[float, typer.Option("--alpha", help="Significance level after correction.")] = 0.05,
    correction: Annotated[str, typer.Option("--correction", help="Multiple-testing correction: bh (Benjamini-Hochberg FDR), bonferroni or none.")] = "bh",
    output_format: Annotated[str, typer.Option("--format", help="json, csv (edge list), dot, graphml or text [default: text on a terminal, else json].")] = "",
    list_methods: Annotated[bool, typer.Option("--list", help="List the methods and their -p options, then exit.")] = False,
    output: OutputPath = None,
    *,
    data: DataOptions,
    run: RunOptions,
    out: Output,
) -> None:
    """Discover which variable drives which, at which lag."""
    import json
    import sys

    from dynid.atomic import write_text
    from dynid.causal import CausalSettings, registry
    from dynid.errors import UsageError
    from dynid.jsonable import jsonable
    from dynid.runtime import resolve_device

    if list_methods:
        _list(out, registry)
        return
    if not data_files:
        raise UsageError("give DATA (a file, or '-' for stdin)")
    cls = registry.get(method)
    hyper = cls.Params.parse(param or [])
    settings = CausalSettings(
        max_lag=max_lag,
        alpha=alpha,
        correction=correction,
        seed=run.seed,
        device=resolve_device(run.device, f"--method {method}", cls.cuda),
    )
    chosen = "json" if out.json_mode else output_format
    if not chosen:
        chosen = "text" if (output in (None, "-") and sys.stdout.isatty()) else "json"
    if chosen not in FORMATS:
        raise UsageError(f"--format {output_format}: expected one of {', '.join(FORMATS)}")
    dataset = data.load(data_files, out=out)
    with out.status(f"running {method}"):
        graph = cls(hyper).discover(dataset, settings)
    if chosen == "json":
        text = json.dumps(jsonable(graph.to_json_dict()), indent=2, allow_nan=False) + "\n"
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


def _list(out: Output, registry) -> None:  # type: ignore[no-untyped-def]
    entries = []
    for name in registry.names():
        cls = registry.get(name)
        entries.append({"name": name, "summary": cls.summary, "cuda": cls.cuda, "hyperparameters": cls.Params.describe()})
    if out.json_mode:
        out.emit_json(entries)
        return
    lines = []
    for entry in entries:
        lines.append(f"{entry['name']}: {entry['summary']}")
        for field in entry["hyperparameters"]:
            lines.append(f"    {field['name']} ({field['type']}, default {field['default']}): {field['doc']}")
    out.emit_text("\n".join(lines))


def _table(graph) -> str:  # type: ignore[no-untyped-def]
    significant = sorted((e for e in graph.edges if e.significant), key=lambda e: e.p_value)
    lines = [f"{graph.method}: {len(significant)} significant link(s) at alpha {graph.alpha:g} (max lag {graph.max_lag})"]
    lines.append(f"{'source':>12}  {'target':<12} {'lag':>3}  {'strength':>9}  {'p (adj.)':>9}")
    for e in significant:
        lines.append(f"{e.source:>12}->{e.target:<12} {e.lag:>3}  {e.strength:>9.3g}  {e.p_value:>9.2e}")
    return "\n".join(lines)
