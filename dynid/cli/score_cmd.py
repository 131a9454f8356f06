"""``dynid score MODEL... DATA [--horizon N] [--starts K]``: multi-step rollout errors.

One model: its scores. Several: one row per model, on the same rollout starts, best first.
"""

from typing import Annotated, Any, Optional

import typer

from dynid.cli.each import EachSpec
from dynid.cli.options import DataOptions, with_options
from dynid.cli.output import Output


def register(app: typer.Typer) -> None:
    app.command("score")(score)


@with_options("data", "batch",
              each=EachSpec("score", data="paths", output=None, leading=1, model_file=True))
def score(
    paths: Annotated[list[str], typer.Argument(metavar="MODEL... DATA", help="One or more .dynid model files ('-' = one model on stdin), then the data to roll out on ('-' = stdin); with --each, one MODEL, then each DATA is a job.")],
    horizon: Annotated[int, typer.Option("--horizon", "-n", min=1, help="Steps per rollout.")] = 50,
    starts: Annotated[int, typer.Option("--starts", min=1, help="Number of rollout start points, spread evenly over DATA.")] = 20,
    lyapunov: Annotated[Optional[float], typer.Option("--lyapunov", help="Largest Lyapunov exponent (1/time): also report VPT in Lyapunov times.")] = None,
    *,
    data: DataOptions,
    out: Output,
) -> None:
    """Score models by multi-step rollouts: RMSE, NRMSE and valid prediction time."""
    from dynid import api
    from dynid.cli.common import load_model_argument, model_data_options
    from dynid.errors import UsageError

    if len(paths) < 2:
        raise UsageError("give MODEL... DATA: at least one model file and the data")
    *model_paths, data_file = paths
    results = []
    loaded_data: dict[Any, Any] = {}
    for path in model_paths:
        model = load_model_argument(path, data_file, *(p for p in model_paths if p is not path)).model
        options = model_data_options(data, model)
        if options not in loaded_data:  # stdin can be read once: models with the same columns share it
            if data_file == "-" and loaded_data:
                raise UsageError("models with different variables need DATA as a file, not stdin")
            loaded_data[options] = options.load([data_file], out=out)
        result = api.score(model, loaded_data[options], horizon=horizon, starts=starts, lyapunov=lyapunov)
        results.append({"kind": result["kind"], "model": path, "backend": model.name, **result})
    if len(results) == 1:
        if out.json_mode:
            out.emit_json(results[0])
        else:
            out.emit_text(_text(results[0], lyapunov))
        return
    results.sort(key=_rank)
    if out.json_mode:
        from dynid.documents import SCORES, listing

        out.emit_json(listing(SCORES, [{k: v for k, v in r.items() if k != "kind"} for r in results]))
    else:
        out.emit_text(_table(results, lyapunov))


def _rank(row: dict[str, Any]) -> tuple[float, float]:
    """Diverged models last; then by NRMSE, then by longer valid prediction time."""
    nrmse = row["nrmse"]
    return (float("inf") if nrmse is None else nrmse, -row["valid_prediction_time"])


def _text(result: dict[str, Any], lyapunov: Optional[float]) -> str:
    # ">=": some rollouts were still valid at the horizon, so the mean is a lower bound.
    bound = ">= " if result["valid_prediction_time_censored"] else ""
    lines = [
        f"rollouts: {result['starts']} x {result['horizon']} steps (dt {result['dt']:g})",
        f"rmse:     {_number(result['rmse'])}",
        f"nrmse:    {_number(result['nrmse'])}",
        f"valid prediction time: {bound}{result['valid_prediction_time']:.6g}",
    ]
    if lyapunov is not None:
        lines.append(f"valid prediction time (Lyapunov times): {bound}{result['valid_prediction_time_lyapunov']:.4g}")
    if result["diverged_rollouts"]:
        lines.append(
            f"diverged: {result['diverged_rollouts']} of {result['starts']} rollouts "
            f"(first at step {result['first_divergence_step']}); errors are undefined"
        )
    return "\n".join(lines)


def _table(results: list[dict[str, Any]], lyapunov: Optional[float]) -> str:
    header = ["model", "backend", "rmse", "nrmse", "VPT"] + (["VPT (Lyapunov)"] if lyapunov else []) + ["diverged"]
    rows = []
    for r in results:
        bound = ">= " if r["valid_prediction_time_censored"] else ""
        row = [r["model"], r["backend"], _number(r["rmse"]), _number(r["nrmse"]),
               f"{bound}{r['valid_prediction_time']:.4g}"]
        if lyapunov:
            row.append(f"{bound}{r['valid_prediction_time_lyapunov']:.4g}")
        row.append(f"{r['diverged_rollouts']}/{r['starts']}")
        rows.append(row)
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows)]
    first = results[0]
    lines = [f"rollouts: {first['starts']} x {first['horizon']} steps (dt {first['dt']:g}), best first"]
    lines += ["  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip() for line in [header, *rows]]
    return "\n".join(lines)


def _number(value: Optional[float]) -> str:
    return "diverged" if value is None else f"{value:.6g}"
