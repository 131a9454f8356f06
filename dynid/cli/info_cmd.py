"""``dynid info MODEL [--json]``: what a model file holds."""

from typing import Annotated

import typer

from dynid.cli.options import with_options
from dynid.cli.output import Output


def register(app: typer.Typer) -> None:
    app.command("info")(info)


@with_options()
def info(
    model_path: Annotated[str, typer.Argument(metavar="MODEL", help="A .dynid model file ('-' = stdin).")],
    precision: Annotated[int, typer.Option("--precision", help="Significant digits of the coefficients shown in equations.")] = 6,
    *,
    out: Output,
) -> None:
    """Show a model file's metadata: backend, hyperparameters, variables, data fingerprint, metrics."""
    from dynid import api
    from dynid.modelfile import load_model

    loaded = load_model(model_path)
    meta = api.model_info(loaded)
    if out.json_mode:
        out.emit_json(meta)
        return
    lines = [f"{'<stdin>' if model_path == '-' else model_path}: dynid model ({meta['backend']}), format {meta['format_version']}, written by dynid {meta['dynid_version']} at {meta['created_utc']}"]
    lines.append(f"variables: {', '.join(meta['variables'])}")
    if meta["inputs"]:
        lines.append(f"inputs:    {', '.join(meta['inputs'])}")
    lines.append(f"dt: {meta['dt']:g}; trained on {meta['n_samples']} samples in {meta['n_trials']} trial(s) from {meta.get('data_source', '?')}")
    lines.append(f"data sha256: {meta['data_fingerprint']}")
    lines.append(f"seed: {meta['seed']}; device: {meta['device']}; fit: {meta['fit_seconds']:.3g} s")
    lines.append("hyperparameters: " + ", ".join(f"{k}={v}" for k, v in meta["hyperparameters"].items()))
    for name, value in meta["metrics"].items():
        text = str(value)
        lines.append(f"metric {name}: {text if len(text) <= 160 else text[:160] + ' ... (--json shows all)'}")
    # dx/dt for ODEs, x[k+1] for maps, coefficients to --precision digits.
    lines += loaded.model.equation_lines(precision) or []
    lines.append("arrays: " + ", ".join(f"{k}{tuple(v)}" for k, v in meta["arrays"].items()))
    out.emit_text("\n".join(lines))
