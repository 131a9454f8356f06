"""``dynid score MODEL DATA [--horizon N] [--starts K]``: multi-step rollout errors."""

from typing import Annotated, Optional

import typer

from dynid.cli.options import DataOptions, with_options
from dynid.cli.output import Output


def register(app: typer.Typer) -> None:
    app.command("score")(score)


@with_options("data")
def score(
    model_path: Annotated[str, typer.Argument(metavar="MODEL", help="A .dynid model file.")],
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
    from dynid.cli.common import model_data_options
    from dynid.modelfile import load_model

    model = load_model(model_path).model
    dataset = model_data_options(data, model).load([data_file], out=out)
    result = api.score(model, dataset, horizon=horizon, starts=starts, lyapunov=lyapunov)
    if out.json_mode:
        out.emit_json(result)
        return
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
    out.emit_text("\n".join(lines))


def _number(value: Optional[float]) -> str:
    return "undefined (diverged)" if value is None else f"{value:.6g}"
