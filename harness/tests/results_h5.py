"""Reading /results in the tests: its `status` column is an HDF5 enum (pass|warn|fail|skip|error).

results_table(f) gives the table as a numpy structured array with `status` as bytes (b"pass"), the way
the tests read every other text column; files written before the enum already hold bytes.
"""
import h5py
import numpy as np


def status_names(dataset):
    """{enum value: name} of a table's status column; None when it holds text."""
    mapping = h5py.check_enum_dtype(dataset.dtype["status"])
    return {v: k for k, v in mapping.items()} if mapping else None


def results_table(f):
    dataset = f["results"]
    rows = dataset[:]
    names = status_names(dataset)
    if names is None:
        return rows
    fields = [(n, "S8" if n == "status" else rows.dtype[n]) for n in rows.dtype.names]
    out = np.empty(rows.shape, dtype=fields)
    for n in rows.dtype.names:
        out[n] = [names[int(v)].encode() for v in rows[n]] if n == "status" else rows[n]
    return out
