"""Space-time fields from HDF5: u(t, x) or u(t, x, y) on a uniform grid, for PDE identification.

Layout (``dynid symbolic FILE.h5 --pde``; any HDF5 file as ``readers.is_hdf5`` tells one:
netCDF-4, and MATLAB v7.3 with its column-major storage undone, so that a MATLAB (n_t, n_x) array
is (n_t, n_x) here): in one group (the root, or ``file.h5:/group``), each
field is a dataset of shape (n_t, n_x) or (n_t, n_x, n_y), all of one shape; the coordinates are
1-D datasets named ``t`` (or ``time``), ``x`` and ``y`` beside them, or attributes ``dt``,
``dx``, ``dy`` (and ``t0``, ``x0``, ``y0``) of the field or the group. A 2-D dataset is read as a
field only here: elsewhere it means samples x variables.

The weak form integrates on uniform grids, so every axis must be uniformly spaced.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from dynid.data.matlab_hdf5 import is_matlab, normalised
from dynid.data.readers import is_hdf5, refuse_foreign, split_hdf5_path
from dynid.data.times import AUTO_TIME_NAMES
from dynid.errors import DataError

SPACE_NAMES = ("x", "y")
# Relative deviation of a coordinate step from the mean step still counted as uniform (the
# round-off of coordinates written as float32 is ~1e-7 of their magnitude).
UNIFORM_TOLERANCE = 1e-5


@dataclass(frozen=True)
class SpaceTimeFields:
    """Fields sampled on a uniform space-time grid.

    ``values`` (n_fields, n_t, *n_space), one entry per name in ``names``; ``t`` (n_t,) times;
    ``space`` one (n_a,) coordinate array per spatial axis, named ``space_names`` (``x``, ``y``);
    ``source`` the file (and group) read, for messages; ``notes`` what the reader turned or
    left out (MATLAB variables that are no numeric arrays), for the log.
    """

    names: tuple[str, ...]
    values: np.ndarray
    t: np.ndarray
    space: tuple[np.ndarray, ...]
    space_names: tuple[str, ...]
    source: str
    notes: tuple[str, ...] = ()

    @property
    def steps(self) -> tuple[float, ...]:
        """The grid steps (dt, dx[, dy]) in the coordinates' units."""
        return tuple(float(a[1] - a[0]) for a in (self.t, *self.space))


def read_fields(spec: str, fields: list[str] | None = None, dt: float | None = None) -> SpaceTimeFields:
    """The space-time fields in ``spec`` (``file.h5`` or ``file.h5:/group``); ``fields``: the
    datasets to read (default every dataset of 2 or more dimensions); ``dt``: the time step when
    the file has neither a time dataset nor a ``dt`` attribute. DataError naming the file and
    dataset on any inconsistency."""
    import h5py

    path, inner = split_hdf5_path(spec)
    if not is_hdf5(spec):
        raise DataError(
            f"{spec}: space-time fields (--pde) are read from HDF5 files (.h5, .hdf5, netCDF-4 .nc, MATLAB v7.3 .mat, ...)"
        )
    refuse_foreign(path)
    try:
        handle = h5py.File(path, "r")
    except OSError as exc:
        raise DataError(f"{path}: not a readable HDF5 file ({exc})") from None
    with handle:
        if not is_matlab(handle):
            return _read_node(spec, path, handle, inner, fields, dt)
        # MATLAB stores arrays column-major: a field (n_t, n_x) appears as (n_x, n_t); the copy
        # holds them as MATLAB does, vectors 1-D and scalars (dt, dx) as attributes.
        copy, notes = normalised(handle, path, samples_first=False)
        with copy:
            read = _read_node(spec, path, copy, inner, fields, dt)
        return dataclasses.replace(read, notes=tuple(notes))


def _read_node(spec: str, path: str, handle, inner: str | None, fields: list[str] | None, dt: float | None) -> SpaceTimeFields:  # type: ignore[no-untyped-def]
    import h5py

    if inner and inner not in handle:
        raise DataError(f"{path}: no group {inner!r} inside")
    group = handle[inner] if inner else handle
    if not isinstance(group, h5py.Group):
        raise DataError(f"{spec}: --pde reads a group of field datasets, not a single dataset")
    return _read_group(spec, group, fields, dt)


def _read_group(spec: str, group, fields: list[str] | None, dt: float | None) -> SpaceTimeFields:  # type: ignore[no-untyped-def]
    import h5py

    datasets = {name: m for name, m in group.items() if isinstance(m, h5py.Dataset)}
    coordinate_names = {*AUTO_TIME_NAMES, *SPACE_NAMES}
    if fields is None:
        fields = [n for n, m in datasets.items() if m.ndim >= 2 and n not in coordinate_names]
    if not fields:
        raise DataError(f"{spec}: no field dataset of shape (n_t, n_x) or (n_t, n_x, n_y) inside")
    missing = [n for n in fields if n not in datasets]
    if missing:
        raise DataError(f"{spec}: no dataset {missing[0]!r} (fields there: {', '.join(sorted(datasets))})")
    shape = datasets[fields[0]].shape
    for name in fields:
        member = datasets[name]
        if member.dtype.kind not in "fiu":
            raise DataError(f"{spec}:{name}: not numeric")
        if member.ndim not in (2, 3):
            raise DataError(f"{spec}:{name}: shape {member.shape}; a field is (n_t, n_x) or (n_t, n_x, n_y)")
        if member.shape != shape:
            raise DataError(f"{spec}:{name}: shape {member.shape} differs from {fields[0]}'s {shape}")
    values = np.stack([np.asarray(datasets[n][()], dtype=float) for n in fields])
    if not np.isfinite(values).all():
        raise DataError(f"{spec}: the fields hold NaN or infinite values; the weak form needs a full grid")
    first = datasets[fields[0]]
    t = _axis(spec, group, first, datasets, AUTO_TIME_NAMES, "dt", "t0", shape[0], dt)
    space = tuple(
        _axis(spec, group, first, datasets, (name,), f"d{name}", f"{name}0", n, None)
        for name, n in zip(SPACE_NAMES, shape[1:])
    )
    return SpaceTimeFields(tuple(fields), values, t, space, SPACE_NAMES[: len(space)], spec)


def _axis(  # type: ignore[no-untyped-def]
    spec: str, group, field, datasets: dict, names: tuple[str, ...], step_attr: str, origin_attr: str,
    n: int, step: float | None,
) -> np.ndarray:
    """One axis's n uniformly spaced coordinates: the first dataset in ``names``, else the
    attributes ``step_attr`` / ``origin_attr`` of the field or the group, else ``step``."""
    for name in names:
        if name in datasets:
            values = np.asarray(datasets[name][()], dtype=float)
            if values.shape != (n,):
                raise DataError(f"{spec}:{name}: {values.shape} coordinates, the fields have {n} along this axis")
            return _uniform(spec, name, values)
    origin = 0.0
    for node in (field, group):
        if step_attr in node.attrs:
            try:
                step = float(np.asarray(node.attrs[step_attr]).item())
                origin = float(np.asarray(node.attrs.get(origin_attr, 0.0)).item())
            except (TypeError, ValueError):
                raise DataError(f"{spec}: attribute {step_attr!r} is not a number") from None
            break
    if step is None:
        raise DataError(f"{spec}: no coordinate dataset {names[0]!r} and no attribute {step_attr!r}")
    if not (np.isfinite(step) and step > 0):
        raise DataError(f"{spec}: {step_attr} = {step} is not a positive number")
    return origin + step * np.arange(n)


def _uniform(spec: str, name: str, values: np.ndarray) -> np.ndarray:
    steps = np.diff(values)
    if values.size < 2 or not np.all(np.isfinite(values)) or steps.mean() <= 0:
        raise DataError(f"{spec}:{name}: coordinates must be finite and increasing")
    if np.max(np.abs(steps - steps.mean())) > UNIFORM_TOLERANCE * max(np.abs(values).max(), steps.mean()):
        raise DataError(f"{spec}:{name}: coordinates are not uniformly spaced; the weak form needs a uniform grid")
    return values
