"""The JSON documents dynid prints and writes: their ``"kind"`` and their text.

Every document carries a top-level ``"kind"`` naming what it is, so that a reader (``dynid
report``, a user's script) dispatches on it instead of guessing from keys. The kinds are listed
here and nowhere else; a list result is wrapped in an object holding it under the kind's name
(``{"kind": "models", "models": [...]}``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from dynid.jsonable import jsonable

FIT: Final = "fit"
FORECAST: Final = "forecast"
SCORE: Final = "score"
SCORES: Final = "scores"
STATES: Final = "states"
SYMBOLIC: Final = "symbolic"
CAUSAL: Final = "causal"
DYNAMIC_STRENGTH: Final = "dynamic-strength"
INFO: Final = "info"
SIMULATE: Final = "simulate"
MODELS: Final = "models"
METHODS: Final = "methods"
SYSTEMS: Final = "systems"

# kind -> (what writes it, its fields after "kind"): the command reference (docs/cli.md) is
# generated from this table.
SHAPES: Final[dict[str, tuple[str, str]]] = {
    FIT: (
        "dynid fit --json",
        '"model_path", "model", "hyperparameters": {...}, "variables": [...], "inputs": [...], '
        '"dt", "n_trials", "n_samples", "metrics": {...}, "fit_seconds", "seed", and with --model auto '
        '"ranking": [{"model", "status" (scored, failed, skipped), "nrmse", '
        '"valid_prediction_time", "diverged_rollouts", "fit_seconds", "reason"}] best first',
    ),
    FORECAST: (
        "dynid forecast --json",
        '"time_column", "time_origin": ISO-8601 or null, "variables": [...], "t": [N times: date-times '
        'when DATA\'s were (--time-format), else seconds], "x": [N rows of one value per variable], '
        'and with --interval "level", "lower", "upper": [N rows each]',
    ),
    SCORE: (
        "dynid score --json",
        '"model", "backend", "horizon", "starts", "rmse", "nrmse", "valid_prediction_time", '
        '"valid_prediction_time_censored" (some rollouts still valid at the horizon, or where their '
        'targets end: VPT is a lower bound), "censored_rollouts", "diverged_rollouts", '
        '"first_divergence_step", "escaped_rollouts" (of the diverged ones, those that left the '
        'training data\'s range widened by that range on each side, which forecast refuses; none with '
        '--allow-escape, "allow_escape": true), '
        '"missing_targets" (target values missing in DATA, skipped in every error and in VPT), '
        '"rmse_per_variable": {...}, "rmse_per_step": [...], "vpt_threshold", "dt", '
        '"valid_prediction_time_lyapunov" (with --lyapunov, or --estimate-lyapunov finding a '
        'positive exponent); unless --free-run 0: "d_stsp", "d_h", "free_run_steps", '
        '"free_run_diverged_step", "free_run_escaped" (it left the training data\'s range; '
        'DATA\'s with --allow-escape) (d_stsp and d_h null when the free run diverged, d_h on '
        'irregular samples or fewer than 320 in DATA\'s longest complete stretch); on irregular '
        'samples, models that forecast at any times (lds, ctlds) are rolled out '
        'to the times of the data and VPT is their lead time; with '
        '--estimate-lyapunov: "lyapunov_exponents": [largest first, 1/time] and '
        '"lyapunov_standard_error": [...] (null, with "lyapunov_error", when the orbit diverged), '
        '"kaplan_yorke_dimension", "lyapunov_state_dimension", "lyapunov_orbit_time"; errors of '
        'diverged rollouts are null',
    ),
    SCORES: (
        "dynid score A.dynid B.dynid ... DATA --json",
        '"scores": [one score document per model, without its "kind", with "variables" and "rank"], '
        'grouped by "variables" (in the order of the models given; errors over other variables '
        'are not comparable), best (lowest nrmse, diverged last) first in each group: "rank" 1, 2, ...',
    ),
    STATES: (
        "dynid states --json",
        '"time_column", "time_origin": ISO-8601 or null, "states": ["z_0", ...], "t": [N times: date-times '
        "when DATA's were (--time-format), else seconds], "
        '"trial": [N trial indices], "z": [N rows of smoothed latent means], "z_sd": [N rows of '
        "their standard deviations] (empty rows for discrete-state models; null for the "
        'deterministic plrnn and alrnn), and for discrete-state models "state": [N most likely '
        'states (Viterbi)], "p_state": [N rows of smoothed state probabilities] (alrnn: "state" '
        'the linear subregion, "p_state" null); one row per row of DATA; null where nothing is '
        "inferred (plrnn, alrnn: a trial's first warmup rows)",
    ),
    SYMBOLIC: (
        "dynid symbolic --json (or --format json)",
        '"variables": [...], "inputs": [...], "symbols": {"x0": "original name", ...}, '
        '"equations": [{"lhs": "x", "rhs": "-10.0*x + 10.0*y", "terms": [{"term": "x", '
        '"coefficient": -10.0, ...}]}], "metrics": {...}, "seed"',
    ),
    CAUSAL: (
        "dynid discover-causal --json (or --format json)",
        '"variables": [...], "method", "max_lag", "alpha", "edges": [{"source", "target", "lag", '
        '"strength", "p_value", "significant"} (lag-0 edges of pcmciplus and crosspred add '
        '"link": "-->", "<--", "o-o" undirected or "x-x" conflicting)], "score_matrix": [[...]], '
        '"adjacency": [[0|1, ...]], '
        '"seed", then the method\'s own fields',
    ),
    DYNAMIC_STRENGTH: (
        "dynid discover-causal --method dynamic --dynamic-output FILE.json",
        '"variables": [...], "estimator", "times": [T\' times], "trial": [T\' trial indices], '
        '"strength": [time][source][target], "change_points": [{"source", "target", "time", '
        '"before", "after"}]',
    ),
    INFO: (
        "dynid info --json",
        "the model file's metadata (\"backend\", \"hyperparameters\", \"variables\", \"inputs\", "
        '"dt", "data_fingerprint", "metrics", "seed", "device", ...), "arrays": {name: shape}, '
        'and for equation models "equations": [{"lhs", "rhs"}]',
    ),
    SIMULATE: (
        "dynid simulate --json",
        '"system", "variables": [...], "inputs": [...], "t": [n times], "x": [n rows of states], '
        '"u": [n rows of inputs] or null',
    ),
    MODELS: (
        "dynid models --json",
        '"models": [{"name", "summary", "capabilities": {...}, "hyperparameters": [{"name", '
        '"type", "default", "doc"}]}]',
    ),
    METHODS: (
        "dynid discover-causal --list --json",
        '"methods": [{"name", "summary", "cuda", "hyperparameters": [{"name", "type", "default", '
        '"doc"}]}]',
    ),
    SYSTEMS: (
        "dynid simulate --list --json",
        '"systems": [{"name", "description", "variables", "inputs", "params", "dt", "n", "x0", '
        '"kind" (ode, map, ...: the system\'s own kind), "reference", "lyapunov": [published '
        'exponents, largest first; empty when none are catalogued]}]',
    ),
}
KINDS: Final = tuple(SHAPES)
# The lines of a --each run (written by ``batch_line``); the command reference shows this text.
BATCH_LINE: Final = (
    'With --each and --json, one line per input, in input order: {"kind" (the command\'s), '
    '"input", "output" (the file written; null when the line is the result, as for score) or '
    '"error" and "exit_code", "skipped": true when --resume found the output done, then the '
    "command's own fields}."
)


def tagged(kind: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` with ``"kind": kind`` as its first key. ValueError for an unknown kind or a body
    that already names another kind (a programming error, not a user's)."""
    if kind not in KINDS:
        raise ValueError(f"unknown document kind {kind!r}")
    if body.get("kind", kind) != kind:
        raise ValueError(f"document of kind {body['kind']!r} tagged as {kind!r}")
    return {"kind": kind, **{key: value for key, value in body.items() if key != "kind"}}


def batch_line(
    kind: str,
    input: str,
    *,
    output: str | None = None,
    error: str | None = None,
    exit_code: int | None = None,
    skipped: bool = False,
    document: Mapping[str, Any] | None = None,
) -> str:
    """One input's line of a ``--each --json`` run: ``{"kind", "input", then "output" (null
    when the line is the result) or "error" and "exit_code", "skipped": true for a --resume
    skip, then the command's own fields}``, as one line of strict JSON."""
    head: dict[str, Any] = {"kind": kind, "input": input}
    if error is not None:
        head.update(error=error, exit_code=exit_code)
    else:
        head["output"] = output
    if skipped:
        head["skipped"] = True
    line = tagged(kind, {**head, **{k: v for k, v in (document or {}).items() if k not in head}})
    return json.dumps(jsonable(line), allow_nan=False) + "\n"


def listing(kind: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
    """A list result as a document: ``{"kind": kind, kind: entries}``."""
    return tagged(kind, {kind: entries})


def to_text(document: Mapping[str, Any]) -> str:
    """Strict JSON text (NaN and infinities as null) ending in a newline. ValueError when the
    document has no ``"kind"``."""
    if document.get("kind") not in KINDS:
        raise ValueError(f"a dynid JSON document needs a known 'kind', got {document.get('kind')!r}")
    return json.dumps(jsonable(document), indent=2, allow_nan=False) + "\n"
