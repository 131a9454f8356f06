"""MATLAB v7.3 MAT-files (HDF5 inside) put into the layout ``dynid.data.hdf5`` reads.

The layout, as MathWorks documents it ("MAT-File Versions": v7.3 files are HDF5 with a 512-byte
user block that starts ``MATLAB 7.3 MAT-file``) and as h5py shows it (no MATLAB was run to write
the tests; they build files the same way): each variable is a dataset at the root carrying the
attribute ``MATLAB_class`` (``double``, ``single``, ``int32``, ``logical``, ``char``, ``cell``,
...); arrays are stored column-major, so h5py sees them transposed (a MATLAB n x 3 matrix as
(3, n), a column vector n x 1 as (1, n)); a struct is a group with ``MATLAB_class`` ``struct``
whose fields are its members; cells hold object references into the group ``#refs#``, and
objects (tables, timetables, strings) live in ``#subsystem#``; an empty array is a dataset of
its dimensions with the attribute ``MATLAB_empty``.

``normalised`` copies the numeric variables into an in-memory HDF5 file with the transposition
undone: a scalar becomes an attribute of its group (so ``dt``/``t0`` scalars time the data, as
attributes do in other HDF5 files), a vector a 1-D column, a matrix has its samples along its longer axis (MATLAB
users keep both n x k and k x n; a note says when it was turned) unless the caller reads
space-time fields (``samples_first=False``: a field (n_t, n_x) may have fewer times than points). ``#refs#``, ``#subsystem#``
and the variables that are no numeric arrays (text, cells, objects, complex numbers, empties)
are left out, and a note names them.
"""

from __future__ import annotations

import numpy as np

# MATLAB classes whose arrays are numbers (``logical`` is 0/1, read as such).
_NUMERIC_CLASSES = frozenset(
    ["double", "single", "logical", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]
)
_STRUCT = "struct"


def is_matlab(handle) -> bool:  # type: ignore[no-untyped-def]
    """Whether the open h5py file ``handle`` was written by MATLAB (-v7.3): a member of its
    root carries the ``MATLAB_class`` attribute."""
    return any("MATLAB_class" in member.attrs for member in handle.values() if member is not None)


def normalised(handle, path: str, *, samples_first: bool = True):  # type: ignore[no-untyped-def]
    """An in-memory h5py file holding the numeric variables (and structs of them) of the MATLAB
    file ``handle`` in dynid's layout (samples along axis 0), with the same names; and the
    notes on what was turned or left out. The caller closes the returned file.
    ``samples_first=False``: every array as MATLAB holds it (only the stored transposition
    undone), never turned; for space-time fields, whose axes have no "longer is samples"."""
    import h5py

    # driver "core" without a backing store: the name is a label, nothing is written to disk.
    copy = h5py.File(f"{path} (MATLAB, normalised)", "w", driver="core", backing_store=False)
    turned: list[str] = []
    skipped: list[str] = []
    _copy_group(handle, copy, turned if samples_first else None, skipped)
    notes = []
    if turned:
        notes.append(
            f"{path}: MATLAB variable(s) {', '.join(turned)} stored variables x samples were read "
            "with their samples along the longer axis"
        )
    if skipped:
        notes.append(f"{path}: MATLAB variable(s) {', '.join(skipped)} are no numeric arrays and were not read")
    return copy, notes


def _class(node) -> str | None:  # type: ignore[no-untyped-def]
    value = node.attrs.get("MATLAB_class")
    if value is None:
        return None
    return bytes(value).decode() if isinstance(value, (bytes, np.bytes_)) else str(value)


def _copy_group(source, target, turned: list[str] | None, skipped: list[str]) -> None:  # type: ignore[no-untyped-def]
    import h5py

    for key, value in source.attrs.items():
        if not key.startswith("MATLAB_"):
            target.attrs[key] = value
    for name, member in source.items():
        if name.startswith("#") or member is None:  # "#refs#", "#subsystem#": MATLAB's own storage
            continue
        matlab_class = _class(member)
        if isinstance(member, h5py.Group):
            if matlab_class in (None, _STRUCT):
                _copy_group(member, target.create_group(name), turned, skipped)
            else:
                skipped.append(member.name)  # an object (table, timetable, string) in a group
            continue
        if matlab_class is None:  # a dataset MATLAB did not write: as it is
            target.create_dataset(name, data=member[()])
            for key, value in member.attrs.items():
                target[name].attrs[key] = value
            continue
        if matlab_class not in _NUMERIC_CLASSES or "MATLAB_empty" in member.attrs or member.dtype.kind not in "fiub":
            skipped.append(member.name)
            continue
        if member.size == 1:
            # A scalar (``dt = 0.01``) is no series: an attribute of its group, where a ``dt``
            # or ``t0`` gives the time axis as it does in any HDF5 file.
            target.attrs[name] = np.asarray(member[()]).reshape(())
            continue
        target.create_dataset(name, data=_matlab_array(member, turned))


def _matlab_array(dataset, turned: list[str] | None) -> np.ndarray:  # type: ignore[no-untyped-def]
    """The array MATLAB holds (the stored transposition undone), a vector as 1-D and a matrix
    with its samples along axis 0 (the longer one; ``turned`` gets its name when it was not;
    None: never turned)."""
    values = np.asarray(dataset[()]).T
    if values.ndim != 2:
        return values  # N-D arrays: as MATLAB holds them, for the reader to refuse or take
    if 1 in values.shape:
        return values.reshape(-1)
    if turned is not None and values.shape[0] < values.shape[1]:
        turned.append(dataset.name)
        return values.T
    return values
