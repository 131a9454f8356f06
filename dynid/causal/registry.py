"""``--method`` names to causal-method classes, imported only when asked for."""

from __future__ import annotations

import importlib

from dynid.causal.base import CausalMethod
from dynid.errors import UsageError

# name -> "module:Class". Adding a method is one module plus one line here.
_METHODS: dict[str, str] = {
    "auto": "dynid.causal.auto:Auto",
    "granger": "dynid.causal.granger:Granger",
    "pcmci": "dynid.causal.pcmci:PCMCI",
    "pcmciplus": "dynid.causal.pcmciplus:PCMCIPlus",
    "ccm": "dynid.causal.ccm:CCM",
    "te": "dynid.causal.te:TransferEntropy",
    "neural": "dynid.causal.neural:NeuralGranger",
    "dynamic": "dynid.causal.dynamic:DynamicCausality",
    "crosspred": "dynid.causal.crosspred:CrossPrediction",
    "sindy": "dynid.causal.sindy:SparseEquations",
    "consensus": "dynid.causal.consensus:Consensus",
}

# Methods that choose another method from the data: no method of their own, so nothing to
# combine (consensus members) or to run on sliding windows (dynamic's base).
ROUTERS: tuple[str, ...] = ("auto",)


def names() -> list[str]:
    return list(_METHODS)


def get(name: str) -> type[CausalMethod]:
    """The method class called ``name``; UsageError listing the valid names otherwise."""
    try:
        target = _METHODS[name]
    except KeyError:
        raise UsageError(f"--method {name}: unknown method; valid methods: {', '.join(_METHODS)}") from None
    module_name, _, class_name = target.partition(":")
    return getattr(importlib.import_module(module_name), class_name)
