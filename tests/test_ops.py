"""Buffer specs to arrays, dtypes and reduce ops (single process)."""

import array

import numpy as np
import pytest
from mpi4py import MPI

from pyhccl.ops import SUPPORTED_DTYPES, as_array, dtype_by_name, reduce_ufunc


def test_forms():
    x = np.arange(8, dtype=np.float32)
    assert as_array(x).array is not None and np.shares_memory(as_array(x).array, x)
    assert np.array_equal(as_array([x, MPI.FLOAT]).array, x)
    assert np.array_equal(as_array([x, 3, MPI.FLOAT]).array, x[:3])
    assert np.array_equal(as_array([x, (3, 2), MPI.FLOAT]).array, x[2:5])
    assert np.array_equal(as_array([x, 3, 2, MPI.FLOAT]).array, x[2:5])
    assert as_array([x, MPI.INT]).array.dtype == np.int32          # MPI semantics: reinterpret bytes
    assert as_array(array.array("d", [1, 2])).array.dtype == np.float64
    assert as_array(memoryview(bytearray(8)).cast("i")).array.dtype == np.int32
    assert as_array(np.ones((2, 3), order="F")).array.size == 6


@pytest.mark.parametrize("spec", [
    np.arange(10.0)[::2],                                    # not contiguous
    [np.zeros(4, np.float32), MPI.FLOAT.Create_contiguous(2)],  # derived datatype
    [np.zeros(4, np.int8), MPI.BYTE],                        # not numeric for reductions
    np.zeros(3, np.complex64),                               # unsupported dtype
    np.zeros(3, bool),
    "text",
    [np.zeros(2), 1, 2, 3, MPI.DOUBLE],                      # not an mpi4py form
])
def test_unsupported_returns_none(spec):
    assert as_array(spec) is None


def test_count_past_the_end():
    with pytest.raises(ValueError, match="expecting count \\+ displacement <= 8 elements"):
        as_array([np.zeros(8, np.float32), (4, 6), MPI.FLOAT])


def test_dtypes_and_ops():
    assert dtype_by_name("float") == np.float32 and dtype_by_name("half") == np.float16
    assert set(SUPPORTED_DTYPES) >= {"int8", "uint64", "float16", "float64"}
    with pytest.raises(ValueError, match="unknown or unsupported dtype 'complex'; valid: int8"):
        dtype_by_name("complex")
    assert reduce_ufunc(MPI.SUM) is np.add and reduce_ufunc(MPI.MIN) is np.minimum
    assert reduce_ufunc(MPI.LAND) is None and reduce_ufunc("sum") is None
