"""``.dynid`` model files: HDF5 holding learned arrays as datasets and metadata as JSON.

Layout (format version 1):
    /               attrs: format="dynid-model", format_version=1, metadata=<JSON string>
    /arrays/<name>  one dataset per array of ``Backend.arrays()``
The metadata records dynid version, backend, hyperparameters, variable and input names, dt
(with the data's time unit and whether its times were date-times),
the sha256 of the training data, fit metrics, seed, device, UTC time and a sha256 over the
arrays, so that a truncated or edited file is refused. Loading never executes stored code.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import io
import json
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
    missing, foreign, newer or damaged."""
    import h5py

    source = _stdin_bytes() if path == "-" else path
    path = "<stdin>" if path == "-" else path  # the name in messages
    try:
        handle = h5py.File(source, "r")
    except FileNotFoundError:
        raise DataError(f"{path}: no such model file") from None
    except OSError:
        raise DataError(f"{path}: not a dynid model file (unreadable or truncated HDF5)") from None
    try:
        with handle:
            if handle.attrs.get("format") != FORMAT:
                raise DataError(f"{path}: not a dynid model file")
            version = int(handle.attrs.get("format_version", -1))
            if version > FORMAT_VERSION:
                raise DataError(
                    f"{path}: model format {version} is newer than this dynid reads "
                    f"({FORMAT_VERSION}); upgrade dynid"
                )
            if version < 1:
                raise DataError(f"{path}: unknown model format version {version}")
            try:
                metadata = json.loads(handle.attrs["metadata"])
            except (KeyError, ValueError):
                raise DataError(f"{path}: damaged model file (metadata unreadable)") from None
            if "arrays" not in handle:
                raise DataError(f"{path}: damaged model file (no arrays)")
            arrays = {name: ds[()] for name, ds in handle["arrays"].items()}
    except OSError:
        raise DataError(f"{path}: damaged model file (truncated)") from None
    if metadata.get("arrays_sha256") != _arrays_digest(arrays):
        raise DataError(f"{path}: damaged model file (arrays do not match their checksum)")
    try:
        backend = registry.get(metadata["backend"])
    except KeyError:
        raise DataError(f"{path}: damaged model file (no backend named)") from None
    except Exception:
        raise DataError(f"{path}: unknown model backend {metadata.get('backend')!r}") from None
    try:
        params = backend.Params.from_dict(metadata["hyperparameters"])
        model = backend.restore(
            params,
            arrays,
            variables=tuple(metadata["variables"]),
            inputs=tuple(metadata["inputs"]),
            dt=float(metadata["dt"]),
            metrics=metadata.get("metrics"),
        )
    except KeyError as exc:
        raise DataError(f"{path}: damaged model file (missing {exc})") from None
    except DataError as exc:
        raise DataError(f"{path}: {exc}") from None
    return ModelFile(model=model, metadata=metadata)


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
