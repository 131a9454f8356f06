"""What ``--each`` needs to know of a command, shared by the option decorator
(``dynid.cli.options``) and the batch driver (``dynid.cli.batch``) without either importing the
other's module at load: the batch options bundle, each command's ``EachSpec`` and the registry
of command bodies. Light: imported for ``dynid --help``."""

from dataclasses import dataclass
from typing import Any, Callable, Optional


@dataclass(frozen=True)
class BatchOptions:
    """Many inputs, one job each (contract: batch). ``jobs`` and ``resume`` come from the
    command's own --jobs / the training group's --resume where those exist (one flag each)."""

    each: bool = False
    jobs: Optional[int] = None
    shard: Optional[str] = None
    resume: bool = False
    executor: str = "local"
    scheduler: Optional[str] = None


@dataclass(frozen=True)
class EachSpec:
    """How a command hands its inputs to the runner under --each: ``kind`` of its documents;
    ``data``: the parameter holding DATA (its first ``leading`` items are not inputs, e.g.
    score's MODEL); ``output``: its -o parameter (None: the result is the JSON line);
    ``default_output``: a pattern that works per input, if any; ``model``/``method``: the
    parameters that fill those pattern fields (``model_file``: {model} is the stem of the
    model file that is DATA's first leading item); ``json_only_stdout``: --json puts the data on stdout (so not with -o)."""

    kind: str
    data: str
    output: Optional[str] = "output"
    leading: int = 0
    default_output: Optional[str] = None
    model: Optional[str] = None
    model_file: bool = False
    method: Optional[str] = None
    json_only_stdout: bool = False


# Command bodies by "module:name", so that a worker process finds the body of the command it
# runs for one input (the module's attribute is the decorated wrapper).
BODIES: dict[str, Callable[..., Any]] = {}
