"""Truncated signatures and log-signatures (depth 1 to 3) of piecewise-linear paths.

A path (..., n, c) with c channels is the polygon through its n points. The signature of one
straight segment with increment D is the tensor exponential exp(D) = (1, D, D⊗D/2, D⊗D⊗D/6);
the signature of a concatenation is the tensor product of the pieces' signatures (Chen's
relation), so a polygon's signature is built segment by segment, exactly. The log-signature is
the tensor logarithm log(1 + X) = X - X²/2 + X³/3 of it; it lies in the free Lie algebra, whose
coordinates are read off at the Lyndon words (an injective linear map on the Lie algebra, the
``words`` basis of Signatory), giving c, c(c-1)/2 and (c³-c)/3 numbers at levels 1, 2 and 3.

A level k is stored flat, (..., c**k), the word (i_1 ... i_k) at index i_1 c^(k-1) + ... + i_k.

Why our own code and not iisignature: three levels of Chen's relation are a few lines of
vectorised numpy that batch over windows, starts and candidate read-outs at once, where
iisignature is a compiled extension working on one batch of paths per call.
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = [
    "MAX_DEPTH",
    "chen",
    "log_signature",
    "logsignature_words",
    "lyndon_words",
    "segment_signature",
    "signature",
]

MAX_DEPTH = 3


def _outer(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Tensor product of flat levels: (..., c^p) x (..., c^q) -> (..., c^(p+q))."""
    product = a[..., :, None] * b[..., None, :]
    return product.reshape(*product.shape[:-2], -1)


def _check_depth(depth: int) -> None:
    if not 1 <= depth <= MAX_DEPTH:
        raise ValueError(f"depth must be 1, 2 or 3, not {depth}")


def segment_signature(increment: np.ndarray, depth: int) -> list[np.ndarray]:
    """exp(D) without its 1 for increments D (..., c): levels (..., c), (..., c²), ..."""
    _check_depth(depth)
    levels = [increment]
    for k in range(2, depth + 1):
        levels.append(_outer(levels[-1], increment) / k)
    return levels


def chen(a: list[np.ndarray], b: list[np.ndarray]) -> list[np.ndarray]:
    """The signature of path a followed by path b from theirs (Chen's relation), levels as
    ``segment_signature``'s: level k of a ⊗ b is the sum of a_i ⊗ b_(k-i) over i = 0..k."""
    result = []
    for k in range(1, len(a) + 1):
        level = a[k - 1] + b[k - 1]
        for i in range(1, k):
            level = level + _outer(a[i - 1], b[k - i - 1])
        result.append(level)
    return result


def signature(path: np.ndarray, depth: int) -> list[np.ndarray]:
    """Signature levels 1..depth, (..., c**k) each, of the polygons through path (..., n, c),
    n >= 2."""
    increments = np.diff(path, axis=-2)
    if increments.shape[-2] < 1:
        raise ValueError("a path needs at least two points")
    levels = segment_signature(increments[..., 0, :], depth)
    for j in range(1, increments.shape[-2]):
        levels = chen(levels, segment_signature(increments[..., j, :], depth))
    return levels


def log_signature(levels: list[np.ndarray]) -> list[np.ndarray]:
    """The tensor logarithm of a signature (levels as ``signature``'s), truncated at its depth:
    log(1 + X) = X - X²/2 + X³/3."""
    logs = [levels[0]]
    if len(levels) >= 2:
        logs.append(levels[1] - _outer(levels[0], levels[0]) / 2)
    if len(levels) >= 3:
        s1, s2, s3 = levels
        logs.append(s3 - (_outer(s1, s2) + _outer(s2, s1)) / 2 + _outer(_outer(s1, s1), s1) / 3)
    return logs


@functools.cache
def lyndon_words(channels: int, depth: int) -> tuple[tuple[int, ...], ...]:
    """Lyndon words over letters 0..channels-1 of length 1..depth, by length then
    lexicographically (Duval's generation algorithm)."""
    _check_depth(depth)
    words: list[tuple[int, ...]] = []
    word = [-1]
    while word:
        word[-1] += 1
        words.append(tuple(word))
        m = len(word)
        while len(word) < depth:
            word.append(word[len(word) - m])
        while word and word[-1] == channels - 1:
            word.pop()
    return tuple(sorted(words, key=lambda w: (len(w), w)))


def logsignature_words(path: np.ndarray, depth: int) -> np.ndarray:
    """Log-signature coordinates (..., L) of the polygons through path (..., n, c): the
    log-signature tensor's coefficients at the ``lyndon_words(c, depth)``, in their order."""
    logs = log_signature(signature(path, depth))
    flat = _lyndon_indices(path.shape[-1], depth)
    return np.concatenate([level[..., index] for level, index in zip(logs, flat)], axis=-1)


@functools.cache
def _lyndon_indices(channels: int, depth: int) -> tuple[np.ndarray, ...]:
    """Per level k, the flat indices of the Lyndon words of length k."""
    return tuple(
        np.array([np.ravel_multi_index(w, (channels,) * k)
                  for w in lyndon_words(channels, depth) if len(w) == k], dtype=int)
        for k in range(1, depth + 1)
    )
