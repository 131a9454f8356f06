"""``dynid models [--json]``: the backends with their hyperparameters, defaults and docs."""

import typer

from dynid.cli.options import with_options
from dynid.cli.output import Output


def register(app: typer.Typer) -> None:
    app.command("models")(models)


@with_options()
def models(*, out: Output) -> None:
    """List the model backends and their hyperparameters (for 'fit -p KEY=VALUE')."""
    from dynid.documents import MODELS
    from dynid.models import registry

    entries = []
    for name in registry.names():
        backend = registry.get(name)
        caps = backend.capabilities
        entries.append(
            {
                "name": name,
                "summary": backend.summary,
                "capabilities": {
                    "uniform_steps": caps.uniform_steps,
                    "inputs": caps.inputs,
                    "nan": caps.nan,
                    "cuda": caps.cuda,
                    "stochastic": caps.stochastic,
                    "conditions": caps.conditions,
                },
                "hyperparameters": backend.Params.describe(),
            }
        )
    out.emit_catalogue(MODELS, entries)
