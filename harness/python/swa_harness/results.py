"""A results file in Python: swa_harness.load(path) (harness/FORMATS.md, "Results file").

    r = swa_harness.load("results.h5")
    failed = [row for row in r if row.status == "fail"]        # r.results, one record per (scenario, DUT)
    r.scenario(failed[0].scenario_id).window                   # its scenario's parameters
    df = r.to_pandas()                                         # the same rows as a pandas DataFrame

Each row is a record (a named tuple) whose fields are the table's columns by name, in the file's
order: text as str, the status as its name (pass, warn, fail, skip, error), every other enum by its
name, numbers as int or float. Only h5py and NumPy are needed; to_pandas() needs pandas (Debian:
python3-pandas). The report (reports/swa_report.py) reads the same tables by the same rules with its
own few lines, because it runs without this package.
"""
import collections
import os

import numpy as np

STATUSES = ("pass", "warn", "fail", "skip", "error")
TABLES = ("results", "scenarios", "perf")


def _error(path, why):
    from . import Error  # here, not at import: the package imports this module while it loads
    return Error(f"{path}: {why}")


def _text(value):
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else str(value)


def _value(value):
    """An attribute's or cell's value as Python's own type: str, int, float, bool, or a list of them."""
    if isinstance(value, (bytes, str)):
        return _text(value)
    if isinstance(value, np.ndarray):
        return [_value(v) for v in value.tolist()] if value.dtype.kind in "OSU" else value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def _record_type(table, names):
    try:
        return collections.namedtuple(f"{table.capitalize()}Row", names)
    except ValueError:
        return None


def read_table(dataset, table):
    """A compound table as a list of records (named tuples) of Python values; enum columns by name.
    None when it is not a table of named columns this can read."""
    import h5py
    names = dataset.dtype.names
    if not names or dataset.ndim != 1:
        return None
    record = _record_type(table, names)
    if record is None:
        return None
    rows = dataset[:]
    columns = []
    for n in names:
        enum = h5py.check_enum_dtype(dataset.dtype[n])
        column = rows[n]
        if enum:
            by_value = {v: k for k, v in enum.items()}
            columns.append([by_value.get(int(v), str(int(v))) for v in column])
        else:
            columns.append([_value(v) for v in column])
    return [record(*cells) for cells in zip(*columns)] if columns else []


class Results:
    """A results file's tables: `results` (one record per scenario and DUT: what iterating gives),
    `scenarios` (one per scenario), `perf` (one per timed scenario and DUT; empty without --perf),
    and `meta` (the /meta attributes: tool_version, sweep_file, command, ...)."""

    def __init__(self, path, meta, tables, fields):
        self.path = path
        self.meta = meta
        self._fields = fields  # each table's columns, for a DataFrame of a table with no rows
        self.results, self.scenarios, self.perf = (tables[t] for t in TABLES)
        self._by_id = {s.id: s for s in self.scenarios if hasattr(s, "id")}

    def __iter__(self):
        return iter(self.results)

    def __len__(self):
        return len(self.results)

    def scenario(self, scenario_id):
        """The scenario record of an ID (a row's scenario_id)."""
        try:
            return self._by_id[scenario_id]
        except KeyError:
            raise _error(self.path, f"no scenario {scenario_id!r} in /scenarios") from None

    def counts(self):
        """{status: rows}, every status named (0 where none)."""
        counts = dict.fromkeys(STATUSES, 0)
        for row in self.results:
            counts[row.status] = counts.get(row.status, 0) + 1
        return counts

    def to_pandas(self, table="results"):
        """One table (results, scenarios or perf) as a pandas DataFrame, a column per field; `status`
        is a categorical of the five names, in the order pass, warn, fail, skip, error."""
        if table not in TABLES:
            raise _error(self.path, f"to_pandas(table={table!r}): the tables are {', '.join(TABLES)}")
        try:
            import pandas as pd
        except ImportError:
            raise _error(self.path, "to_pandas() needs pandas, which is not installed here "
                                    "(Debian: apt-get install python3-pandas)") from None
        rows = getattr(self, table)
        fields = self._fields[table]
        frame = pd.DataFrame.from_records(rows, columns=fields)
        if "status" in frame.columns and table == "results":
            frame["status"] = pd.Categorical(frame["status"], categories=STATUSES)
        return frame

    def __repr__(self):
        counts = ", ".join(f"{n} {k}" for k, n in self.counts().items() if n)
        return f"<swa_harness.Results {self.path}: {len(self.results)} rows ({counts or 'none'}), " \
               f"{len(self.scenarios)} scenarios, {len(self.perf)} perf rows>"


def load(path):
    """The results file at `path` (a run's --out) as a Results. swa_harness.Error naming the path and
    why when it is missing, a folder, not HDF5, or an HDF5 file that is not a results file."""
    import h5py
    shown = os.fspath(path)
    if not os.path.exists(shown):
        raise _error(shown, "no such file (a results file is what `swa-harness run --out` wrote)")
    if os.path.isdir(shown):
        raise _error(shown, "is a folder, not a results file")
    try:
        hdf5 = h5py.is_hdf5(shown)
    except OSError as e:
        raise _error(shown, f"cannot be read: {e.strerror or e}") from None
    if not hdf5:
        raise _error(shown, "is not an HDF5 file (a results file is the HDF5 file `swa-harness run --out` wrote)")
    try:
        with h5py.File(shown, "r") as f:
            return _read(shown, f)
    except OSError as e:  # unreadable, truncated or damaged inside
        raise _error(shown, f"cannot be read as HDF5: {e}") from None
    except (KeyError, ValueError, TypeError, RuntimeError) as e:  # a table h5py cannot convert
        raise _error(shown, f"cannot be read as a results file: {type(e).__name__}: {e}") from None


def _read(path, f):
    import h5py
    kind = f.attrs.get("kind")
    if kind is not None and "problem_file_format" in f.attrs:
        raise _error(path, f"is a problem file (kind {_text(kind)}), not a results file: "
                           "read it with h5py (harness/FORMATS.md, 'Problem files')")
    missing = [n for n in ("meta", "scenarios", "results") if n not in f]
    if missing:
        raise _error(path, f"is an HDF5 file but not a results file of swa-harness: it has no "
                           f"{', '.join('/' + n for n in missing)} (harness/FORMATS.md)")
    meta = {k: _value(v) for k, v in f["meta"].attrs.items()}
    if "tool_version" not in meta:
        raise _error(path, "is an HDF5 file but not a results file of swa-harness: /meta has no tool_version")
    tables, fields = {}, {}
    for table in TABLES:
        if table not in f:  # perf: files of runs without --perf may have none
            tables[table], fields[table] = [], []
            continue
        dataset = f[table]
        if not isinstance(dataset, h5py.Dataset):
            raise _error(path, f"/{table} is not a table (a {type(dataset).__name__})")
        rows = read_table(dataset, table)
        if rows is None:
            raise _error(path, f"/{table} is not a table of named columns as swa-harness writes it")
        expected = meta.get(f"rows_{table}")
        if isinstance(expected, int) and expected != len(rows):
            raise _error(path, f"is damaged: /{table} holds {len(rows)} rows, /meta says {expected} (rows_{table})")
        tables[table], fields[table] = rows, list(dataset.dtype.names)
    for need, table in (("status", "results"), ("scenario_id", "results"), ("id", "scenarios")):
        if tables[table] and need not in fields[table]:
            raise _error(path, f"/{table} has no column {need}: not a results file of swa-harness")
    return Results(path, meta, tables, fields)
