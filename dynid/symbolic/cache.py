"""One bounded cache for the work the symbolic pipeline repeats on identical inputs.

Five kinds of entries, each kept least-recently-used up to its own bound (``LIMITS``):

- ``"term"``: a term's numpy function (and its derivatives by constants), ``library.TermSet``:
  the libraries of a sweep repeat the same terms, and ``sympy.lambdify`` costs milliseconds each;
- ``"library"``: a whole term set's function with its Jacobians (``shooting``): a fit and the
  score test before it, or the candidates of consecutive equations, share one (sympy's diff and
  lambdify cost ~50 ms);
- ``"factor"``: the column norms and triangular factor of a library evaluated on a set of rows
  (``solvers.problem.column_factor``): every equation, and every pass over the libraries, fits
  the same columns on the same rows, and the factor costs O(n p^2) where the rest is O(n p);
- ``"folds"``: the per-fold candidates of one library for one equation
  (``selection.select_folds``): every library is scored a second time with the residuals'
  autocorrelation time, which changes only how the pooled errors are weighed;
- ``"search"``: resumable best-subset searches (``solvers.best_subsets``): model selection asks
  for the same library on the same rows again, and the exact search is the expensive part.

Every entry is a pure function of its key, so what the cache holds changes the time a fit takes,
never its result. Forked sweep workers each continue with a copy.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TypeVar, cast

Value = TypeVar("Value")

# Entries kept per kind: compiled terms are small and a sweep over many variables has hundreds;
# library functions and searches hold larger state. Factors: a p x p matrix each (0.65 MB for
# poly3 of 10 variables); a sweep of 8 libraries over 5 folds, plus all rows, needs ~50 at once.
# Fold scores: a few candidates per size and fold; one equation's sweep needs one per library.
LIMITS = {"term": 4096, "library": 8, "factor": 96, "folds": 64, "search": 64}


class BoundedCache:
    """Least-recently-used entries under a bound per kind (``limits``: {kind: most entries})."""

    def __init__(self, limits: dict[str, int]) -> None:
        self.limits = dict(limits)
        self._entries: dict[str, OrderedDict[Hashable, object]] = {kind: OrderedDict() for kind in limits}

    def get(self, kind: str, key: Hashable, make: Callable[[], Value]) -> Value:
        """The entry of ``kind`` for ``key``, made by ``make()`` when absent (then kept, and the
        least recently used entries of that kind dropped beyond its bound)."""
        entries = self._entries[kind]
        if key in entries:
            entries.move_to_end(key)
            return cast(Value, entries[key])
        value = make()
        entries[key] = value
        while len(entries) > self.limits[kind]:
            entries.popitem(last=False)
        return value

    def size(self, kind: str) -> int:
        """How many entries of ``kind`` are held."""
        return len(self._entries[kind])

    def clear(self) -> None:
        for entries in self._entries.values():
            entries.clear()


CACHE = BoundedCache(LIMITS)
