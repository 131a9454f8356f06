"""``dynid simulate SYSTEM [--n N] [--dt DT] [--noise S] [--seed S]``: CSV of a known system."""

from typing import Annotated, Optional

import typer

from dynid.cli import completion
from dynid.cli.options import OutputPath, ParamsOption, with_options
from dynid.cli.output import Output


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate)


@with_options()
def simulate(
    system: Annotated[Optional[str], typer.Argument(metavar="SYSTEM", help="System name; --list shows the catalogue.", autocompletion=completion.systems)] = None,
    n: Annotated[Optional[int], typer.Option("--n", help="Number of samples [default: the system's].")] = None,
    dt: Annotated[Optional[float], typer.Option("--dt", help="Sampling interval [default: the system's].")] = None,
    noise: Annotated[float, typer.Option("--noise", help="Observation noise, as a fraction of each variable's standard deviation.")] = 0.0,
    seed: Annotated[int, typer.Option("--seed", help="Random seed for noise and stochastic systems.")] = 0,
    param: ParamsOption = None,
    x0: Annotated[Optional[str], typer.Option("--x0", help="Initial state, comma-separated [default: the system's].")] = None,
    list_systems: Annotated[bool, typer.Option("--list", help="List the systems with their default parameters.")] = False,
    output: OutputPath = None,
    *,
    out: Output,
) -> None:
    """Simulate a catalogued system; CSV with 't', the states and any inputs on stdout (or -o; --json: one JSON document)."""
    from dynid.data.writers import write_table
    from dynid.documents import SIMULATE, tagged
    from dynid.errors import UsageError
    from dynid.systems import SYSTEMS
    from dynid.systems import simulate as run_system

    if list_systems:
        _list(out, SYSTEMS)
        return
    if system is None:
        raise UsageError("give a SYSTEM name (dynid simulate --list shows them)")
    out.check_json_target(output)
    params = _parse_params(param or [])
    initial = None if x0 is None else _parse_numbers(x0, "--x0")
    result = run_system(system, n=n, dt=dt, noise=noise, seed=seed, params=params, x0=initial)
    if out.json_mode:
        body = {"system": system, "variables": list(result.variables), "inputs": list(result.inputs),
                "t": result.t, "x": result.x, "u": result.u}
        out.emit_json(tagged(SIMULATE, body))
        return
    import numpy as np

    values = result.x if result.u is None else np.hstack([result.x, result.u])
    write_table(output or "-", "t", result.t, (*result.variables, *result.inputs), values)


def _parse_params(items: list[str]) -> dict[str, float]:
    from dynid.errors import UsageError

    params = {}
    for item in items:
        key, sep, value = item.partition("=")
        try:
            if not sep:
                raise ValueError
            params[key.strip()] = float(value)
        except ValueError:
            raise UsageError(f"-p {item!r}: expected KEY=NUMBER") from None
    return params


def _parse_numbers(text: str, option: str) -> list[float]:
    from dynid.errors import UsageError

    try:
        return [float(part) for part in text.split(",")]
    except ValueError:
        raise UsageError(f"{option} {text!r}: expected comma-separated numbers") from None


def _list(out: Output, systems) -> None:  # type: ignore[no-untyped-def]
    if out.json_mode:
        from dynid.documents import SYSTEMS, listing

        out.emit_json(
            listing(SYSTEMS, [
                {
                    "name": s.name,
                    "description": s.description,
                    "variables": list(s.variables),
                    "inputs": list(s.inputs),
                    "params": s.params,
                    "dt": s.dt,
                    "n": s.n,
                    "x0": list(s.x0),
                    "kind": s.kind,
                    "reference": s.reference,
                    "lyapunov": list(s.lyapunov),
                }
                for s in systems.values()
            ])
        )
        return
    lines = []
    for s in systems.values():
        params = ", ".join(f"{k}={v:g}" for k, v in s.params.items())
        lines.append(f"{s.name:<18} {s.description}")
        parts = [f"variables {', '.join(s.variables)}", f"dt {s.dt:g}", f"n {s.n}", params]
        if s.lyapunov:
            parts.append(f"Lyapunov exponents {', '.join(f'{v:g}' for v in s.lyapunov)}")
        lines.append(f"{'':<18} " + "; ".join(part for part in parts if part))
    out.emit_text("\n".join(lines))
