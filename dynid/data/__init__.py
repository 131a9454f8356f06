"""Data I/O: readers for CSV/TSV/HDF5/stdin, the Dataset type, NaN policy and resampling."""

from dynid.data.dataset import Dataset, Trial, combine
from dynid.data.load import load

__all__ = ["Dataset", "Trial", "combine", "load"]
