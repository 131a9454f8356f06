"""Heuristic best subsets for libraries too large for branch and bound: a beam search."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from dynid.symbolic.solvers.problem import REDUNDANT

BEAM_WIDTH = 20


@dataclass(frozen=True)
class Found:
    """What a search of one size reports (``_BranchAndBound`` has the same attributes)."""

    best: tuple[int, ...]
    best_gain: float
    complete: bool = False


def beam_search(gram: np.ndarray, b: np.ndarray, max_k: int, width: int) -> Iterator[Found]:
    """Heuristic best subsets for large p: grow the ``width`` best subsets one column at a time."""
    beam: list[tuple[tuple[int, ...], float]] = [((), 0.0)]
    for _ in range(max_k):
        proposals: dict[frozenset, tuple[tuple[int, ...], float]] = {}
        for columns, gain in beam:
            idx = list(columns)
            if idx:  # regress the chosen columns out of all the others
                proj = np.linalg.lstsq(gram[np.ix_(idx, idx)], gram[idx], rcond=None)[0]
                diag = np.diag(gram) - np.einsum("ij,ij->j", gram[idx], proj)
                h = b - proj.T @ b[idx]
            else:
                diag, h = np.diag(gram).copy(), b.copy()
            single = np.where(diag > REDUNDANT, h * h / np.maximum(diag, REDUNDANT), -np.inf)
            single[idx] = -np.inf
            for j in np.argsort(single)[::-1][:width]:
                if np.isfinite(single[j]):
                    key = frozenset((*columns, int(j)))
                    if key not in proposals or proposals[key][1] < gain + single[j]:
                        proposals[key] = ((*columns, int(j)), gain + float(single[j]))
        if proposals:  # else the rank is exhausted: larger subsets cannot explain more
            beam = sorted(proposals.values(), key=lambda item: -item[1])[:width]
        yield Found(*beam[0])
