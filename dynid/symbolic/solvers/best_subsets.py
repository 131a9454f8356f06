"""Best least-squares subsets of every size, searched lazily and remembered (``iter_best_subsets``).

p <= ``MAX_EXACT_P``: exact, by depth-first branch and bound on the normal equations (Gram
matrix of the normalised columns, ``branch_and_bound``). A node fixes a set F of chosen columns
and a set C of candidates; the fit on F ∪ C bounds from below the residual of every subset of
it, so the node is dropped when that bound cannot beat the best k-subset found so far. The node
branches on the candidate that helps most on its own (include it first — the first leaf is the
greedy forward solution, a good incumbent — then exclude it); choosing a column is a sweep of
the Gram matrix, and once at most a few hundred completions remain they are all scored in one
batched solve. The search of all sizes together visits at most ``MAX_NODES`` nodes (sparse
problems need tens to hundreds; dense, strongly correlated ones thousands per size); past that,
each remaining search only dives greedily to one subset, and the sizes concerned are marked not
exact.

p > ``MAX_EXACT_P``: a beam search (``beam``: keep the ``BEAM_WIDTH`` best subsets of each size,
grow each by every column) — a heuristic, reported as such by ``describe_subset_search``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from dynid.symbolic.cache import CACHE
from dynid.symbolic.solvers.beam import BEAM_WIDTH, beam_search
from dynid.symbolic.solvers.branch_and_bound import branch_and_bound_sizes
from dynid.symbolic.solvers.problem import RegressionProblem

MAX_EXACT_P = 40
MAX_NODES = 5_000


@dataclass(frozen=True, eq=False)
class BestSubset:
    """The best subset found of one size: (p,) bool ``support``, ``rss`` in units of ||y||^2,
    ``exact`` when proved optimal (see the module docstring)."""

    support: np.ndarray
    rss: float
    exact: bool


def describe_subset_search(
    p: int, exact: bool, max_nodes: int = MAX_NODES, max_exact_p: int = MAX_EXACT_P
) -> str:
    """One line for the output saying how best subsets of a p-term library were found."""
    if p > max_exact_p:
        return f"beam search of width {BEAM_WIDTH} (heuristic, not proved optimal: {p} terms)"
    if exact:
        return "exact branch and bound"
    return f"branch and bound out of its {max_nodes}-node budget (larger sizes not proved optimal)"


def iter_best_subsets(
    problem: RegressionProblem,
    max_k: int,
    *,
    max_nodes: int = MAX_NODES,
    max_exact_p: int = MAX_EXACT_P,
) -> Iterator[BestSubset]:
    """`BestSubset` of sizes 1, 2, ..., min(max_k, p), computed lazily one size at a time.

    Searches are remembered by their problem (Gram matrix, b and ||y||^2) in ``cache.CACHE``
    and resumed where they stopped: model selection asks for the same library on the same rows
    again (a second pass with another effective row count, refinement rounds that leave the
    constants unchanged), and the exact search is the expensive part. Same answers, less time.
    """
    max_k = min(int(max_k), problem.p)
    key = hashlib.blake2b(
        problem.gram.tobytes() + problem.b.tobytes() + repr((problem.total, max_nodes, max_exact_p)).encode()
    ).digest()
    done, pending = CACHE.get(
        "search", key, lambda: ([], _searches(problem, max_nodes, max_exact_p))
    )
    for k in range(max_k):
        if k == len(done):
            found = next(pending, None)
            if found is None:
                return
            done.append(found)
        yield done[k]


def _searches(problem: RegressionProblem, max_nodes: int, max_exact_p: int) -> Iterator[BestSubset]:
    p = problem.p
    if p > max_exact_p:
        found = beam_search(problem.gram, problem.b, p, BEAM_WIDTH)
    else:
        found = branch_and_bound_sizes(problem.gram, problem.b, p, max_nodes)
    for search in found:
        support = np.zeros(p, dtype=bool)
        support[list(search.best)] = True
        support.setflags(write=False)  # shared by every caller of a remembered search
        yield BestSubset(support, problem.total - search.best_gain, search.complete)
