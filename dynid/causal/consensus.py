"""``--method consensus``: several methods' evidence combined by ranks and majority vote.

Methods built on different evidence fail in different places: on nodes that are, at the same
sample, functions of their parents' hidden states (CausalDynamics' coupled graphs) the lag-0
cross-prediction of ``crosspred`` and the conditional tests of ``pcmci`` each rank some graphs
well and others badly, and not the same ones. Their evidence is on different scales (an
out-of-sample R^2 against a p-value), so "the larger of the two" would need a calibration; ranks
need none. Each member runs with its own defaults and the shared settings; then for each
ordered pair (source, target):

- ``rank_m``: the pair's rank among member m's off-diagonal scores, scaled to (0, 1] (1 = the
  member's strongest pair; ties share their mean rank; a NaN score ranks lowest);
- ``votes``: how many members call the pair significant (their ``adjacency``);
- ``score_matrix = votes + mean_m rank_m``: pairs ordered by votes first, then by the mean rank
  (the Borda count; de Borda 1781, the rank aggregation of Dwork et al., WWW 2001). The mean
  rank lies in (0, 1], so a pair with more votes always ranks higher. Where the members rank
  the pairs alike and each one's significance is a threshold on its own score, the order is
  theirs.

A pair is significant when a strict majority of the members call it so (both, for two). On the
seen CausalDynamics coupled graphs the default pair (crosspred, pcmci) ranks better than either
member alone, and the majority keeps the precision of the stricter one; figures, and why
granger is not a default member, in benchmarks/README.md ("A consensus of methods").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.stats import rankdata

from dynid.causal import registry
from dynid.causal.base import CausalMethod, CausalSettings
from dynid.causal.graph import CausalGraph, Edge
from dynid.data.dataset import Dataset
from dynid.params import Hyperparameters, param
from dynid.runtime import SilentProgress, Steps

# Methods that cannot be members: this one, dynamic (its score is a strength time average,
# not evidence of a link, and it runs a base method already) and the routers (they run one of
# the members' kind, chosen from the data).
_NOT_MEMBERS = ("consensus", "dynamic", *registry.ROUTERS)


@dataclass(frozen=True)
class ConsensusParams(Hyperparameters):
    """``-p`` options of ``--method consensus``."""

    members: str = param(
        "crosspred,pcmci",
        "comma-separated methods combined, each with its own defaults (two or more, no repeats)",
    )

    def __post_init__(self) -> None:
        names = self.member_names
        if len(names) < 2 or len(set(names)) < len(names):
            raise ValueError(f"members must name two or more different methods, got {self.members!r}")
        for name in names:
            if name in _NOT_MEMBERS:
                raise ValueError(f"members: {name} cannot be a member")
            if name not in registry.names():
                valid = ", ".join(n for n in registry.names() if n not in _NOT_MEMBERS)
                raise ValueError(f"members: unknown method {name!r}; valid: {valid}")

    @property
    def member_names(self) -> tuple[str, ...]:
        return tuple(name.strip() for name in self.members.split(",") if name.strip())


class Consensus(CausalMethod):
    """``--method consensus``: member methods combined by majority vote, then mean rank
    (module docstring).

    Edges: one per ordered pair and lag that any member tests, ``strength`` the pair's mean rank
    in (0, 1], ``p_value`` NaN (the members' evidence is not one test); significant where a
    strict majority of members call the pair significant and one of them does at that lag
    (crosspred's lag 0, pcmci's lagged links). ``extra``: ``members`` (each member's ``score_matrix``, ``adjacency``
    and ``rank``), ``votes`` and ``mean_rank`` (d, d) [source][target], ``majority`` (votes a
    significant pair needs), ``warnings`` (the members', each prefixed by its name).
    """

    name = "consensus"
    reports_progress = True
    contemporaneous = True
    use_when = (
        "data where no single kind of evidence can be trusted: nodes that mix their parents' "
        "hidden states at the same sample (CausalDynamics' coupled graphs), where crosspred's "
        "lag-0 and pcmci's conditional evidence fail on different graphs; significant where "
        "most members agree"
    )
    summary = (
        "several methods combined: majority vote on their significant links, then their mean "
        "rank (default members crosspred and pcmci)"
    )
    Params = ConsensusParams

    def discover(self, data: Dataset, settings: CausalSettings) -> CausalGraph:
        params = self.params
        assert isinstance(params, ConsensusParams)
        names = params.member_names
        steps = Steps(settings.training.progress, len(names))
        # Members report as a whole: their own stages would interleave with these.
        quiet = replace(settings, training=replace(settings.training, progress=SilentProgress()))
        graphs = []
        for name in names:
            steps.start(f"consensus: {name}")
            cls = registry.get(name)
            graphs.append(cls(cls.Params()).discover(data, quiet))
            steps.finish(f"consensus: {name}")
        return consensus_graph(data, graphs, settings)


def member_ranks(score: np.ndarray) -> np.ndarray:
    """(d, d): each off-diagonal entry of ``score`` (d, d) as its rank among them scaled to
    (0, 1] (1 = the largest; ties share their mean rank; NaN ranks lowest); 0 on the diagonal."""
    off = ~np.eye(len(score), dtype=bool)
    values = np.where(np.isnan(score[off]), -np.inf, score[off])
    out = np.zeros(score.shape)
    out[off] = rankdata(values) / values.size
    return out


def combine(scores: Sequence[np.ndarray], adjacency: Sequence[np.ndarray]
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(score, votes, mean_rank)``, each (d, d) [source][target] with a 0 diagonal, from the
    members' score matrices and 0/1 adjacencies (d, d): ``votes`` the members calling a pair
    significant, ``mean_rank`` the mean of ``member_ranks``, ``score = votes + mean_rank``."""
    mean_rank = np.mean([member_ranks(np.asarray(s, dtype=float)) for s in scores], axis=0)
    off = ~np.eye(len(mean_rank), dtype=bool)
    votes = np.sum([np.asarray(a, dtype=bool) & off for a in adjacency], axis=0)
    return np.where(off, votes + mean_rank, 0.0), votes, mean_rank


def consensus_graph(data: Dataset, graphs: list[CausalGraph], settings: CausalSettings
                    ) -> CausalGraph:
    """The consensus of the members' ``graphs`` over ``data.variables`` (``Consensus``)."""
    score, votes, mean_rank = combine([g.score_matrix for g in graphs], [g.adjacency for g in graphs])
    majority = len(graphs) // 2 + 1
    significant = votes >= majority
    names = data.variables
    index = {name: i for i, name in enumerate(names)}
    lags: set[int] = set()
    found: dict[tuple[int, int], set[int]] = {}  # (s, t) -> lags some member calls significant
    for graph in graphs:
        for e in graph.edges:
            lags.add(e.lag)
            if e.significant:
                found.setdefault((index[e.source], index[e.target]), set()).add(e.lag)
    d = len(names)
    edges = [Edge(names[s], names[t], lag, float(mean_rank[s, t]), float("nan"),
                  bool(significant[s, t]) and lag in found.get((s, t), set()))
             for s in range(d) for t in range(d) if s != t for lag in sorted(lags)]
    warnings = [f"{g.method}: {w}" for g in graphs for w in g.extra.get("warnings", [])]
    return CausalGraph(
        variables=names, method=Consensus.name, max_lag=settings.max_lag,
        alpha=settings.alpha, edges=edges, score_matrix=score,
        adjacency=significant.astype(np.int8),
        extra={
            "members": {g.method: {"score_matrix": g.score_matrix, "adjacency": g.adjacency,
                                   "rank": member_ranks(g.score_matrix)} for g in graphs},
            "votes": votes, "mean_rank": mean_rank, "majority": majority,
            "warnings": warnings, "dt": data.dt,
        },
    )
