"""Causal discovery: one module per method behind the ``CausalMethod`` protocol (``base.py``),
a registry of ``--method`` names, multiple-testing corrections, and ``CausalGraph`` with its
writers."""

from dynid.causal.base import CausalMethod, CausalSettings
from dynid.causal.fdr import CORRECTIONS, adjust_pvalues
from dynid.causal.graph import CausalGraph, Edge


def discover(data, method: str = "granger", params=None, **settings):  # type: ignore[no-untyped-def]
    """Run ``--method`` ``method`` on ``data``; ``params``: ``["key=value", ...]`` or a
    hyperparameter dataclass; ``settings``: max_lag, alpha, correction, seed, device."""
    from dynid.causal import registry
    from dynid.params import Hyperparameters

    cls = registry.get(method)
    hyper = params if isinstance(params, Hyperparameters) else cls.Params.parse(list(params or []))
    return cls(hyper).discover(data, CausalSettings(**settings))


def granger(data, **options):  # type: ignore[no-untyped-def]
    """Conditional VAR Granger causality (see ``dynid.causal.granger.granger``)."""
    from dynid.causal.granger import granger as run

    return run(data, **options)


__all__ = [
    "CORRECTIONS",
    "CausalGraph",
    "CausalMethod",
    "CausalSettings",
    "Edge",
    "adjust_pvalues",
    "discover",
    "granger",
]
