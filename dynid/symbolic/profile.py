"""One term per family, at its best constant: profiling shapes with a constant inside, per equation.

A library may list alternatives of one *family* (``Term.family``): the activation shapes
v/(c + v), v**2/(c**2 + v**2), ..., v**10/(c**10 + v**10) of one coordinate, say. Handing them all
to best subsets lets near-duplicate columns combine into anything; and a term evaluated at one
starting c can be far from the data's constant (with a Hill exponent of 10, c off by 30 % is a
different function), so the selection would never pick it and the refinement never start.

So, per equation, every family is replaced by its single best member at its best constant: the
one that, added to the library's family-free columns, leaves the least residual on the training
rows (a profile likelihood over the exponent and c). c is searched on a log grid over the
term's bounds (or x 1/64 .. 64 around its start), in steps of a factor 2 in c**n, then by a
bounded scalar search between the best grid points' neighbours. Families are placed by forward
selection, then backfitted. The selection then sees one column per family, and
``refine.refine_constants`` polishes c jointly with the other selected terms.

The grid columns do not depend on the equation, so they are evaluated and projected once per
library (``FamilyProfile``); choosing per equation costs a few dot products per grid column.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from dynid.symbolic.library import Term, TermSet

#: Multiples of a term's starting constant tried on the grid.
GRID_FACTORS = 2.0 ** np.arange(-6, 7)
#: Grid peaks of a family refined before they are compared.
POLISHED = 4
#: Sweeps of backfitting over the families at most.
BACKFIT_SWEEPS = 3
#: Relative tolerance (in log c) of the scalar search between grid points.
SEARCH_TOLERANCE = 1e-6

# (termset, term indices, constants) -> those terms on the regression rows, (N, len(indices)).
Evaluate = Callable[[TermSet, list[int], dict[str, float]], np.ndarray]


@dataclass
class _Option:
    """One grid point of a family: the terms ``indices`` (one, or several sharing constant
    ``name``, such as the activation and repression of one exponent) with ``name`` at
    ``value`` (name None: a member without exactly one constant, taken as it is). Scored by
    its first term."""

    indices: list[int]
    name: str | None
    value: float


class FamilyProfile:
    """The grid of every family member's column, on the training rows, with the span of the
    library's family-free columns projected out.

    termset: the library; theta (N, p): its columns on all regression rows; usable (p,): finite
    columns; train (N,) bool: the training rows; evaluate: how to put a term at other constants
    on the regression rows (identify passes the strong- or weak-form evaluation).
    """

    def __init__(
        self,
        termset: TermSet,
        theta: np.ndarray,
        usable: np.ndarray,
        train: np.ndarray,
        evaluate: Evaluate,
    ) -> None:
        self.termset, self.train, self.evaluate = termset, train, evaluate
        members: dict[str, dict[str, list[int]]] = {}  # family -> shared constant -> terms
        for k, term in enumerate(termset.terms):
            if term.family:
                key = term.constant_names[0] if len(term.constants) == 1 else f"term {k}"
                members.setdefault(term.family, {}).setdefault(key, []).append(k)
        self.base = [int(k) for k in np.flatnonzero(usable) if not termset.terms[k].family]
        self.basis = _orthonormal_basis(theta[train][:, self.base])
        self.theta_train = theta[train]
        self.families: list[tuple[list[_Option], np.ndarray]] = []
        for groups in members.values():
            options, columns = [], []
            for indices in groups.values():
                for option, column in self._grid(indices, theta, usable):
                    options.append(option)
                    columns.append(column)
            if options:
                self.families.append((options, self._project(np.column_stack(columns))))

    def _grid(self, indices: list[int], theta: np.ndarray, usable: np.ndarray):
        term = self.termset.terms[indices[0]]
        if len(term.constants) != 1:
            if usable[indices[0]]:
                yield _Option(indices, None, np.nan), theta[self.train, indices[0]]
            return
        name, start = term.constants[0]
        for value in _grid_values(term, start):
            column = self._column(indices[0], name, float(value))
            if np.all(np.isfinite(column)):
                yield _Option(indices, name, float(value)), column

    def _column(self, index: int, name: str, value: float) -> np.ndarray:
        return self.evaluate(self.termset, [index], {name: value})[self.train, 0]

    def _project(self, columns: np.ndarray) -> np.ndarray:
        return _minus(columns, self.basis)

    def choose(self, y: np.ndarray) -> tuple[TermSet, list[int], list[int]]:
        """The library for targets ``y`` (N,) (all rows): family-free terms plus each family's
        best member(s) at the best constant, in library order. Returns (termset, for each of
        its terms the library index it came from, the positions of the chosen family terms).

        Families are chosen by backfitting: each one given the others' current choices (an
        equation with a term of x0 and one of x1 needs both to place either), until no choice
        changes or after ``BACKFIT_SWEEPS`` sweeps."""
        target = self._project(np.ravel(y)[self.train])
        picks: list[tuple[_Option, float | None, np.ndarray] | None] = [None] * len(self.families)

        def others(f: int) -> np.ndarray:
            columns = [p[2] for g, p in enumerate(picks) if g != f and p is not None]
            return _orthonormal_basis(np.column_stack(columns)) if columns else target[:, None][:, :0]

        # Forward: the family explaining most of what the chosen ones leave goes next (its grid
        # maximum decides; an equation's strongest term is placed first, as in matching pursuit).
        while None in picks:
            extra = others(-1)
            residual = _minus(target, extra)
            # Only unplaced families compete (when the others already span every grid column,
            # all gains are -inf and an argmax over all families could pick a placed one forever).
            f = max(
                (f for f, pick in enumerate(picks) if pick is None),
                key=lambda f: _grid_gain(_minus(self.families[f][1], extra), residual),
            )
            options, grid = self.families[f]
            picks[f] = self._best(options, _minus(grid, extra), residual, extra)
        # Backfitting: each family again, given all the others.
        for _ in range(BACKFIT_SWEEPS if len(self.families) > 1 else 0):
            changed = False
            for f, (options, grid) in enumerate(self.families):
                extra = others(f)
                pick = self._best(options, _minus(grid, extra), _minus(target, extra), extra)
                previous = picks[f]
                changed |= previous[0] is not pick[0] or previous[1] != pick[1]
                picks[f] = pick
            if not changed:
                break
        chosen: dict[int, Term] = {}
        for option, value, _ in filter(None, picks):
            for k in option.indices:
                term = self.termset.terms[k]
                chosen[k] = term if value is None else replace(term, constants=((option.name, value),))
        keep = sorted([*self.base, *chosen])
        terms = [chosen.get(k, self.termset.terms[k]) for k in keep]
        positions = [j for j, k in enumerate(keep) if k in chosen]
        return TermSet(terms, self.termset.n_states, self.termset.n_inputs), keep, positions

    def _best(self, options: list[_Option], grid: np.ndarray, residual: np.ndarray, extra: np.ndarray) -> tuple[_Option, float | None, np.ndarray]:
        """(member, constant, its column with the base projected out): the ``POLISHED`` leading
        local maxima over c of the explained sum of squares (grid columns ``grid``, with base
        and ``extra`` projected out), refined between grid neighbours, then compared. A factor-2
        grid is coarse for a sharp Hill function, and over a narrow data range the profile has
        several peaks."""
        explained = _explained(grid, residual)
        peaks = [j for j in np.argsort(-explained, kind="stable") if _is_peak(options, explained, int(j))]
        best: tuple[float, _Option, float | None] | None = None
        for j in peaks[:POLISHED]:
            option = options[j]
            if option.name is None:
                score, value = -float(explained[j]), None
            else:
                score, value = self._polish(options, j, residual, extra)
            if best is None or score < best[0]:
                best = (score, option, value)
        _, option, value = best
        if value is None:
            column = self._project(self.theta_train[:, option.indices[0]])
        else:
            column = self._project(self._column(option.indices[0], option.name, value))
        return option, value, column

    def _polish(self, options: list[_Option], best: int, residual: np.ndarray, extra: np.ndarray) -> tuple[float, float]:
        """(minus the explained sum of squares, constant) of grid point ``best`` refined
        between its grid neighbours."""
        from scipy.optimize import minimize_scalar

        option = options[best]
        same = [o.value for o in options if o.indices == option.indices]
        position = same.index(option.value)
        low = np.log(same[max(position - 1, 0)])
        high = np.log(same[min(position + 1, len(same) - 1)])

        def unexplained(log_value: float) -> float:
            column = self._column(option.indices[0], option.name, float(np.exp(log_value)))
            column = _minus(self._project(column), extra)
            norm = float(column @ column)
            if not np.isfinite(norm) or norm <= 0:
                return 0.0
            return -float(column @ residual) ** 2 / norm

        at_grid = unexplained(np.log(option.value))
        if not high > low:
            return at_grid, option.value
        found = minimize_scalar(unexplained, bounds=(low, high), method="bounded",
                                options={"xatol": SEARCH_TOLERANCE})
        if found.success and found.fun <= at_grid:
            return float(found.fun), float(np.exp(found.x))
        return at_grid, option.value


def _explained(grid: np.ndarray, residual: np.ndarray) -> np.ndarray:
    """Sum of squares of ``residual`` each column of ``grid`` explains alone, (G,)."""
    norms = np.sum(grid**2, axis=0)
    scale = max(float(norms.max(initial=0.0)), np.finfo(float).tiny)
    with np.errstate(divide="ignore", invalid="ignore"):
        # columns the others already span (norm ~ round-off) explain nothing
        return np.where(norms > 1e-20 * scale, (grid.T @ residual) ** 2 / norms, -np.inf)


def _grid_gain(grid: np.ndarray, residual: np.ndarray) -> float:
    return float(np.max(_explained(grid, residual), initial=-np.inf))


def _grid_values(term: Term, start: float) -> np.ndarray:
    """Constants to try: steps of a factor 2 in c**sharpness (c**n of a Hill term, so that
    sharper terms get a finer grid) across the term's bounds, else around ``start``."""
    if not term.bounds:
        return start * GRID_FACTORS ** (1.0 / term.sharpness)
    _, low, high = term.bounds[0]
    steps = max(int(np.ceil(term.sharpness * np.log2(high / low))), 1)
    return np.geomspace(low, high, steps + 1)


def _minus(columns: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """``columns`` with their component in the span of orthonormal ``basis`` removed."""
    if basis.shape[1] == 0:
        return columns
    return columns - basis @ (basis.T @ columns)


def _is_peak(options: list[_Option], explained: np.ndarray, j: int) -> bool:
    """Whether grid point j explains at least as much as its neighbours along c (same terms)."""
    neighbours = [i for i in (j - 1, j + 1)
                  if 0 <= i < len(options) and options[i].indices == options[j].indices]
    return all(explained[j] >= explained[i] for i in neighbours)


def _orthonormal_basis(columns: np.ndarray) -> np.ndarray:
    """An orthonormal basis (n, r) of the span of ``columns`` (n, q), rank-revealing."""
    if columns.shape[1] == 0:
        return columns
    u, s, _ = np.linalg.svd(columns, full_matrices=False)
    rank = int(np.sum(s > s[0] * max(columns.shape) * np.finfo(float).eps)) if s.size and s[0] > 0 else 0
    return u[:, :rank]
