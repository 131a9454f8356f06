"""Scores for a discovered causal graph against the true one: AUROC and AUPRC; numpy only.

Both take a ``score_matrix`` (d, d) indexed ``[source][target]`` (larger = more evidence of
``source -> target``, as in ``CausalGraph.score_matrix``) and a ``true_adjacency`` (d, d) of 0/1
or booleans in the same layout. The diagonal (self-links) is left out by default, since no dynid
method reports self-links as edges. Tied scores are handled exactly: AUROC is the Mann-Whitney
statistic with average ranks (a tied positive/negative pair counts one half), and AUPRC treats
tied scores as one threshold, so neither depends on the order of tied entries.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata


def auroc(
    score_matrix: np.ndarray, true_adjacency: np.ndarray, exclude_diagonal: bool = True
) -> float:
    """Area under the ROC curve: the probability that a true link outscores a non-link.

    0.5 is chance, 1 a perfect ranking. Equals ``sklearn.metrics.roc_auc_score`` on the same
    entries. ValueError when the entries hold no true link or no non-link.
    """
    scores, truth = _entries(score_matrix, true_adjacency, exclude_diagonal)
    n_pos = int(truth.sum())
    n_neg = truth.size - n_pos
    ranks = rankdata(scores)  # average ranks: ties share the mean of their positions
    # Mann-Whitney: U = rank sum of the positives minus its minimum, n_pos (n_pos + 1) / 2.
    u = ranks[truth].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u / (n_pos * n_neg))


def auprc(
    score_matrix: np.ndarray, true_adjacency: np.ndarray, exclude_diagonal: bool = True
) -> float:
    """Area under the precision-recall curve, as average precision.

    ``sum_k (R_k - R_{k-1}) P_k`` over the distinct score thresholds from high to low, with
    ``P_k``/``R_k`` the precision/recall of calling every entry scoring at least the threshold
    a link (no interpolation; equals ``sklearn.metrics.average_precision_score``). Chance level
    is the fraction of true links. ValueError when the entries hold no true link or no non-link.
    """
    scores, truth = _entries(score_matrix, true_adjacency, exclude_diagonal)
    order = np.argsort(-scores, kind="stable")
    scores, truth = scores[order], truth[order]
    # The last index of each run of equal scores: a threshold includes all of its ties at once.
    last = np.r_[np.flatnonzero(np.diff(scores) != 0), scores.size - 1]
    true_pos = np.cumsum(truth)[last]
    called = last + 1
    precision = true_pos / called
    recall = true_pos / truth.sum()
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def _entries(
    score_matrix: np.ndarray, true_adjacency: np.ndarray, exclude_diagonal: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The scored entries (k,) and their truth (k,) as floats and booleans; ValueError if bad."""
    scores = np.asarray(score_matrix, dtype=float)
    truth = np.asarray(true_adjacency)
    if scores.ndim != 2 or scores.shape[0] != scores.shape[1] or truth.shape != scores.shape:
        raise ValueError(
            f"score_matrix and true_adjacency must be one (d, d) shape, got {scores.shape} and "
            f"{truth.shape}"
        )
    if not np.isin(truth, (0, 1)).all():
        raise ValueError("true_adjacency must hold only 0/1 (or booleans)")
    keep = ~np.eye(scores.shape[0], dtype=bool) if exclude_diagonal else np.ones(scores.shape, bool)
    scores, truth = scores[keep], truth[keep].astype(bool)
    if not np.isfinite(scores).all():
        raise ValueError("score_matrix has NaN or infinite entries among those scored")
    if truth.all() or not truth.any():
        raise ValueError("the truth needs at least one link and one non-link to rank")
    return scores, truth
