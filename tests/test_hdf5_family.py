"""HDF5 under other names: recognised by its signature, MATLAB v7.3 and netCDF-4 files.

Files are built as their programs write them. MATLAB cannot run here: the v7.3 files are made
with h5py in the layout MathWorks documents ("MAT-File Versions"; HDF5 with a 512-byte user
block starting "MATLAB 7.3 MAT-file") and that h5py shows for files MATLAB wrote: variables
stored column-major (an n x 3 matrix as (3, n), a column vector as (1, n)), the attribute
``MATLAB_class``, cells as references into ``#refs#``. netCDF-4 files are written by h5netcdf
and, for its layout alone, by h5py (dimension scales, ``DIMENSION_LIST``, ``_Netcdf4Dimid``).
"""

import h5py
import numpy as np
import pytest

from dynid.data import load
from dynid.data.readers import has_hdf5_signature, is_hdf5
from dynid.data.writers import is_hdf5_target
from dynid.errors import DataError

N = 50
DT = 0.1
T = 2.0 + np.arange(N) * DT
X = np.column_stack([np.sin(T), np.cos(T), 0.5 * T])


def _plain_hdf5(path, userblock_size=0):
    with h5py.File(path, "w", userblock_size=userblock_size) as handle:
        handle["t"] = T
        handle["data"] = X
        handle["data"].attrs["columns"] = ["a", "b", "c"]


@pytest.mark.parametrize("name", ["d.hdf", "d.he5", "d.bin", "d", "d.dat", "d.H5"])
@pytest.mark.parametrize("userblock", [0, 512, 1024, 4096])
def test_hdf5_is_recognised_by_its_signature_under_any_name(tmp_path, name, userblock):
    path = tmp_path / name
    _plain_hdf5(path, userblock)
    assert has_hdf5_signature(str(path)) and is_hdf5(str(path))
    data = load(str(path))
    assert data.variables == ("a", "b", "c")
    np.testing.assert_array_equal(data.trials[0].t, T)
    np.testing.assert_array_equal(data.trials[0].x, X)


def test_text_is_not_taken_for_hdf5_and_text_suffixes_are_not_looked_into(tmp_path):
    text = tmp_path / "d.dat"
    text.write_text("t,x\n0,1\n1,2\n2,4\n")
    assert not has_hdf5_signature(str(text)) and not is_hdf5(str(text))
    assert load(str(text)).variables == ("x",)
    # A text suffix is text even when the bytes are HDF5 (an error from the CSV reader, not h5py).
    disguised = tmp_path / "d.csv"
    _plain_hdf5(disguised)
    assert not is_hdf5(str(disguised))
    # Signatures count only at 0, 512, 1024, ...: one elsewhere is text's business.
    shifted = tmp_path / "shifted"
    shifted.write_bytes(b"x" * 100 + b"\x89HDF\r\n\x1a\n" + b"\0" * 2000)
    assert not has_hdf5_signature(str(shifted))
    assert not is_hdf5("-")


def test_written_hdf5_is_chosen_by_h5_suffixes_only():
    assert is_hdf5_target("out.h5") and is_hdf5_target("OUT.HDF5")
    assert not is_hdf5_target("out.mat") and not is_hdf5_target("out.nc") and not is_hdf5_target("-")


@pytest.mark.parametrize("name", ["out.nc", "OUT.MAT", "out.hdf"])
def test_a_table_is_not_written_under_an_hdf5_family_name_it_would_not_be(cli, tmp_path, name):
    """CSV under a .nc/.mat name would be a file no reader takes for what its name says (dynid
    itself refuses it as not HDF5): usage error, nothing written."""
    from dynid.data.writers import write_table
    from dynid.errors import UsageError

    with pytest.raises(UsageError, match="h5 or .csv"):
        write_table(str(tmp_path / name), "t", np.arange(3.0), ("x",), np.ones((3, 1)))
    result = cli("simulate", "lorenz", "--n", "50", "-o", str(tmp_path / name))
    assert result.returncode == 2 and result.stderr.decode().count("\n") == 1, result.stderr.decode()
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("command", [["simulate", "lorenz", "--n", "50"],
                                     ["forecast", "MODEL", "DATA", "--horizon", "3"]])
def test_a_table_is_not_written_as_csv_under_a_json_name(cli, tmp_path, command):
    """forecast -o f.json wrote CSV into f.json, which report then refused as 'not valid
    JSON': usage error naming --json, nothing written."""
    data = tmp_path / "d.csv"
    data.write_text("t,x\n" + "".join(f"{k},{0.9 ** k}\n" for k in range(30)))
    model = tmp_path / "m.dynid"
    assert cli("fit", data, "--model", "var", "-p", "order=1", "-o", model, "-q").returncode == 0
    named = {"MODEL": str(model), "DATA": str(data)}
    result = cli(*[named.get(a, a) for a in command], "-o", str(tmp_path / "f.json"))
    assert result.returncode == 2 and result.stderr.decode().count("\n") == 1, result.stderr.decode()
    assert "--json" in result.stderr.decode() and not (tmp_path / "f.json").exists()


# ---------------------------------------------------------------------------------- MATLAB v7.3
MATLAB_HEADER = b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Wed Dec  2 12:00:00 2026 HDF5 schema 1.00 ."


def _matlab_file(path, variables, structs=None):
    """A v7.3 MAT-file as MATLAB writes it: ``variables`` are MATLAB arrays (numpy, in MATLAB's
    shape: n x 1 for a column vector), stored transposed with ``MATLAB_class``; a cell of two
    vectors in ``#refs#`` (as long as the data: read, it would be a rival trial), a char array
    and an empty array beside them; ``structs``: name -> {field: array}."""
    with h5py.File(path, "w", userblock_size=512) as handle:
        for name, value in variables.items():
            _matlab_dataset(handle, name, value)
        for name, fields in (structs or {}).items():
            group = handle.create_group(name)
            group.attrs["MATLAB_class"] = np.bytes_("struct")
            for field, value in fields.items():
                _matlab_dataset(group, field, value)
        refs = handle.create_group("#refs#")
        cell_items = []
        for key, value in (("a", np.arange(N, dtype=float)), ("b", np.ones(N))):
            _matlab_dataset(refs, key, value.reshape(-1, 1))
            cell_items.append(refs[key].ref)
        cell = handle.create_dataset("notes", data=np.array(cell_items, dtype=h5py.ref_dtype).reshape(2, 1))
        cell.attrs["MATLAB_class"] = np.bytes_("cell")
        label = handle.create_dataset("label", data=np.frombuffer("pump 3".encode("utf-16-le"), "<u2").reshape(-1, 1))
        label.attrs["MATLAB_class"] = np.bytes_("char")
        label.attrs["MATLAB_int_decode"] = np.int32(2)
        empty = handle.create_dataset("unused", data=np.array([0, 0], dtype=np.uint64))
        empty.attrs["MATLAB_class"] = np.bytes_("double")
        empty.attrs["MATLAB_empty"] = np.uint8(1)
    with open(path, "r+b") as raw:  # the user block: MATLAB's text header, then its version bytes
        raw.write(MATLAB_HEADER.ljust(116, b" ") + b"\0" * 8 + b"\x00\x02IM")


def _matlab_dataset(group, name, value):
    group[name] = np.asarray(value).T  # MATLAB is column-major: h5py sees the transpose
    group[name].attrs["MATLAB_class"] = np.bytes_("double")


def test_matlab_matrix_and_time_vector(tmp_path):
    """save('d.mat', 't', 'X', '-v7.3') with X n x 3 and t n x 1: X is stored (3, n)."""
    path = tmp_path / "d.mat"
    _matlab_file(path, {"t": T.reshape(-1, 1), "X": X})
    with h5py.File(path, "r") as handle:
        assert handle["X"].shape == (3, N) and handle["t"].shape == (1, N) and handle.userblock_size == 512
    data = load(str(path))
    assert data.variables == ("x0", "x1", "x2") and data.n_samples == N
    np.testing.assert_array_equal(data.trials[0].t, T)
    np.testing.assert_array_equal(data.trials[0].x, X)
    notes = " ".join(data.notes)
    assert "/label" in notes and "/notes" in notes and "/unused" in notes  # named, not read


def test_matlab_column_vectors_are_columns_and_refs_are_ignored(tmp_path):
    path = tmp_path / "d.mat"
    _matlab_file(path, {"time": T.reshape(-1, 1), "x": X[:, :1], "y": X[:, 1:2]})
    data = load(str(path))
    assert data.variables == ("x", "y")
    np.testing.assert_array_equal(data.trials[0].t, T)
    np.testing.assert_array_equal(data.trials[0].x, X[:, :2])


def test_matlab_row_vectors_and_a_scalar_dt(tmp_path):
    """Row vectors (1 x n, stored (n, 1)) are columns too; a scalar dt times them."""
    path = tmp_path / "d.mat"
    _matlab_file(path, {"x": X[:, 0].reshape(1, -1), "y": X[:, 1].reshape(1, -1), "dt": np.array([[DT]])})
    data = load(str(path))
    assert data.variables == ("x", "y") and data.dt == pytest.approx(DT)
    np.testing.assert_allclose(data.trials[0].t, np.arange(N) * DT)
    np.testing.assert_array_equal(data.trials[0].x, X[:, :2])


def test_matlab_matrix_of_variables_by_samples_is_turned_with_a_note(tmp_path):
    """X' (3 x n, stored (n, 3)): the samples are the longer axis."""
    path = tmp_path / "d.mat"
    _matlab_file(path, {"t": T.reshape(1, -1), "X": X.T})
    data = load(str(path))
    np.testing.assert_array_equal(data.trials[0].x, X)
    np.testing.assert_array_equal(data.trials[0].t, T)
    assert any("/X" in note and "longer axis" in note for note in data.notes)


def test_matlab_struct_fields_are_columns(tmp_path):
    path = tmp_path / "d.mat"
    _matlab_file(path, {}, structs={"run": {"t": T.reshape(-1, 1), "u": X[:, :1], "v": X[:, 2:3]}})
    data = load(str(path))
    assert data.variables == ("u", "v")
    np.testing.assert_array_equal(data.trials[0].t, T)
    np.testing.assert_array_equal(data.trials[0].x, X[:, [0, 2]])
    inner = load(f"{path}:/run")
    np.testing.assert_array_equal(inner.trials[0].x, X[:, [0, 2]])


def test_matlab_fields_for_pde_are_read_as_matlab_holds_them(tmp_path):
    """save('f.mat', 'u', 'v', 't', 'x', 'y', '-v7.3') with fields n_t x n_x x n_y: stored
    (n_y, n_x, n_t) and read back (n_t, n_x, n_y), never turned by length (n_t < n_x here);
    coordinate vectors of either orientation are 1-D, a scalar dt times the field."""
    from dynid.data.fields import read_fields

    t, x, y = 0.5 + np.arange(4) * 0.5, np.arange(9) * 0.25, np.arange(3) * 0.1
    u = np.random.default_rng(0).normal(size=(4, 9, 3))
    path = tmp_path / "f.mat"
    _matlab_file(path, {"u": u, "v": 2 * u, "t": t.reshape(-1, 1), "x": x.reshape(1, -1), "y": y.reshape(-1, 1)})
    with h5py.File(path, "r") as handle:
        assert handle["u"].shape == (3, 9, 4)
    fields = read_fields(str(path))
    assert fields.names == ("u", "v") and fields.values.shape == (2, 4, 9, 3)
    np.testing.assert_array_equal(fields.values[0], u)
    np.testing.assert_array_equal(fields.t, t)
    np.testing.assert_array_equal(fields.space[0], x)
    np.testing.assert_array_equal(fields.space[1], y)
    flat = tmp_path / "g.mat"  # a 2-D field n_t x n_x with scalar steps, in a struct
    _matlab_file(flat, {}, structs={"run": {"w": u[:, :, 0], "dt": np.array([[0.5]]), "dx": np.array([[0.25]])}})
    fields = read_fields(f"{flat}:/run")
    np.testing.assert_array_equal(fields.values[0], u[:, :, 0])
    assert fields.steps == pytest.approx((0.5, 0.25))


def test_pde_from_matlab_and_netcdf_fields(tmp_path, cli):
    """Burgers' fields (101 times x 256 points) as MATLAB and netCDF-4 store them give its PDE."""
    from dynid.systems.pde import PDE_SYSTEMS

    run = PDE_SYSTEMS["burgers"]()
    matlab = tmp_path / "burgers.mat"
    _matlab_file(matlab, {"u": run.values[0], "t": run.t.reshape(-1, 1), "x": run.space[0].reshape(1, -1)})
    netcdf = tmp_path / "burgers.nc"
    with h5py.File(netcdf, "w") as handle:  # variables u(time, x) beside their coordinates
        handle["time"], handle["x"], handle["u"] = run.t, run.space[0], run.values[0]
    for path in (matlab, netcdf):
        result = cli("symbolic", path, "--pde", "-p", "ensemble=0")
        assert result.returncode == 0, result.stderr
        assert result.stdout.decode().startswith("u_t = -u u_x + 0.1 u_xx"), result.stdout
    # the cell, char and empty variables are said to be left out, as a table read says
    log = cli("symbolic", matlab, "--pde", "-p", "ensemble=0").stderr.decode()
    assert "MATLAB variable(s) /label, /notes, /unused are no numeric arrays and were not read" in log, log


def test_pde_fields_refuse_matlab_v5_and_text_with_one_line(tmp_path):
    scipy_io = pytest.importorskip("scipy.io")
    from dynid.data.fields import read_fields

    path = tmp_path / "f.mat"
    scipy_io.savemat(str(path), {"u": np.zeros((5, 4)), "t": np.arange(5.0), "x": np.arange(4.0)})
    with pytest.raises(DataError, match="MATLAB v5.*-v7.3"):
        read_fields(str(path))
    text = tmp_path / "f.csv"
    text.write_text("t,u\n0,1\n")
    with pytest.raises(DataError, match="read from HDF5 files"):
        read_fields(str(text))


def test_matlab_v5_file_is_refused_with_one_line(tmp_path, cli):
    scipy_io = pytest.importorskip("scipy.io")
    path = tmp_path / "d.mat"
    scipy_io.savemat(str(path), {"t": T.reshape(-1, 1), "X": X})  # MATLAB 5.0 MAT-file
    with pytest.raises(DataError, match="-v7.3"):
        load(str(path))
    result = cli("discover-causal", path, "--method", "granger")
    assert result.returncode == 3 and result.stdout == b""
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "-v7.3" in lines[0] and "CSV" in lines[0] and str(path) in lines[0]


def test_damaged_file_with_an_hdf5_suffix_is_refused(tmp_path):
    path = tmp_path / "d.nc"
    path.write_bytes(b"not netcdf at all\n" * 10)
    with pytest.raises(DataError, match="not a readable HDF5 file"):
        load(str(path))


# ------------------------------------------------------------------------------------- netCDF-4
def _netcdf_by_h5netcdf(path):
    h5netcdf = pytest.importorskip("h5netcdf")
    with h5netcdf.File(path, "w") as handle:
        handle.attrs["title"] = "pump test"
        handle.dimensions = {"time": N}
        time = handle.create_variable("time", ("time",), float)
        time[:] = T
        time.attrs["units"] = "s"
        for index, name in enumerate(("x", "y")):
            handle.create_variable(name, ("time",), float)[:] = X[:, index]


def _netcdf_by_h5py(path):
    """The layout netCDF4-python writes: the coordinate variable 'time' a dimension scale with
    ``_Netcdf4Dimid``, each variable attached to it (``DIMENSION_LIST``)."""
    with h5py.File(path, "w", track_order=True) as handle:
        handle.attrs["_NCProperties"] = np.bytes_("version=2,netcdf=4.9.2,hdf5=1.14.3")
        time = handle.create_dataset("time", data=T)
        time.make_scale("time")
        time.attrs["_Netcdf4Dimid"] = np.int32(0)
        for index, name in enumerate(("x", "y")):
            handle[name] = X[:, index]
            handle[name].dims[0].attach_scale(time)


@pytest.mark.parametrize("write", [_netcdf_by_h5netcdf, _netcdf_by_h5py])
@pytest.mark.parametrize("suffix", [".nc", ".nc4", ".cdf"])
def test_netcdf4_time_coordinate_is_the_time(tmp_path, write, suffix):
    path = tmp_path / f"d{suffix}"
    write(path)
    with h5py.File(path, "r") as handle:
        assert "DIMENSION_LIST" in handle["x"].attrs
    data = load(str(path))
    assert data.variables == ("x", "y")
    np.testing.assert_array_equal(data.trials[0].t, T)
    np.testing.assert_array_equal(data.trials[0].x, X[:, :2])


def test_netcdf3_file_is_refused_with_one_line(tmp_path, cli):
    scipy_io = pytest.importorskip("scipy.io")
    path = tmp_path / "d.nc"
    with scipy_io.netcdf_file(str(path), "w") as handle:  # classic format: "CDF\x01"
        handle.createDimension("time", N)
        handle.createVariable("x", "d", ("time",))[:] = X[:, 0]
    result = cli("discover-causal", path, "--method", "granger")
    assert result.returncode == 3
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "netCDF-3" in lines[0]


def test_a_directory_given_to_each_expands_to_the_hdf5_family(tmp_path):
    from dynid import runner

    for name in ("a.csv", "b.h5", "c.nc", "d.mat", "e.he5", "notes.md"):
        (tmp_path / name).write_text("t,x\n0,1\n")
    names = runner.expand_inputs([str(tmp_path)])
    assert names == [str(tmp_path / n) for n in ("a.csv", "b.h5", "c.nc", "d.mat", "e.he5")]
