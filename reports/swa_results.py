"""Reading a swa-harness results file (harness/FORMATS.md): the one reader the report
(reports/swa_report.py) and the compare script (scripts/compare-results.py) share.

    import swa_results
    data = swa_results.load("results.h5")   # {"path", "meta", "scenarios", "results", "perf"}

Each table is a list of dicts, one per row: text columns as str, numbers as Python int/float
(exact: a float64 column's values are the file's bits), enum columns (status: pass|warn|fail|skip|error)
by name; files written before the enum hold text, read as it is. Raises ResultsFileError (with the
path and what is missing) for a file that is not a results file.
"""
import h5py


class ResultsFileError(Exception):
    pass


def text(x):
    return x.decode() if isinstance(x, bytes) else str(x)


def read_table(dataset):
    """A compound HDF5 table as a list of dicts with str/int/float values."""
    rows = dataset[:]
    names = rows.dtype.names
    enums = {n: {v: k for k, v in h5py.check_enum_dtype(dataset.dtype[n]).items()}
             for n in names if h5py.check_enum_dtype(dataset.dtype[n])}
    return [{n: (enums[n][int(r[n])] if n in enums else text(r[n]) if rows.dtype[n].kind in "OSU" else r[n].item())
             for n in names} for r in rows]


def load(path):
    """The file's /meta attributes, /scenarios, /results and /perf (empty when absent)."""
    try:
        with h5py.File(path, "r") as f:
            for name in ("scenarios", "results"):
                if name not in f:
                    raise ResultsFileError(f"{path}: not a results file (no /{name})")
            meta = {k: text(v) for k, v in f["meta"].attrs.items()} if "meta" in f else {}
            return {"path": path, "meta": meta, "scenarios": read_table(f["scenarios"]),
                    "results": read_table(f["results"]), "perf": read_table(f["perf"]) if "perf" in f else [],
                    "result_columns": list(f["results"].dtype.names)}
    except OSError as e:
        raise ResultsFileError(f"{path}: not a results file ({e})") from e
