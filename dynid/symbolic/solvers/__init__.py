"""Sparse regression for one equation: y ≈ theta @ coef with few nonzero coefficients.

Every solver takes a plain regression problem — ``theta`` (n, p), the term library evaluated on n
rows, and ``y`` (n,), the target of one equation (a time derivative, or an integrated weak-form
row) — so the strong and the weak formulation share them. Coefficients come back in units of
``y`` per unit of each library column, with exact zeros off the support.

Scale-free thresholds
---------------------
Thresholds act on *normalised* coefficients::

    w_j = coef_j * ||theta[:, j]|| / ||y||        (Euclidean norms over the n rows)

the coefficients of the same regression with every column and the target scaled to unit norm.
|w_j| measures term j's contribution relative to the target, so ``threshold=0.05`` drops terms
that contribute less than about 5 % of the target, whatever the units of the data or the scale of
the library columns. `stlsq`, `sr3`, `stlsq_path` and hence `dynid.symbolic.selection` all use
this one convention; ``ridge`` is likewise applied to the normalised coefficients.

Exact best subsets
------------------
`iter_best_subsets` solves the L0-constrained problem exactly by branch and bound for up to
``MAX_EXACT_P`` (40) columns, and by a documented beam search above that
(`describe_subset_search` says which).

Modules, one per family: ``problem`` (the normalised, reduced least-squares problem and the fit
on a support), ``thresholding`` (STLSQ, its threshold path, SR3), ``best_subsets`` (the lazy,
remembered search of every size) with ``branch_and_bound`` and ``beam``.
"""

from dynid.symbolic.solvers.best_subsets import (
    MAX_EXACT_P,
    MAX_NODES,
    BestSubset,
    describe_subset_search,
    iter_best_subsets,
)
from dynid.symbolic.solvers.problem import RegressionProblem, as_regression, lstsq_on_support
from dynid.symbolic.solvers.thresholding import sr3, stlsq, stlsq_path

__all__ = [
    "MAX_EXACT_P",
    "MAX_NODES",
    "BestSubset",
    "RegressionProblem",
    "as_regression",
    "describe_subset_search",
    "iter_best_subsets",
    "lstsq_on_support",
    "sr3",
    "stlsq",
    "stlsq_path",
]
