"""Causal discovery: one module per method, FDR, and ``CausalGraph`` with its writers."""

from dynid.causal.fdr import CORRECTIONS, adjust_pvalues
from dynid.causal.graph import CausalGraph, Edge
from dynid.causal.granger import granger

# --method NAME -> function(data, *, max_lag, alpha, ...) -> CausalGraph.
METHODS = {"granger": granger}

__all__ = ["CORRECTIONS", "METHODS", "CausalGraph", "Edge", "adjust_pvalues", "granger"]
