"""``.dynid`` model files: HDF5 holding learned arrays as datasets and metadata as JSON.

Layout (format version 1):
    /               attrs: format="dynid-model", format_version=1, metadata=<JSON string>
    /arrays/<name>  one dataset per array of ``Backend.arrays()``
The metadata records dynid version, backend, hyperparameters, variable and input names, dt
(with the data's time unit and whether its times were date-times),
the sha256 of the training data and each variable's range in it, fit metrics, seed, device, UTC time and a sha256 over the
arrays, so that a truncated or edited file is refused. Loading never executes stored code.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import io
import json
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from dynid import __version__
from dynid.atomic import atomic_path
from dynid.data.dataset import Dataset
from dynid.errors import DataError
from dynid.jsonable import jsonable
from dynid.models import registry
from dynid.models.base import Backend

FORMAT = "dynid-model"
FORMAT_VERSION = 1
# Deepest nesting of lists and dicts in a header dynid reads (its own headers nest 4 or 5 deep).
MAX_HEADER_DEPTH = 32


@dataclass
class ModelFile:
    """A loaded model and its metadata (the JSON header as a dict)."""

    model: Backend
    metadata: dict[str, Any]


def describe_fit(
    model: Backend,
    data: Dataset,
    *,
    seed: int | None,
    device: str,
    fit_seconds: float,
) -> dict[str, Any]:
    """The metadata header for a model just fitted on ``data``."""
    return {
        "format_version": FORMAT_VERSION,
        "dynid_version": __version__,
        "backend": model.name,
        "hyperparameters": model.params.to_dict(),
        "variables": list(model.variables_),
        "inputs": list(model.inputs_),
        "dt": model.dt_,
        "time_unit": data.time_unit,
        "time_from_datetime": data.time_from_datetime,
        "data_fingerprint": data.fingerprint(),
        "data_source": data.source,
        "n_trials": data.n_trials,
        "n_samples": data.n_samples,
        # What a forecast that has diverged leaves (``Backend.data_range_``); null: none seen.
        "data_range": None if model.data_range_ is None else
        {"low": jsonable(model.data_range_[0]), "high": jsonable(model.data_range_[1])},
        "metrics": jsonable(model.metrics_),
        "seed": seed,
        "device": device,
        "fit_seconds": fit_seconds,
        "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def save_model(model: Backend, path: str, metadata: dict[str, Any]) -> None:
    """Write ``model`` with ``metadata`` to ``path`` atomically (``-`` = stdout)."""
    import h5py

    arrays = {name: np.asarray(value) for name, value in model.arrays().items()}
    header = dict(metadata, arrays_sha256=_arrays_digest(arrays))
    with atomic_path(path) as temp:
        with h5py.File(temp, "w") as handle:
            handle.attrs["format"] = FORMAT
            handle.attrs["format_version"] = FORMAT_VERSION
            handle.attrs["metadata"] = json.dumps(header, sort_keys=True)
            group = handle.create_group("arrays")
            for name, array in arrays.items():
                group.create_dataset(name, data=array)


def load_model(path: str) -> ModelFile:
    """Read a model file (``-``: its bytes on stdin); DataError naming the file if it is
    missing, foreign, newer, damaged or crafted (a header of the wrong types, arrays larger than
    the file, JSON nested deeper than dynid writes). Nothing in it is executed or unpickled."""
    import h5py

    source = _stdin_bytes() if path == "-" else path
    path = "<stdin>" if path == "-" else path  # the name in messages
    try:
        size = source.getbuffer().nbytes if isinstance(source, io.BytesIO) else os.path.getsize(source)
        handle = h5py.File(source, "r")
    except FileNotFoundError:
        raise DataError(f"{path}: no such model file") from None
    except IsADirectoryError:
        raise DataError(f"{path}: is a directory, not a model file") from None
    except OSError:
        raise DataError(f"{path}: not a dynid model file (unreadable or truncated HDF5)") from None
    try:
        with handle:
            if handle.attrs.get("format") != FORMAT:
                raise DataError(f"{path}: not a dynid model file")
            _check_version(handle.attrs.get("format_version"), path)
            metadata = _header(handle.attrs.get("metadata"), path)
            if not isinstance(handle.get("arrays"), h5py.Group):
                raise DataError(f"{path}: damaged model file (no arrays)")
            arrays = {name: _array(name, ds, size, path) for name, ds in handle["arrays"].items()}
    except OSError:
        raise DataError(f"{path}: damaged model file (truncated)") from None
    except (RuntimeError, KeyError, ValueError, TypeError) as exc:  # what HDF5 says of damaged structures
        raise DataError(f"{path}: damaged model file ({str(exc)[:120]})") from None
    if metadata.get("arrays_sha256") != _arrays_digest(arrays):
        raise DataError(f"{path}: damaged model file (arrays do not match their checksum)")
    try:
        backend = registry.get(metadata["backend"])
    except KeyError:
        raise DataError(f"{path}: damaged model file (no backend named)") from None
    except Exception:
        raise DataError(f"{path}: unknown model backend {str(metadata.get('backend'))[:80]!r}") from None
    try:
        params = backend.Params.from_dict(_field(metadata, "hyperparameters", dict, path))
        model = backend.restore(
            params,
            arrays,
            variables=_names(metadata, "variables", path),
            inputs=_names(metadata, "inputs", path),
            dt=_positive(metadata, "dt", path),
            metrics=_field(metadata, "metrics", (dict, type(None)), path),
            data_range=_data_range(metadata, path),
        )
    except KeyError as exc:
        raise DataError(f"{path}: damaged model file (missing {exc})") from None
    except DataError as exc:
        raise DataError(exc.args[0] if str(exc).startswith(path) else f"{path}: {exc}") from None
    except (TypeError, ValueError, IndexError) as exc:  # a forged array the backend cannot use
        raise DataError(f"{path}: damaged model file ({type(exc).__name__}: {str(exc)[:200]})") from None
    return ModelFile(model=model, metadata=metadata)


def _check_version(value: object, path: str) -> None:
    """DataError unless ``value`` is a format version this dynid reads."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
        raise DataError(f"{path}: unknown model format version {str(value)[:40]!r}")
    if value > FORMAT_VERSION:
        raise DataError(f"{path}: model format {value} is newer than this dynid reads ({FORMAT_VERSION}); upgrade dynid")
    if value < 1:
        raise DataError(f"{path}: unknown model format version {value}")


def _header(raw: object, path: str) -> dict[str, Any]:
    """The JSON header as a dict; DataError if it is not JSON text, not an object, or nested
    deeper than MAX_HEADER_DEPTH (the JSON parser would exhaust the stack first)."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            raw = None
    if not isinstance(raw, str):
        raise DataError(f"{path}: damaged model file (metadata unreadable)")
    try:
        metadata = json.loads(raw)
    except (ValueError, RecursionError):
        raise DataError(f"{path}: damaged model file (metadata unreadable)") from None
    if not isinstance(metadata, dict):
        raise DataError(f"{path}: damaged model file (metadata is not a JSON object)")
    if _depth(metadata) > MAX_HEADER_DEPTH:
        raise DataError(f"{path}: damaged model file (metadata nested deeper than {MAX_HEADER_DEPTH} levels)")
    return metadata


def _depth(value: object) -> int:
    """How deeply ``value`` nests lists and dicts (a scalar: 0), without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            deepest = max(deepest, depth + 1)
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _array(name: str, dataset: object, file_size: int, path: str) -> np.ndarray:
    """A stored array, read only when it is a plain dataset that the file can hold (dynid
    writes arrays uncompressed, so a larger one is forged: reading it could need terabytes)."""
    import h5py

    if not isinstance(dataset, h5py.Dataset) or dataset.dtype.kind == "V":
        raise DataError(f"{path}: damaged model file (array {name!r} is not an array of numbers or names)")
    if dataset.size * dataset.dtype.itemsize > file_size:
        raise DataError(f"{path}: damaged model file (array {name!r} of shape {dataset.shape} is larger than the file)")
    return dataset[()]


def _field(metadata: dict[str, Any], key: str, kind: type | tuple[type, ...], path: str) -> Any:
    """``metadata[key]`` if it is of ``kind`` (absent: None); DataError naming the field otherwise."""
    value = metadata.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise DataError(f"{path}: damaged model file ({key!r} missing or of the wrong type)")
    return value


def _names(metadata: dict[str, Any], key: str, path: str) -> tuple[str, ...]:
    names = _field(metadata, key, list, path)
    if not all(isinstance(name, str) for name in names) or len(set(names)) != len(names):
        raise DataError(f"{path}: damaged model file ({key} are not distinct names)")
    return tuple(names)


def _positive(metadata: dict[str, Any], key: str, path: str) -> float:
    value = _field(metadata, key, (int, float), path)
    if not (np.isfinite(value) and value > 0):
        raise DataError(f"{path}: damaged model file ({key} = {value} is not a positive number)")
    return float(value)


def _data_range(metadata: dict[str, Any], path: str) -> np.ndarray | None:
    """The recorded ``data_range`` as (2, d) lows and highs (NaN for a variable without
    values), None in files written before dynid recorded it; DataError if it is malformed."""
    recorded = metadata.get("data_range")
    if recorded is None:
        return None
    d = len(_names(metadata, "variables", path))
    rows = [recorded.get(side) if isinstance(recorded, dict) else None for side in ("low", "high")]
    if not all(isinstance(row, list) and len(row) == d and
               all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in row)
               for row in rows):
        raise DataError(f"{path}: damaged model file (data_range is not {d} lows and highs)")
    return np.array([[np.nan if v is None else float(v) for v in row] for row in rows])


def _stdin_bytes() -> io.BytesIO:
    """All of stdin in memory: HDF5 needs to seek, a pipe cannot."""
    import sys

    return io.BytesIO(sys.stdin.buffer.read())


def _arrays_digest(arrays: dict[str, np.ndarray]) -> str:
    digest = hashlib.sha256()
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}|{array.dtype.str}|{array.shape}|".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()
