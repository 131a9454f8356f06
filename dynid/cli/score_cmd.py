"""``dynid score MODEL... DATA [--horizon N] [--starts K]``: multi-step rollout errors, and the
geometry of a long free run (D_stsp, D_H) and, with --estimate-lyapunov, the model's Lyapunov
spectrum.

One model: its scores. Several: one row per model, on the same rollout starts, best first;
models of different variables ranked apart (one table per set of variables).
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
    starts: Annotated[int, typer.Option("--starts", min=1, help="Number of rollout start points, spread evenly over DATA; at most one per sample that has the history and horizon inside its trial (the output says how many were used).")] = 20,
    lyapunov: Annotated[Optional[float], typer.Option("--lyapunov", help="Largest Lyapunov exponent (1/time, positive): also report VPT in Lyapunov times.")] = None,
    free_run: Annotated[Optional[int], typer.Option("--free-run", min=0, help="Samples in the free run from the start of DATA that D_stsp and D_H compare with DATA [default: max(samples in DATA, 10000); models with inputs: as far as the first trial's inputs go, beyond which they would be held at their last value]; 0 = none.")] = None,
    estimate_lyapunov: Annotated[bool, typer.Option("--estimate-lyapunov", help="Also estimate the model's Lyapunov spectrum (QR method on its own orbit); VPT in Lyapunov times then uses its largest exponent unless --lyapunov is given.")] = False,
    lyapunov_steps: Annotated[int, typer.Option("--lyapunov-steps", min=100, help="Samples of the model's orbit that --estimate-lyapunov averages over (after 2000 transient samples).")] = 20000,
    allow_escape: Annotated[bool, typer.Option("--allow-escape", help="Score rollouts and the free run even where they leave the training data's range widened by that range on each side (by default they have diverged there: counted, their errors null), for systems that grow, are unstable or are scored on data beyond that range. Non-finite values diverge still.")] = False,
    *,
    data: DataOptions,
    out: Output,
) -> None:
    """Score models: rollout errors, valid prediction time, and a long free run's D_stsp and D_H against DATA.

    VPT: the first time the RMS over variables of the error divided by each variable's standard deviation in DATA exceeds 0.4, averaged over the rollouts (">=" when some rollouts were still valid at the horizon).

    A rollout that leaves the finite numbers, or the training data's range widened by that range on each side (a path forecast refuses unless --allow-escape), has diverged from that step on: it is counted ("diverged_rollouts", of which "escaped_rollouts" by the range), it ends its valid prediction time, and the errors it enters are undefined (null in JSON); a free run that does has no D_stsp or D_H. With --allow-escape, as forecast's, a rollout diverges only where it leaves the finite numbers ("allow_escape": true in JSON), and the free run where it leaves those or DATA's range widened alike (D_stsp bins on DATA's range and drops what lies beyond).

    Missing values in DATA: models that take them (Kalman-type, slds) see the gaps as they are, others NaN-free segments (or --nan). A missing target is skipped, not an error: the errors are over the observed targets, VPT judges only the steps with one, and "missing_targets" counts those skipped.

    D_stsp (state-space divergence): KL(p_data || p_model) between histograms of DATA and of the free run, 30 bins per variable on [min - 0.1 sd, max + 0.1 sd] of DATA, each smoothed as (count + 1e-5) / (total + 1e-5 * cells); with more than 5 variables, between Gaussian mixtures (unit variance on standardised data) centred on 10,000 samples of each, by Monte Carlo. 0 for identical distributions; two independent 50,000-sample runs of Lorenz-63 differ by about 0.1, two 10,000-sample runs by 0.4 to 1.5.

    D_H (power-spectrum distance): the mean over variables of the Hellinger distance between the power spectra of DATA's longest trial and of the free run, each variable standardised, smoothed by a Gaussian of 20 frequency bins and normalised; in [0, 1], 0 for equal spectra; undefined (null) when that trial has fewer than 320 samples, whose frequency grid the smoothing would flatten.

    --estimate-lyapunov: the QR (Benettin) method along the model's own orbit from the start of DATA, with its analytic Jacobians where the backend has them (esn), else forward differences of its map on its state (the last samples it forecasts from); as many exponents as variables, largest first, in 1/time units, with standard errors and the Kaplan-Yorke dimension.
    """
    from dynid import api
    from dynid.cli.common import check_time_unit, load_for_model, load_model_argument, model_data_options
    from dynid.errors import UsageError

    if len(paths) < 2:
        raise UsageError("give MODEL... DATA: at least one model file and the data")
    *model_paths, data_file = paths
    results = []
    loaded_data: dict[Any, Any] = {}
    for path in model_paths:
        loaded = load_model_argument(path, data_file, *(p for p in model_paths if p is not path))
        model = loaded.model
        options = model_data_options(data, model)
        # Models that take missing values see DATA's gaps as they are (missing targets are
        # skipped in the scores); others, NaN-free segments unless --nan says otherwise.
        key = (options, "keep" if model.capabilities.nan else "split")
        if key not in loaded_data:  # stdin can be read once: models with the same columns share it
            if data_file == "-" and loaded_data:
                raise UsageError("models with different variables (or handling of missing values) need DATA as a file, not stdin")
            loaded_data[key] = load_for_model(path, model, data, [data_file], nan_default=key[1], out=out)
        check_time_unit(path, loaded, loaded_data[key])
        result = api.score(model, loaded_data[key], horizon=horizon, starts=starts, lyapunov=lyapunov,
                           free_run=free_run, estimate_lyapunov=estimate_lyapunov,
                           lyapunov_steps=lyapunov_steps, allow_escape=allow_escape)
        results.append({"kind": result["kind"], "model": path, "backend": model.name,
                        "variables": list(model.variables_), **result})
    if len(results) == 1:
        if out.json_mode:
            out.emit_json(results[0])
        else:
            out.emit_text(_text(results[0]))
        return
    groups = _ranked_groups(results)
    if len(groups) > 1:
        out.info("the models have different variables: ranked apart, one set of variables at a time "
                 "(errors over other variables are not comparable)")
    if out.json_mode:
        from dynid.documents import SCORES, listing

        out.emit_json(listing(SCORES, [{**{k: v for k, v in r.items() if k != "kind"}, "rank": rank}
                                       for group in groups for rank, r in enumerate(group, 1)]))
    else:
        out.emit_text("\n\n".join(_table(group, named=len(groups) > 1) for group in groups))


def _ranked_groups(results: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The rows grouped by the models' variables (in the order each set first appears), each
    group best first (``_rank``): NRMSE is normalised per variable and averaged over the
    variables, so it ranks only models of the same variables."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for row in results:
        groups.setdefault(tuple(row["variables"]), []).append(row)
    return [sorted(group, key=_rank) for group in groups.values()]


def _rank(row: dict[str, Any]) -> tuple[float, float]:
    """Diverged models last; then by NRMSE, then by longer valid prediction time."""
    nrmse = row["nrmse"]
    return (float("inf") if nrmse is None else nrmse, -row["valid_prediction_time"])


def _text(result: dict[str, Any]) -> str:
    # ">=": some rollouts were still valid at the horizon, so the mean is a lower bound.
    bound = ">= " if result["valid_prediction_time_censored"] else ""
    lines = [
        f"rollouts: {result['starts']} x {result['horizon']} steps (dt {result['dt']:g})",
        f"rmse:     {_number(result['rmse'])}",
        f"nrmse:    {_number(result['nrmse'])}",
        f"valid prediction time: {bound}{result['valid_prediction_time']:.6g}",
    ]
    if "valid_prediction_time_lyapunov" in result:
        lines.append(f"valid prediction time (Lyapunov times): {bound}{result['valid_prediction_time_lyapunov']:.4g}")
    if result["diverged_rollouts"]:
        escaped = (f"; {result['escaped_rollouts']} left the training data's range widened by that "
                   "range on each side" if result["escaped_rollouts"] else "")
        lines.append(
            f"diverged: {result['diverged_rollouts']} of {result['starts']} rollouts "
            f"(first at step {result['first_divergence_step']}{escaped}); errors are undefined"
        )
    if "free_run_steps" in result:
        lines.append(f"free run: {result['free_run_steps']} steps; d_stsp {_measure(result, 'd_stsp')}, "
                     f"d_h {_measure(result, 'd_h')}")
        if result["free_run_diverged_step"] is not None:
            # --allow-escape bounds the free run by DATA's range, where D_stsp and D_H see it.
            whose = "DATA's" if result["allow_escape"] else "the training data's"
            where = f" (left {whose} range)" if result["free_run_escaped"] else ""
            lines.append(f"the free run diverged at step {result['free_run_diverged_step']}{where}")
    if "lyapunov_state_dimension" in result:
        exponents = result["lyapunov_exponents"]
        if exponents is None:
            lines.append(f"Lyapunov exponents: undefined ({result['lyapunov_error']})")
        else:
            pairs = ", ".join(f"{value:.4g} ± {error:.2g}"
                              for value, error in zip(exponents, result["lyapunov_standard_error"]))
            lines.append(f"Lyapunov exponents (1/time): {pairs}; Kaplan-Yorke dimension "
                         f"{result['kaplan_yorke_dimension']:.3g}")
    return "\n".join(lines)


def _table(results: list[dict[str, Any]], named: bool = False) -> str:
    """The rows as a table, best first; ``named``: its first line names the variables."""
    in_lyapunov_times = all("valid_prediction_time_lyapunov" in r for r in results)
    free_run = all("free_run_steps" in r for r in results)
    estimated = all("lyapunov_state_dimension" in r for r in results)
    header = (["model", "backend", "rmse", "nrmse", "VPT"] + (["VPT (Lyapunov)"] if in_lyapunov_times else [])
              + (["d_stsp", "d_h"] if free_run else []) + (["lambda_1"] if estimated else []) + ["diverged"])
    rows = []
    for r in results:
        bound = ">= " if r["valid_prediction_time_censored"] else ""
        row = [r["model"], r["backend"], _number(r["rmse"]), _number(r["nrmse"]),
               f"{bound}{r['valid_prediction_time']:.4g}"]
        if in_lyapunov_times:
            row.append(f"{bound}{r['valid_prediction_time_lyapunov']:.4g}")
        if free_run:
            row += [_measure(r, "d_stsp"), _measure(r, "d_h")]
        if estimated:
            row.append(_number(r["lyapunov_exponents"][0] if r["lyapunov_exponents"] else None))
        row.append(f"{r['diverged_rollouts']}/{r['starts']}")
        rows.append(row)
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows)]
    first = results[0]
    lines = [f"models of {', '.join(first['variables'])}:"] if named else []
    lines.append(f"rollouts: {first['starts']} x {first['horizon']} steps (dt {first['dt']:g}), best first")
    lines += ["  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip() for line in [header, *rows]]
    return "\n".join(lines)


def _number(value: Optional[float]) -> str:
    return "diverged" if value is None else f"{value:.6g}"


def _measure(result: dict[str, Any], name: str) -> str:
    """A free-run measure: null is "diverged" where the run diverged, else "undefined" (d_h on
    irregular or short data, d_stsp without complete samples)."""
    if result[name] is None and result["free_run_diverged_step"] is None:
        return "undefined"
    return _number(result[name])
