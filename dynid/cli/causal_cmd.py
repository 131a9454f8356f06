"""``dynid discover-causal DATA --method NAME [--max-lag L] [--alpha A]``: who drives whom."""

from typing import Annotated

import typer

from dynid.cli.options import DataOptions, OutputPath, with_options
from dynid.cli.output import Output

METHODS = ("granger",)
FORMATS = ("json", "csv", "dot", "graphml", "text")


def register(app: typer.Typer) -> None:
    app.command("discover-causal")(discover_causal)


@with_options("data")
def discover_causal(
    data_files: Annotated[list[str], typer.Argument(metavar="DATA", help="Data files or '-' for stdin.")],
    method: Annotated[str, typer.Option("--method", help="Method: granger (conditional VAR Granger F-tests).")] = "granger",
    max_lag: Annotated[int, typer.Option("--max-lag", help="Largest lag tested (samples).")] = 5,
    alpha: Annotated[float, typer.Option("--alpha", help="Significance level after correction.")] = 0.05,
    correction: Annotated[str, typer.Option("--correction", help="Multiple-testing correction: bh (Benjamini-Hochberg FDR), bonferroni or none.")] = "bh",
    output_format: Annotated[str, typer.Option("--format", help="json, csv (edge list), dot, graphml or text [default: text on a terminal, else json].")] = "",
    output: OutputPath = None,
    *,
    data: DataOptions,
    out: Output,
) -> None:
    """Discover which variable drives which, at which lag."""
    import json
    import sys

    from dynid.atomic import write_text
    from dynid.causal import granger
    from dynid.errors import UsageError
    from dynid.jsonable import jsonable

    if method not in METHODS:
        raise UsageError(f"--method {method}: expected one of {', '.join(METHODS)}")
    chosen = "json" if out.json_mode else output_format
    if not chosen:
        chosen = "text" if (output in (None, "-") and sys.stdout.isatty()) else "json"
    if chosen not in FORMATS:
        raise UsageError(f"--format {output_format}: expected one of {', '.join(FORMATS)}")
    dataset = data.load(data_files, out=out)
    graph = granger(dataset, max_lag=max_lag, alpha=alpha, correction=correction)
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


def _table(graph) -> str:  # type: ignore[no-untyped-def]
    significant = sorted((e for e in graph.edges if e.significant), key=lambda e: e.p_value)
    lines = [f"{graph.method}: {len(significant)} significant link(s) at alpha {graph.alpha:g} (max lag {graph.max_lag})"]
    lines.append(f"{'source':>12}  {'target':<12} {'lag':>3}  {'strength':>9}  {'p (adj.)':>9}")
    for e in significant:
        lines.append(f"{e.source:>12}->{e.target:<12} {e.lag:>3}  {e.strength:>9.3g}  {e.p_value:>9.2e}")
    return "\n".join(lines)
