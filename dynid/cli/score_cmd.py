"""``dynid score MODEL DATA [--horizon N] [--starts K]``: multi-step rollout errors."""

from typing import Annotated, Optional

import typer

from dynid.cli.options import DataOptions, with_options
from dynid.cli.output import Output


def register(app: typer.Typer) -> None:
    app.command("score")(score)


@with_options("data")
def score(
    model_path: Annotated[str, typer.Argument(metavar="MODEL", help="A .dynid model file ('-' = stdin).")],
    data_file: Annotated[str, typer.Argument(metavar="DATA", help="Data to roll out on ('-' = stdin).")],
    horizon: Annotated[int, typer.Option("--horizon", "-n", min=1, help="Steps per rollout.")] = 50,
    starts: Annotated[int, typer.Option("--starts", min=1, help="Number of rollout start points, spread evenly over DATA.")] = 20,
    lyapunov: Annotated[Optional[float], typer.Option("--lyapunov", help="Largest Lyapunov exponent (1/time): also report VPT in Lyapunov times.")] = None,
    *,
    data: DataOptions,
    out: Output,
) -> None:
    """Score a model by multi-step rollouts: RMSE, NRMSE and valid prediction time."""
    from dynid import api
    from dynid.cli.common import load_model_argument, model_data_options

    model = load_model_argument(model_path, data_file).model
    dataset = model_data_options(data, model).load([data_file], out=out)
    result = api.score(model, dataset, horizon=horizon, starts=starts, lyapunov=lyapunov)
    if out.json_mode:
        out.emit_json(result)
        return
    lines = [
        f"rollouts: {result['starts']} x {result['horizon']} steps (dt {result['dt']:g})",
        f"rmse:     {result['rmse']:.6g}",
        f"nrmse:    {result['nrmse']:.6g}",
        f"valid prediction time: {result['valid_prediction_time']:.6g}",
    ]
    if lyapunov is not None:
        lines.append(f"valid prediction time (Lyapunov times): {result['valid_prediction_time_lyapunov']:.4g}")
    out.emit_text("\n".join(lines))
