"""HDF5 files read with h5py: 2-D datasets, groups of 1-D column datasets, pandas ``to_hdf`` groups.

Layouts (see ../shared/CONTRACT.md): a 2-D dataset (samples x variables) whose attribute
``columns`` names the variables, with an optional 1-D time dataset ``t``/``time`` beside it; a
group of 1-D datasets of equal length (one column each); a pandas ``to_hdf`` group (fixed or table
format, read without PyTables); a group whose members are such things = one trial each. A
group's own 1-D columns beside subgroups of metadata are its data (a note names the subgroups;
``file.h5:/group`` reads one); beside a subgroup that holds series too (as many samples, or
variables of the same names) the file has two plausible readings, and it is refused with the
two selectors that read one each (``file.h5:/`` and ``file.h5:/data``). Attributes
``dt``, ``t0`` (and ``time_unit``) on a dataset or its group give the time axis when no time
column does. MATLAB v7.3 files are first put into this layout (``dynid.data.matlab_hdf5``);
netCDF-4 files are in it already (variables on one dimension are 1-D columns, the time
coordinate a ``time``/``t`` dataset).
"""

from __future__ import annotations

import re

import numpy as np

from dynid.data.matlab_hdf5 import is_matlab, normalised
from dynid.data.pandas_hdf5 import is_pandas_group, read_pandas_group
from dynid.data.table import Table, check_unique_names
from dynid.data.times import AUTO_TIME_NAMES, is_time_name, parse_iso_datetimes, split_unit
from dynid.errors import DataError

# Space-time fields u(t, x, y) are 3-D datasets, which only the PDE reader takes.
PDE_HINT = " (space-time fields: dynid symbolic --pde)"


def read_hdf5(path: str, inner: str | None, wanted: set[str] | None) -> list[Table]:
    """The trials in ``path`` (under ``inner``, default the root). ``wanted``: columns to read
    from a wide 2-D dataset (time-like names are always read), None for all."""
    import h5py

    try:
        handle = h5py.File(path, "r")
    except OSError as exc:
        raise DataError(f"{path}: not a readable HDF5 file ({exc})") from None
    notes: list[str] = []
    with handle:
        try:
            if is_matlab(handle):
                copy, notes = normalised(handle, path)
                with copy:
                    tables = _read_node(path, copy, inner, wanted)
            else:
                tables = _read_node(path, handle, inner, wanted)
        except (OSError, RuntimeError, KeyError, ValueError, TypeError) as exc:  # HDF5 on damaged structures
            raise DataError(f"{path}: cannot read ({str(exc)[:120]})") from None
    tables[0].notes.extend(notes)
    return tables


def _read_node(path: str, handle, inner: str | None, wanted: set[str] | None) -> list[Table]:  # type: ignore[no-untyped-def]
    node_path = inner or "/"
    if node_path not in handle:
        raise DataError(f"{path}: no dataset or group {node_path!r} inside")
    return _collect_trials(path, handle[node_path], wanted, named=inner is not None)


def _collect_trials(path: str, node, wanted: set[str] | None, named: bool = False) -> list[Table]:  # type: ignore[no-untyped-def]
    """A 2-D dataset is one trial; so is a group holding exactly one 2-D dataset (with its time
    vector), a group of 1-D columns (see ``_single_trial`` for groups beside them), and a
    pandas group; a group of such members is one trial each; a group wrapping a single
    subgroup is looked through. ``named``: the user named ``node`` (``file.h5:/path``)."""
    import h5py

    if isinstance(node, h5py.Dataset):
        return [_vector_trial(path, node) if node.ndim == 1 else _matrix_trial(path, node, node.parent, wanted)]
    single = _single_trial(path, node, wanted, named)
    if single is not None:
        return [single]
    members = _members(node)
    datasets = [m for m in members if isinstance(m, h5py.Dataset) and m.ndim == 2]
    groups = [m for m in members if isinstance(m, h5py.Group)]
    if not datasets and len(groups) == 1:
        return _collect_trials(path, groups[0], wanted)
    tables = []
    for member in sorted(datasets + groups, key=lambda m: _natural_key(m.name)):
        if isinstance(member, h5py.Group):
            table = _single_trial(path, member, wanted)
            if table is None:
                raise DataError(
                    f"{path}:{member.name}: a trial group must hold exactly one 2-D dataset "
                    "or 1-D column datasets of equal length"
                )
            tables.append(table)
        else:
            # Several 2-D datasets side by side: each is a trial; a shared time vector would
            # be ambiguous, so their time comes from a 't' column, attributes or --dt.
            tables.append(_matrix_trial(path, member, None, wanted))
    if not tables:
        raise DataError(f"{path}:{node.name}: no 2-D dataset or 1-D columns inside{PDE_HINT}")
    return tables


def _members(group) -> list:  # type: ignore[no-untyped-def,type-arg]
    """The datasets and groups in ``group``; h5py gives None for a link that leads nowhere (a
    dangling soft or external link, or a damaged file), which holds no data; nor does the
    placeholder netCDF-4 writes for a dimension without a coordinate variable (its fill
    values, as long as the series: read, it would be a column)."""
    return [member for member in group.values() if member is not None and not _is_netcdf_dimension(member)]


# netCDF-4 marks a dimension that has no variable of its own so (then padded to its length).
_NETCDF_DIMENSION_ONLY = b"This is a netCDF dimension but not a netCDF variable."


def _is_netcdf_dimension(member) -> bool:  # type: ignore[no-untyped-def]
    name = member.attrs.get("NAME") if "CLASS" in member.attrs else None
    return isinstance(name, (bytes, np.bytes_)) and bytes(name).startswith(_NETCDF_DIMENSION_ONLY)


def _single_trial(path: str, group, wanted: set[str] | None, named: bool = False) -> Table | None:  # type: ignore[no-untyped-def]
    """The one trial ``group`` holds, or None if it holds several (or none).

    A group's own 1-D columns beside subgroups: when a subgroup holds series too (on the
    same samples, or of the same variables: a copy, a processed version, another recording),
    both readings are plausible and DataError names the two selectors, unless the user named
    ``group`` (``named``: its own columns are chosen). Subgroups of something else (metadata)
    leave the columns the data, and a note names them."""
    import h5py

    if is_pandas_group(group):
        return read_pandas_group(path, group)
    members = _members(group)
    subgroups = [m for m in members if isinstance(m, h5py.Group)]
    datasets = [m for m in members if isinstance(m, h5py.Dataset)]
    matrices = [m for m in datasets if m.ndim == 2]
    if len(matrices) == 1 and not subgroups:
        return _matrix_trial(path, matrices[0], group, wanted)
    vectors = [m for m in datasets if m.ndim == 1]
    if matrices or not vectors or len({m.shape[0] for m in vectors}) != 1:
        return None
    if not subgroups:
        return _columns_trial(path, group, vectors)
    if all(is_time_name(m.name.rsplit("/", 1)[-1]) for m in vectors):
        return None  # a time vector beside the groups that hold the data
    table = _columns_trial(path, group, vectors)
    subgroups = sorted(subgroups, key=lambda m: _natural_key(m.name))
    if not named:
        rival = next((m for m in subgroups if _holds_series_like(path, m, table)), None)
        if rival is not None:
            raise DataError(
                f"{path}:{group.name}: its 1-D columns ({', '.join(table.columns)}) and the group "
                f"{rival.name} both hold series; name the one to read: {path}:{group.name} or {path}:{rival.name}"
            )
    # The group's own columns are its data; groups beside them that hold no such series
    # (metadata) are not read with them, which the user hears, with how to read one instead.
    others = ", ".join(m.name for m in subgroups)
    table.notes.append(
        f"{path}:{group.name}: read its 1-D columns ({', '.join(table.columns)}); the group(s) "
        f"{others} beside them were not read (name one to read it instead: {path}:{subgroups[0].name})"
    )
    return table


def _holds_series_like(path: str, group, columns: Table) -> bool:  # type: ignore[no-untyped-def]
    """Whether ``group`` reads as trials (``_collect_trials``) of which one has as many samples
    as ``columns`` or a variable of the same name (a time column aside): another plausible
    reading of the file. Something that does not read as trials (metadata) is none."""
    own = {name for name in columns.columns if not is_time_name(name)}
    try:
        tables = _collect_trials(path, group, None)
    except (DataError, OSError, RuntimeError, KeyError, ValueError, TypeError):
        return False
    return any(t.n_rows == columns.n_rows or own & set(t.columns) for t in tables)


def _matrix_trial(path: str, dataset, parent, wanted: set[str] | None) -> Table:  # type: ignore[no-untyped-def]
    where = f"{path}:{dataset.name}"
    if dataset.ndim != 2:
        raise DataError(f"{where}: expected a 2-D dataset (samples x variables), got {dataset.ndim}-D{PDE_HINT}")
    if dataset.dtype.kind not in "fiu":
        raise DataError(f"{where}: dataset is not numeric")
    n_rows, n_columns = dataset.shape
    attribute = dataset.attrs.get("columns")
    if attribute is None and n_rows < n_columns:
        # Arrays written variables x samples (MATLAB, or numpy without a transpose) look so.
        raise DataError(
            f"{where}: shape {dataset.shape} would be {n_rows} samples of {n_columns} variables "
            "(rows are samples); if the rows are variables, store the transpose, else name the "
            "variables in a 'columns' attribute"
        )
    names = _names(attribute, [f"x{i}" for i in range(n_columns)], where)
    if len(names) != n_columns:
        transposed = "; the rows look like the variables: store the transpose" if len(names) == n_rows else ""
        raise DataError(f"{where}: attribute 'columns' names {len(names)} columns, data has {n_columns}{transposed}")
    keep = [i for i, name in enumerate(names) if wanted is None or _is_wanted(name, wanted)]
    # h5py reads a column selection (increasing indices) without loading the rest.
    values = np.asarray(dataset[:, keep] if len(keep) < len(names) else dataset[()], dtype=float)
    columns = {names[i]: values[:, k] for k, i in enumerate(keep)}
    unread = tuple(name for name in names if name not in columns)
    table = Table(columns=columns, label=where, unread=unread, named_by_dynid=attribute is None)
    return _with_time_attrs(_with_time_beside(path, table, parent), dataset, parent)


def _vector_trial(path: str, dataset) -> Table:  # type: ignore[no-untyped-def]
    """One 1-D dataset named on its own (``file.h5:/x``): one column, timed like a 2-D one."""
    values, aware = _vector(path, dataset)
    name = dataset.name.rsplit("/", 1)[-1]
    table = Table(columns={name: values}, label=f"{path}:{dataset.name}", utc=frozenset([name] if aware else []))
    return _with_time_attrs(_with_time_beside(path, table, dataset.parent), dataset, dataset.parent)


def _with_time_beside(path: str, table: Table, parent) -> Table:  # type: ignore[no-untyped-def]
    """``table`` with the 1-D time dataset ``t``/``time`` of ``parent`` (None: none) as its
    first column, when there is one and the table has no such column."""
    if parent is None:
        return table
    for time_name in AUTO_TIME_NAMES:
        member = parent.get(time_name)
        if member is not None and member.ndim == 1 and time_name not in table.columns:
            if member.shape[0] != table.n_rows:
                raise DataError(f"{path}:{member.name}: time has {member.shape[0]} samples, data {table.n_rows}")
            time_values, aware = _vector(path, member)
            table.columns = {time_name: time_values, **table.columns}
            table.utc = table.utc | frozenset([time_name] if aware else [])
            break
    return table


def _is_wanted(name: str, wanted: set[str]) -> bool:
    """Named (with or without its unit), or a time column, which --columns never names."""
    return name in wanted or split_unit(name)[0] in wanted or is_time_name(name)


def _columns_trial(path: str, group, vectors: list) -> Table:  # type: ignore[type-arg]
    """A group of 1-D datasets, one column each, ordered by the group's ``columns`` attribute
    when it has one, else by creation order (when tracked) or name."""
    by_name = {m.name.rsplit("/", 1)[-1]: m for m in vectors}
    order = _names(group.attrs.get("columns"), list(by_name), f"{path}:{group.name}")
    missing = [name for name in order if name not in by_name]
    if missing:
        raise DataError(f"{path}:{group.name}: attribute 'columns' names {missing[0]!r}, which is not a dataset")
    columns: dict[str, np.ndarray] = {}
    utc: set[str] = set()
    for name in order:
        columns[name], aware = _vector(path, by_name[name])
        if aware:
            utc.add(name)
    # The time attributes may sit on the group or on the columns (all that carry them must agree).
    carriers = [by_name[name] for name in order if "dt" in by_name[name].attrs]
    steps = {(str(m.attrs["dt"]), str(m.attrs.get("t0", 0.0))) for m in carriers}
    if "dt" not in group.attrs and len(steps) > 1:
        raise DataError(f"{path}:{group.name}: its datasets have different 'dt'/'t0' attributes")
    table = Table(columns=columns, label=f"{path}:{group.name}", utc=frozenset(utc))
    return _with_time_attrs(table, group, carriers[0] if carriers else None)


def _vector(path: str, dataset) -> tuple[np.ndarray, bool]:  # type: ignore[no-untyped-def]
    """A 1-D dataset as float, or as datetime64 when it holds ISO-8601 text; and whether zoned."""
    values = dataset[()]
    if values.dtype.kind in "fiu":
        return np.asarray(values, dtype=float), False
    if values.dtype.kind in "SOU":
        text = np.array([v.decode() if isinstance(v, bytes) else v for v in values], dtype=object)
        try:
            parsed = parse_iso_datetimes(text)
        except DataError as exc:
            raise DataError(f"{path}:{dataset.name}: {exc}") from None
        return parsed if parsed is not None else (text, False)
    return np.asarray(values, dtype=object), False


def _with_time_attrs(table: Table, dataset, group) -> Table:  # type: ignore[no-untyped-def]
    """Copy ``dt``/``t0``/``time_unit`` attributes of the dataset (first) or its group onto ``table``."""
    for node in (dataset, group):
        if node is None or "dt" not in node.attrs:
            continue
        try:
            table.dt = float(np.asarray(node.attrs["dt"]).item())
            table.t0 = float(np.asarray(node.attrs.get("t0", 0.0)).item())
        except (TypeError, ValueError):
            raise DataError(f"{table.label}: attributes 'dt'/'t0' are not numbers") from None
        if not (np.isfinite(table.dt) and table.dt > 0):
            raise DataError(f"{table.label}: attribute 'dt' = {table.dt} is not a positive number")
        unit = node.attrs.get("time_unit")
        table.time_unit = unit.decode() if isinstance(unit, bytes) else (None if unit is None else str(unit))
        break
    return table


def _names(attribute, default: list[str], where: str) -> list[str]:  # type: ignore[no-untyped-def]
    """The names in a ``columns`` attribute (``default`` without one); DataError on a repeat."""
    if attribute is None:
        return default
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in np.atleast_1d(attribute)]
    check_unique_names(names, f"{where}: attribute 'columns'")
    return names


def _natural_key(text: str) -> list[object]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]
