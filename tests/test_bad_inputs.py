"""Bad input, all of it: a corpus of malformed data files and crafted model files, generated here.

Every one must give the contract's exit code (3: bad input data or model file), exactly one line
on stderr (with -q: the error; notes are not errors) naming the file, no traceback, no output
file, and no hang; and a crafted model file must never run code. Odd but valid files (BOM, CRLF,
Latin-1, UTF-16, quoted names) must read as the plain file does. Most run in process (the ``cli``
fixture) for speed; a few check a real subprocess.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import pickle
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pytest

from dynid.data import load
from dynid.errors import DataError
from dynid.modelfile import load_model

# The longest any one bad input may take before it counts as a hang (s).
HANG_S = 30
# The file a crafted payload would create if it ever ran.
MARKER = "pwned"


class Hung(BaseException):
    """An input took longer than HANG_S (raised by SIGALRM, through any ``except Exception``)."""


@contextlib.contextmanager
def deadline(seconds: int = HANG_S) -> Iterator[None]:
    def expire(signum: int, frame: object) -> None:
        raise Hung(f"no answer after {seconds} s")

    before = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)


def _series(n: int = 80, seed: int = 0) -> np.ndarray:
    """(n, 2) a noisy stable linear system: fits need no regularisation."""
    rng = np.random.default_rng(seed)
    x = np.zeros((n, 2))
    for k in range(1, n):
        x[k] = np.array([[0.8, 0.1], [-0.2, 0.7]]) @ x[k - 1] + rng.normal(size=2)
    return x


def _plain_text(names: tuple[str, str, str] = ("t", "x", "y"), newline: str = "\n") -> str:
    x = _series()
    rows = [",".join(names)] + [f"{k * 0.1!r},{a!r},{b!r}" for k, (a, b) in enumerate(x.tolist())]
    return newline.join(rows) + newline


def _numbers(rows: int, row: Callable[[int], str], header: str = "t,x,y") -> bytes:
    return (header + "\n" + "".join(row(k) + "\n" for k in range(rows))).encode()


def _h5(build: Callable[[h5py.File], None]) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        with h5py.File(path, "w") as handle:
            build(handle)
    return write


def _bytes(content: bytes) -> Callable[[Path], None]:
    return lambda path: path.write_bytes(content)


def _truncated_h5(path: Path) -> None:
    _h5(lambda f: f.create_dataset("data", data=_series()))(path)
    path.write_bytes(path.read_bytes()[:700])


def _string_columns(handle: h5py.File) -> None:
    handle.create_dataset("data", data=np.array([["a", "b"], ["c", "d"]], dtype=object), dtype=h5py.string_dtype())


def _named(handle: h5py.File, columns: object) -> None:
    handle["data"] = _series()
    handle["data"].attrs["columns"] = columns


def _with_time(handle: h5py.File, time: np.ndarray) -> None:
    handle["data"] = _series()
    handle["t"] = time


# name -> (file name, writer): every one is bad input data (exit 3).
BAD_DATA: dict[str, tuple[str, Callable[[Path], None]]] = {
    "empty": ("e.csv", _bytes(b"")),
    "blank lines": ("e.csv", _bytes(b"\n\r\n \n")),
    "header only": ("e.csv", _bytes(b"t,x,y\n")),
    "one row": ("e.csv", _bytes(b"t,x\n0,1\n")),
    "rows wider than the header": ("e.csv", _bytes(b"t,x,y\n0,1,2\n1,2,3,4\n2,3,4\n")),
    "unbalanced quote": ("e.csv", _bytes(b't,"x\n0,"1,5",2\n1,"2\n')),
    "duplicate column names": ("e.csv", _bytes(_numbers(50, lambda k: f"{k},{k % 7},{k % 5}", "t,x,x"))),
    "duplicate names after trimming": ("e.csv", _bytes(_numbers(50, lambda k: f"{k},{k % 7},{k % 5}", "t,x, x"))),
    "no numbers": ("e.csv", _bytes(b"x,y\na,oops\nb,no\n")),
    "only missing values": ("e.csv", _bytes(_numbers(50, lambda k: f"{k},nan,", "t,x,y"))),
    "infinite values": ("e.csv", _bytes(_numbers(50, lambda k: f"{k},{k % 3},{'inf' if k == 7 else 1}"))),
    "values near float max": ("e.csv", _bytes(_numbers(50, lambda k: f"{k},{(-1) ** k * 1.7e308!r},{k % 5}"))),
    "duplicate time": ("e.csv", _bytes(_numbers(50, lambda k: f"{k // 2},{k % 7},{k % 5}"))),
    "decreasing time": ("e.csv", _bytes(_numbers(50, lambda k: f"{50 - k},{k % 7},{k % 5}"))),
    "missing time": ("e.csv", _bytes(_numbers(50, lambda k: f"{'' if k == 9 else k},{k % 7},{k % 5}"))),
    "binary noise": ("e.csv", _bytes(bytes(range(256)) * 40)),
    "NUL bytes": ("e.csv", _bytes(b"t,x\n0,1\x00\n1,2\n")),
    "corrupt gzip": ("e.csv.gz", _bytes(gzip.compress(_plain_text().encode())[:60])),
    "not gzip at all": ("e.csv.gz", _bytes(_plain_text().encode())),
    "gzip of nothing": ("e.csv.gz", _bytes(gzip.compress(b""))),
    "3-D HDF5 dataset": ("e.h5", _h5(lambda f: f.create_dataset("data", data=np.zeros((10, 3, 2))))),
    "1-D string HDF5 dataset": ("e.h5", _h5(lambda f: f.create_dataset("data", data=np.array([b"a", b"b"])))),
    "2-D string HDF5 dataset": ("e.h5", _h5(_string_columns)),
    "complex HDF5 dataset": ("e.h5", _h5(lambda f: f.create_dataset("data", data=np.zeros((10, 2), complex)))),
    "compound HDF5 dataset": ("e.h5", _h5(lambda f: f.create_dataset("data", data=np.zeros(9, "f8,i4")))),
    "scalar HDF5 dataset": ("e.h5", _h5(lambda f: f.create_dataset("data", data=3.0))),
    "empty HDF5 file": ("e.h5", _h5(lambda f: None)),
    "HDF5 dataset without rows": ("e.h5", _h5(lambda f: f.create_dataset("data", data=np.zeros((0, 2))))),
    "HDF5 time of another length": ("e.h5", _h5(lambda f: _with_time(f, np.arange(3.0)))),
    "HDF5 decreasing time": ("e.h5", _h5(lambda f: _with_time(f, -np.arange(80.0)))),
    "HDF5 columns attribute too short": ("e.h5", _h5(lambda f: _named(f, ["a"]))),
    "HDF5 duplicate column names": ("e.h5", _h5(lambda f: _named(f, ["a", "a"]))),
    "truncated HDF5": ("e.h5", _truncated_h5),
    "not HDF5 at all": ("e.h5", _bytes(b"hello, not hdf5\n")),
}


@pytest.mark.parametrize("case", list(BAD_DATA))
def test_bad_data_gets_exit_3_one_line_and_no_output(cli, tmp_path, case, model_bytes):
    """From every command that reads DATA (forecast, score and states with a valid model)."""
    file_name, write = BAD_DATA[case]
    folder = tmp_path / "work"
    folder.mkdir()
    write(folder / file_name)
    (tmp_path / "m.dynid").write_bytes(model_bytes)
    model = str(tmp_path / "m.dynid")
    for command in (("fit", file_name, "--model", "var", "-o", "m.dynid"),
                    ("forecast", model, file_name, "-n", "3", "-o", "f.csv"), ("score", model, file_name, "--json"),
                    ("states", model, file_name), ("symbolic", file_name, "-o", "e.txt"),
                    ("discover-causal", file_name, "--json")):
        with deadline():
            result = cli(*command, "-q", cwd=folder)
        _assert_one_error(result, 3, file_name)
        assert sorted(p.name for p in folder.iterdir()) == [file_name], command[0]


@pytest.mark.parametrize("spec", ["missing.csv", "folder", "folder.csv", "data.h5:/nowhere", "data.h5:/group"])
def test_missing_files_directories_and_inner_paths_get_exit_3(cli, tmp_path, spec):
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder.csv").mkdir()
    with h5py.File(tmp_path / "data.h5", "w") as handle:
        handle["data"] = _series()
        handle.create_group("group")
    for command in (("fit", spec, "--model", "var", "-o", "m.dynid"), ("discover-causal", spec, "--json")):
        with deadline():
            result = cli(*command, "-q", cwd=tmp_path)
        _assert_one_error(result, 3, spec.split(":")[0])
        assert not (tmp_path / "m.dynid").exists()


def _assert_one_error(result, code: int, name: str) -> None:
    stderr = result.stderr.decode(errors="replace").splitlines()
    assert result.returncode == code, stderr
    assert len(stderr) == 1 and stderr[0].startswith("dynid: error: "), stderr
    assert name in stderr[0] and b"Traceback" not in result.stderr
    assert result.stdout == b""


# -------------------------------------------------------------------------- odd but valid text
def _encoded(text: str, encoding: str, prefix: bytes = b"") -> Callable[[Path], None]:
    return _bytes(prefix + text.encode(encoding))


ODD_BUT_VALID: dict[str, Callable[[Path], None]] = {
    "UTF-8 BOM": _encoded(_plain_text(), "utf-8", b"\xef\xbb\xbf"),
    "CRLF line ends": _encoded(_plain_text(newline="\r\n"), "utf-8"),
    "CR line ends": _encoded(_plain_text(newline="\r"), "utf-8"),
    "UTF-16 with BOM": _encoded(_plain_text(), "utf-16"),
    "quoted names": _encoded(_plain_text(('"t"', '"x"', '"y"')), "utf-8"),
    "gzip": lambda path: path.write_bytes(gzip.compress(_plain_text().encode())),
}


@pytest.mark.parametrize("case", list(ODD_BUT_VALID))
def test_odd_but_valid_text_reads_as_the_plain_file(tmp_path, case):
    (tmp_path / "plain.csv").write_text(_plain_text())
    path = tmp_path / ("odd.csv.gz" if case == "gzip" else "odd.csv")
    ODD_BUT_VALID[case](path)
    with deadline():
        plain, odd = load(str(tmp_path / "plain.csv")), load(str(path))
    assert odd.variables == plain.variables == ("x", "y")
    np.testing.assert_array_equal(odd.trials[0].x, plain.trials[0].x)
    np.testing.assert_array_equal(odd.trials[0].t, plain.trials[0].t)


def test_latin1_names_and_quoted_separators_keep_their_names(tmp_path):
    x = _series()
    rows = "".join(f"{k},{a!r},{b!r}\n" for k, (a, b) in enumerate(x.tolist()))
    (tmp_path / "latin1.csv").write_bytes(("t,température,\"flow, l/s\"\n" + rows).encode("latin-1"))
    data = load(str(tmp_path / "latin1.csv"))
    assert data.variables == ("température", "flow, l/s")
    np.testing.assert_array_equal(data.trials[0].x, x)


# --------------------------------------------------------------------------- crafted model files
class _Payload:
    """Unpickling this would create MARKER in the working directory."""

    def __reduce__(self):  # noqa: ANN204
        return (open, (MARKER, "w"))


@pytest.fixture(scope="module")
def model_bytes(tmp_path_factory) -> bytes:
    """A small valid VAR(1) model file."""
    from tests.conftest import run_cli_in_process

    folder = tmp_path_factory.mktemp("model")
    x = _series()
    pd.DataFrame({"t": np.arange(len(x)) * 0.1, "x": x[:, 0], "y": x[:, 1]}).to_csv(folder / "d.csv", index=False)
    assert run_cli_in_process("fit", "d.csv", "--model", "var", "-p", "order=1", "-q", "-o", "m.dynid",
                              cwd=folder).returncode == 0
    return (folder / "m.dynid").read_bytes()


def _rewritten(original: bytes, path: Path, *, metadata: Callable[[dict], object] | None = None,
               arrays: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]] | None = None,
               attrs: dict[str, object] | None = None, checksum: bool = True) -> None:
    """``original`` written to ``path`` with its metadata, arrays or root attributes changed; the
    arrays' checksum recomputed (a forger can), unless ``checksum`` is False."""
    from dynid.modelfile import _arrays_digest

    path.write_bytes(original)
    with h5py.File(path, "r+") as handle:
        header = json.loads(handle.attrs["metadata"])
        stored = {name: ds[()] for name, ds in handle["arrays"].items()}
        new_arrays = arrays(stored) if arrays else stored
        del handle["arrays"]
        group = handle.create_group("arrays")
        for name, value in new_arrays.items():
            group.create_dataset(name, data=value)
        if checksum:
            header["arrays_sha256"] = _arrays_digest(new_arrays)
        document = metadata(header) if metadata else header
        handle.attrs["metadata"] = (np.void(document) if isinstance(document, bytes)
                                    else document if isinstance(document, str) else json.dumps(document))
        for key, value in (attrs or {}).items():
            handle.attrs[key] = value


def _set(key: str, value: object) -> Callable[[dict], dict]:
    return lambda header: {**header, key: value}


def _huge_declared(original: bytes, path: Path) -> None:
    """An array declaring 10^12 elements that the file does not hold (reading it would need 8 TB)."""
    _rewritten(original, path)
    with h5py.File(path, "r+") as handle:
        del handle["arrays"]["coefs"]
        handle["arrays"].create_dataset("coefs", shape=(10**6, 10**6), dtype="f8", chunks=(1000, 1000))


CODE = "__import__('os').system('touch " + MARKER + "')"
# name -> writer(valid model bytes, path): every one is a bad model file (exit 3).
BAD_MODELS: dict[str, Callable[[bytes, Path], None]] = {
    "pickle payload": lambda b, p: p.write_bytes(pickle.dumps(_Payload())),
    "pickle in the metadata": lambda b, p: _rewritten(b, p, metadata=lambda h: pickle.dumps(_Payload())),
    "pickle as an array": lambda b, p: _rewritten(b, p, arrays=lambda a: {**a, "coefs": np.void(pickle.dumps(_Payload()))}),
    "code as the backend": lambda b, p: _rewritten(b, p, metadata=_set("backend", CODE)),
    "code as a hyperparameter": lambda b, p: _rewritten(b, p, metadata=lambda h: {**h, "hyperparameters": {**h["hyperparameters"], "order": CODE}}),
    "code as dt": lambda b, p: _rewritten(b, p, metadata=_set("dt", CODE)),
    "unknown hyperparameter": lambda b, p: _rewritten(b, p, metadata=lambda h: {**h, "hyperparameters": {"__class__": CODE}}),
    "deep JSON nesting": lambda b, p: _rewritten(b, p, metadata=lambda h: "[" * 100_000 + "]" * 100_000),
    "deep JSON in a field": lambda b, p: _rewritten(b, p, metadata=lambda h: json.dumps(h)[:-1] + ', "x": ' + "[" * 50_000 + "]" * 50_000 + "}"),
    "metadata not an object": lambda b, p: _rewritten(b, p, metadata=lambda h: "[1, 2]"),
    "variables not a list": lambda b, p: _rewritten(b, p, metadata=_set("variables", 7)),
    "variables of the wrong count": lambda b, p: _rewritten(b, p, metadata=_set("variables", ["x"])),
    "negative dt": lambda b, p: _rewritten(b, p, metadata=_set("dt", -0.1)),
    "absurd array shapes": lambda b, p: _rewritten(b, p, arrays=lambda a: {**a, "coefs": np.zeros((3, 7, 1))}),
    "array of strings": lambda b, p: _rewritten(b, p, arrays=lambda a: {**a, "coefs": np.array([b"x", b"y"])}),
    "missing array": lambda b, p: _rewritten(b, p, arrays=lambda a: {k: v for k, v in a.items() if k != "coefs"}),
    "huge declared shape": _huge_declared,
    "edited array": lambda b, p: _rewritten(b, p, arrays=lambda a: {**a, "coefs": a["coefs"] * 2}, checksum=False),
    "future format version": lambda b, p: _rewritten(b, p, attrs={"format_version": 99}),
    "format version not a number": lambda b, p: _rewritten(b, p, attrs={"format_version": "one"}),
    "format version an array": lambda b, p: _rewritten(b, p, attrs={"format_version": np.array([1, 2])}),
    "foreign format": lambda b, p: _rewritten(b, p, attrs={"format": "keras"}),
    "truncated": lambda b, p: p.write_bytes(b[: len(b) // 2]),
    "empty": lambda b, p: p.write_bytes(b""),
}


@pytest.mark.parametrize("case", list(BAD_MODELS))
def test_crafted_model_files_get_exit_3_and_never_run_code(cli, tmp_path, model_bytes, case):
    BAD_MODELS[case](model_bytes, tmp_path / "m.dynid")
    x = _series()
    pd.DataFrame({"t": np.arange(len(x)) * 0.1, "x": x[:, 0], "y": x[:, 1]}).to_csv(tmp_path / "d.csv", index=False)
    for command in (("info", "m.dynid"), ("forecast", "m.dynid", "d.csv", "-n", "3", "-o", "f.csv")):
        with deadline():
            result = cli(*command, "-q", cwd=tmp_path)
        _assert_one_error(result, 3, "m.dynid")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.csv", "m.dynid"]  # no MARKER, no f.csv


@pytest.mark.parametrize("stride", [pytest.param(1, marks=pytest.mark.slow), 17])
def test_every_truncation_of_a_model_file_is_refused(tmp_path, model_bytes, stride):
    """Cut at every byte (slow), or at every 17th and each of the last 64 (seconds)."""
    path = tmp_path / "m.dynid"
    sizes = sorted({*range(0, len(model_bytes), stride), *range(len(model_bytes) - 64, len(model_bytes))})
    with deadline(120):
        for size in sizes:
            path.write_bytes(model_bytes[:size])
            with pytest.raises(DataError, match="m.dynid"):
                load_model(str(path))
    path.write_bytes(model_bytes)
    assert load_model(str(path)).model.name == "var"


# ---------------------------------------------------------------------------- real subprocesses
@pytest.mark.parametrize(("case", "command"), [
    ("corrupt gzip", "fit"), ("values near float max", "discover-causal"), ("3-D HDF5 dataset", "symbolic")])
def test_bad_data_in_a_real_process(tmp_path, case, command):
    file_name, write = BAD_DATA[case]
    write(tmp_path / file_name)
    extra = {"fit": ("--model", "var", "-o", "m.dynid"), "discover-causal": ("--json",), "symbolic": ("-o", "e.txt")}
    result = subprocess.run([sys.executable, "-m", "dynid", command, file_name, *extra[command]],
                            capture_output=True, cwd=tmp_path, timeout=HANG_S)
    _assert_one_error(result, 3, file_name)
    assert sorted(p.name for p in tmp_path.iterdir()) == [file_name]


def test_pickle_payload_in_a_real_process(tmp_path):
    (tmp_path / "m.dynid").write_bytes(pickle.dumps(_Payload()))
    result = subprocess.run([sys.executable, "-m", "dynid", "info", "m.dynid"],
                            capture_output=True, cwd=tmp_path, timeout=HANG_S)
    _assert_one_error(result, 3, "m.dynid")
    assert not (tmp_path / MARKER).exists()
