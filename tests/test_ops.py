"""Buffer specs to arrays, dtypes and reduce ops (single process)."""

import array

import numpy as np
import pytest
from mpi4py import MPI

from pyhccl.comm.buffers import SUPPORTED_DTYPES, as_array, dtype_by_name, reduce_ufunc
from pyhccl.comm.job import Env
from pyhccl.comm.parsers import allgatherv, allreduce, alltoallv


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


def test_negative_count_or_displacement():
    with pytest.raises(ValueError, match="expecting a non-negative count and displacement in sendbuf, got -1 and 0"):
        as_array([np.zeros(8, np.float32), -1, MPI.FLOAT], name="sendbuf")


def env(size, rank=0, rows=None):
    return Env(rank, size, lambda dtype, n: np.zeros(n, dtype), lambda mine: rows or [mine] * size)


def test_overlapping_receive_blocks():
    out = np.zeros(4)
    with pytest.raises(ValueError, match=r"expecting displs to place blocks without overlap in recvbuf \(each "
                                         r"rank's block its own memory\), got counts\[0\] = 2 at displs\[0\] = 0 overlapping displs\[1\] = 1"):
        allgatherv(env(2), np.zeros(2), [out, ([2, 2], [0, 1])])
    mine = (((1, 1), (0, 1), (1, 1), (0, 1)))
    bad = ((1, 1), (0, 1), (1, 1), (0, 0))                     # rank 1 receives both blocks at 0
    with pytest.raises(ValueError, match=r"without overlap in rank 1's recvbuf"):
        alltoallv(env(2, rows=[mine, bad]), [np.zeros(2), [1, 1]], [out[:2], [1, 1]])


def test_fallback_reasons_name_the_argument():
    e = env(1)
    assert allreduce(e, np.zeros(2), np.zeros(2), MPI.BXOR) == "reduce op MPI.BXOR is not one of SUM, PROD, MAX, MIN"
    assert allreduce(e, np.zeros(2), np.zeros(2), MPI.Op.Create(lambda a, b, t: None)) == \
        "reduce op a user-defined op is not one of SUM, PROD, MAX, MIN"
    assert allreduce(e, np.zeros(2), [np.zeros(2, np.complex64), MPI.C_FLOAT_COMPLEX]).startswith(
        "recvbuf has the non-numeric or unsupported datatype MPI_C")
    assert allreduce(e, "text", np.zeros(2)).startswith("sendbuf has a str, not a buffer")
    assert allreduce(e, [np.zeros(2), 1.5], np.zeros(2)).startswith("sendbuf has a count or displacement that is not")
    assert allreduce(e, [np.zeros(2), 1, 2, 3, 4], np.zeros(2)).startswith("sendbuf has a list form mpi4py")
    assert allreduce(e, [np.zeros(3, np.int8), MPI.INT], np.zeros(2)).startswith("sendbuf has 3 bytes, not a whole")
    assert allreduce(e, [np.zeros(2), 2, "x"], np.zeros(2)).startswith("sendbuf has the non-numeric or unsupported")


# -- device buffers (pyhccl/gpu.py): parsed to device arrays, staging on the device ------------

@pytest.fixture
def emulated():
    from pyhccl import gpu
    dev = gpu.EmulatedDevice()
    gpu.register(dev)
    yield dev, gpu.EmulatedArray
    gpu.unregister(dev)


def test_device_buffers_stay_device_arrays(emulated):
    from pyhccl.comm import parsers as ops
    dev, Dev = emulated
    x = Dev(np.arange(12, dtype=np.float32).reshape(3, 4), device_id=1)
    b = as_array([x, (4, 2), MPI.INT])
    assert b.device is dev and type(b.array) is Dev and b.array.dtype == np.int32 and b.array.size == 4
    assert np.shares_memory(b.array.a, x.a)                      # a view of the user's memory, no copy
    e = env(2)
    job = allreduce(e, x, Dev(np.zeros(12, np.float32), 1), MPI.MAX)
    assert job.device is dev and type(job.inp) is Dev and type(job.out) is Dev and job.ufunc is np.maximum
    blocks = Dev(np.arange(8, dtype=np.float32), 1)
    for job in (ops.alltoall(e, MPI.IN_PLACE, blocks), ops.reduce_scatter(e, MPI.IN_PLACE, blocks, [1, 3]),
                ops.allgatherv(e, MPI.IN_PLACE, [blocks, [4, 4]]), ops.reduce(env(2, 1), blocks, None),
                ops.scatter(e, blocks, MPI.IN_PLACE), ops.bcast(e, blocks), ops.gather(env(2, 1), blocks, None)):
        assert job.device is dev and type(job.inp) is Dev and type(job.out) is Dev, job.call
    staged = ops.alltoall(e, MPI.IN_PLACE, blocks).inp            # in place: a copy on the same device
    assert staged.device_id == 1 and np.array_equal(staged.a, blocks.a) and not np.shares_memory(staged.a, blocks.a)


def test_device_buffer_errors(emulated):
    from pyhccl.comm import parsers as ops
    _, Dev = emulated
    x = Dev(np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="expecting sendbuf and recvbuf in the same memory, got sendbuf on the "
                                         "host and recvbuf on emulated device 0; copy one"):
        allreduce(env(1), np.zeros(4, np.float32), x)
    with pytest.raises(ValueError, match="got sendbuf on emulated device 1 and recvbuf on emulated device 0"):
        ops.alltoall(env(1), Dev(np.zeros(4, np.float32), 1), x)
    e = env(1)
    job = allreduce(e, x, x)               # a rank-local refusal: kept, the call goes on over fresh device memory
    assert [str(r) for r in e.refused] == ["sendbuf and recvbuf overlap; pass MPI.IN_PLACE as sendbuf to reduce in "
                                           "place"]
    assert isinstance(job.out, Dev) and np.may_share_memory(job.inp.a, x.a)
    assert not np.may_share_memory(job.out.a, x.a)
    strided = Dev(np.zeros(8, np.float32)[::2])
    assert as_array(strided) is None
    assert allreduce(env(1), strided, x) == "sendbuf has device memory that is not contiguous, which pyhccl does not run"


def test_gpu_memory_without_cupy_falls_back(monkeypatch):
    from pyhccl import gpu

    class Foreign:
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (0, False), "version": 3}

    monkeypatch.setattr(gpu, "_cupy_backend", lambda: None)
    assert as_array(Foreign()) is None
    assert allreduce(env(1), Foreign(), np.zeros(4)).startswith("sendbuf has a Foreign, not a buffer")


@pytest.mark.parametrize("name, canonical", [
    ("allreduce", "allreduce"), ("all_reduce", "allreduce"), ("Allreduce", "allreduce"), ("AllReduce", "allreduce"),
    ("all-reduce", "allreduce"), ("Allgather", "all_gather"), ("all_gather", "all_gather"),
    ("Reduce_scatter", "reduce_scatter"), ("ReduceScatterV", "reduce_scatter_v"), ("all_to_all", "alltoall"),
    ("Alltoallv", "alltoallv"), ("Bcast", "broadcast"), ("send_recv", "batch_send_recv"),
])
def test_op_names_as_users_spell_them(name, canonical):
    from pyhccl.core.call import canonical_op
    assert canonical_op(name) == canonical


def test_unknown_op_lists_the_valid_names():
    from pyhccl.core.call import canonical_op
    with pytest.raises(ValueError, match="unknown collective 'all_reduc'; valid: allreduce"):
        canonical_op("all_reduc")
