"""Writers for tabular results (forecasts): CSV to a file or stdout, or HDF5; always atomic."""

from __future__ import annotations

import io

import numpy as np

from dynid.atomic import atomic_path, write_text
from dynid.data.readers import is_hdf5


def write_table(
    target: str, time_name: str, t: np.ndarray, names: tuple[str, ...], values: np.ndarray
) -> None:
    """Write times (n,) and values (n, k) with a header to ``target``.

    ``.h5``/``.hdf5`` targets get a 2-D dataset ``/data`` (attribute ``columns``) with a 1-D
    ``/t`` beside it - the layout ``dynid.load`` reads back. Anything else (``-`` = stdout) is
    CSV; numbers are written with 17 significant digits so they read back bit-identically.
    """
    if target != "-" and is_hdf5(target):
        import h5py

        with atomic_path(target) as temp, h5py.File(temp, "w") as handle:
            data = handle.create_dataset("data", data=np.asarray(values, dtype=float))
            data.attrs["columns"] = np.array(names, dtype=object)
            handle.create_dataset(time_name if time_name in ("t", "time") else "t", data=t)
        return
    buffer = io.StringIO()
    table = np.column_stack([t, values])
    buffer.write(",".join(_csv_field(name) for name in (time_name, *names)) + "\n")
    np.savetxt(buffer, table, delimiter=",", fmt="%.17g")
    write_text(target, buffer.getvalue())


def _csv_field(name: str) -> str:
    if any(ch in name for ch in ',"\n'):
        return '"' + name.replace('"', '""') + '"'
    return name
