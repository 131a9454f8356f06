"""Causal discovery: one module per method behind the ``CausalMethod`` protocol (``base.py``),
a registry of ``--method`` names, multiple-testing corrections, and ``CausalGraph`` with its
writers."""

from dynid.causal.base import CausalMethod, CausalSettings
from dynid.causal.fdr import CORRECTIONS, adjust_pvalues
from dynid.causal.graph import CausalGraph, Edge

# Imported eagerly on purpose: binding the name here after the submodule has loaded keeps
# ``dynid.causal.granger`` the function, whatever imports the submodule later.
from dynid.causal.granger import granger  # noqa: E402


def discover(data, method: str = "auto", params=None, **settings):  # type: ignore[no-untyped-def]
    """Run ``--method`` ``method`` on ``data``; ``params``: ``["key=value", ...]`` or a
    hyperparameter dataclass; ``settings``: max_lag, alpha, correction, seed, device."""
    from dynid.causal import registry
    from dynid.params import Hyperparameters

    cls = registry.get(method)
    hyper = params if isinstance(params, Hyperparameters) else cls.Params.parse(list(params or []))
    return cls(hyper).discover(data, CausalSettings(**settings))


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
