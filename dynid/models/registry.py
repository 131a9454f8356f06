"""Backend names to classes. Modules are imported only when a backend is asked for, so
listing names stays cheap and a heavy backend costs nothing until used."""

from __future__ import annotations

import importlib

from dynid.errors import UsageError
from dynid.models.base import Backend

# name -> "module:Class". Adding a backend is one module plus one line here.
_BACKENDS: dict[str, str] = {
    "dmd": "dynid.models.dmd:DMD",
    "var": "dynid.models.var:VAR",
    "sindy": "dynid.models.sindy:SINDy",
    "symbolic": "dynid.models.symbolic:Symbolic",
    "lds": "dynid.models.latent.lds:LDS",
    "ctlds": "dynid.models.latent.ctlds:CTLDS",
    "esn": "dynid.models.reservoir.esn:ESN",
    "ngrc": "dynid.models.reservoir.ngrc:NGRC",
    "hmm": "dynid.models.latent.hmm:HMM",
    "arhmm": "dynid.models.latent.hmm:ARHMM",
    "slds": "dynid.models.latent.slds:SLDS",
    "clds": "dynid.models.latent.clds:CLDS",
    "koopman": "dynid.models.operator.koopman:Koopman",
    "edm": "dynid.models.edm:EDM",
    "signature": "dynid.models.signature:Signature",
    "ltc": "dynid.models.ltc:LTC",
    "plrnn": "dynid.models.rnn.plrnn:PLRNN",
    "alrnn": "dynid.models.rnn.alrnn:ALRNN",
    "node": "dynid.models.continuous.node:NODE",
    "phnn": "dynid.models.continuous.phnn:PHNN",
    "hnn": "dynid.models.continuous.hnn:HNN",
    "gpsde": "dynid.models.sde.gpsde:GPSDE",
}


def names() -> list[str]:
    """Registered backend names, in listing order."""
    return list(_BACKENDS)


def get(name: str) -> type[Backend]:
    """The backend class called ``name``; UsageError listing the valid names otherwise."""
    try:
        target = _BACKENDS[name]
    except KeyError:
        raise UsageError(
            f"--model {name}: unknown model; valid models: {', '.join(_BACKENDS)}"
        ) from None
    module_name, _, class_name = target.partition(":")
    return getattr(importlib.import_module(module_name), class_name)
