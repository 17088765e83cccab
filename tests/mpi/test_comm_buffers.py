"""Buffer kinds mpi4py takes (issue 17): DLPack-only producers, read-only producers, long double, complex.

Each collective runs on objects that offer their memory only through ``__dlpack__`` (a DLPack 1.0
producer with the read-only flag, and a 0.x one without it), against numpy's answer; types pyhccl
does not run go to the wrapped MPI, counted in ``fallbacks``. Run by tests/test_mpi_launch.py.
"""

import ctypes

import numpy as np
import pytest
from mpi4py import MPI

import pyhccl

pytestmark = pytest.mark.mpi

WORLD = MPI.COMM_WORLD
N, RANK = WORLD.Get_size(), WORLD.Get_rank()
_valid = ctypes.pythonapi.PyCapsule_IsValid
_valid.restype, _valid.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]


class DLPack:
    """Memory offered only through DLPack 1.0 (numpy's export); keeps the capsules it hands out."""

    def __init__(self, a):
        self.a, self.capsules = a, []

    def __dlpack__(self, **kw):
        self.capsules.append(self.a.__dlpack__(**kw))
        return self.capsules[-1]

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()

    def consumed(self):
        """Whether a consumer took ownership of a capsule (renamed it "used_..."): pyhccl must not."""
        return any(not _valid(c, b"dltensor_versioned") and not _valid(c, b"dltensor") for c in self.capsules)


class LegacyDLPack(DLPack):
    """A DLPack 0.x producer: ``__dlpack__(stream=None)`` only, no read-only flag (writable, as mpi4py reads it)."""

    def __dlpack__(self, stream=None):
        assert stream is None
        self.capsules.append(self.a.__dlpack__())
        return self.capsules[-1]


class _Tensor(ctypes.Structure):                        # DLTensor, then DLManagedTensor's two pointers
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64))]


class LongDoubleDLPack(LegacyDLPack):
    """long double ('g') and its complex ('G') through DLPack 0.x (numpy does not export them): numpy's capsule of
    the raw bytes, relabelled as mpi4py's test producer (test/dlpackimpl.py) labels them."""

    def __dlpack__(self, stream=None):
        capsule = self.a.view(np.uint8).__dlpack__()
        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        t = _Tensor.from_address(get(capsule, b"dltensor"))
        lanes = 1 if self.a.dtype.kind == "f" else 2       # complex long double: two long double lanes
        t.code, t.bits, t.lanes = 2, 8 * self.a.itemsize // lanes, lanes
        t.shape[0] = self.a.size
        self.capsules.append(capsule)
        return capsule


KINDS = [DLPack, LegacyDLPack]


@pytest.fixture
def comm():
    c = pyhccl.Communicator(WORLD)
    yield c
    c.release()


def mine(count, dtype=np.int32, shift=0):
    return (np.arange(count) % 5 + RANK + shift).astype(dtype)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_collectives_on_dlpack_producers(comm, kind):
    """Each collective on DLPack-only buffers: numpy's answer, no fallback, no capsule consumed, no crash."""
    x = mine(4 * N)
    every = [(np.arange(4 * N) % 5 + r).astype(np.int32) for r in range(N)]
    used = []

    def wrap(a):
        used.append(kind(a))
        return used[-1]

    out = np.zeros(4 * N, np.int32)
    comm.Allreduce(wrap(x), wrap(out), MPI.SUM)
    assert (out == sum(every)).all()
    red = np.zeros(4 * N, np.int32)
    comm.Reduce(wrap(x), wrap(red), MPI.MAX, N - 1)
    if RANK == N - 1:
        assert (red == np.maximum.reduce(every)).all()
    gathered = np.zeros(4 * N * N, np.int32)
    comm.Allgather(wrap(x), wrap(gathered))
    assert (gathered == np.concatenate(every)).all()
    g = np.zeros(4 * N * N, np.int32)
    comm.Gather(wrap(x), wrap(g), 0)
    if RANK == 0:
        assert (g == np.concatenate(every)).all()
    part = np.zeros(4, np.int32)
    comm.Scatter(wrap(x), wrap(part), 0)
    assert (part == every[0][4 * RANK:4 * RANK + 4]).all()
    rs = np.zeros(4, np.int32)
    comm.Reduce_scatter(wrap(x), wrap(rs), [4] * N, MPI.SUM)
    assert (rs == sum(every)[4 * RANK:4 * RANK + 4]).all()
    rsb = np.zeros(4, np.int32)
    comm.Reduce_scatter_block(wrap(x), wrap(rsb), MPI.MIN)
    assert (rsb == np.minimum.reduce(every)[4 * RANK:4 * RANK + 4]).all()
    a2a = np.zeros(4 * N, np.int32)
    comm.Alltoall(wrap(x), [wrap(a2a), 4, MPI.INT])
    assert (a2a == np.concatenate([e[4 * RANK:4 * RANK + 4] for e in every])).all()
    b = mine(3) if RANK == 0 else np.zeros(3, np.int32)
    comm.Bcast(wrap(b), 0)
    assert (b == np.arange(3) % 5).all()
    assert comm.fallbacks == 0
    assert not any(u.consumed() for u in used)


def test_read_only_producer(comm):
    """A read-only producer (DLPack 1.0's flag) is read, and refused where pyhccl would write it, on every rank."""
    src = read_only(mine(4))
    out = np.zeros(4, np.int32)
    comm.Allreduce(DLPack(src), out)
    assert (out == sum(np.arange(4) % 5 + r for r in range(N))).all()
    root = src if RANK == 0 else np.zeros(4, np.int32)
    comm.Bcast(DLPack(root), 0)                         # the root's buffer is only read
    with pytest.raises(ValueError, match="rank 0: expecting a writable recvbuf, got a read-only buffer"):
        comm.Allreduce(np.ones(3), DLPack(read_only(np.zeros(3)) if RANK == 0 else np.zeros(3)))
    assert comm.fallbacks == 0


def read_only(a):
    a.flags.writeable = False
    return a


@pytest.mark.parametrize("kind", [None, *KINDS], ids=lambda k: getattr(k, "__name__", "numpy"))
@pytest.mark.parametrize("dtype", ["g", "G", "F", "D"])
def test_types_pyhccl_does_not_run_go_to_mpi(comm, kind, dtype):
    """long double and complex, plain or through DLPack: the wrapped MPI runs them, counted; never a SystemError."""
    if kind is not None and dtype in "gG":
        kind = LongDoubleDLPack
    wrap = kind or (lambda a: a)
    b = np.full(3, 7, dtype) if RANK == 0 else np.zeros(3, dtype)
    comm.Bcast(wrap(b), 0)
    assert (b == 7).all()
    out = np.zeros(3, dtype)
    comm.Allreduce(wrap(np.full(3, RANK + 1, dtype)), wrap(out), MPI.SUM)
    assert (out == N * (N + 1) // 2).all()
    assert comm.fallbacks == 2


def test_derived_datatype_on_some_ranks_only():
    """MPI matches type signatures, not datatypes: a rank may describe its buffer with a derived datatype while
    its peers pass plain arrays. That rank runs pyhccl's plan on a packed copy (no fallback, so no rank waits in
    MPI for peers that run the plan); strided output leaves the gaps alone."""
    c = pyhccl.Communicator(WORLD, timeout=60, abort_on_timeout=False)
    odd = RANK % 2 == 1 or N == 1                     # these ranks use derived datatypes
    every = [(np.arange(6) % 5 + r).astype(np.int32) for r in range(N)]
    strided = MPI.INT.Create_vector(6, 1, 2).Commit()         # every other int of 12
    block = MPI.INT.Create_contiguous(6).Commit()              # 6 ints as one item
    x = mine(6)
    spread = np.full(12, -7, np.int32)
    spread[::2] = x
    out, gaps = np.zeros(6, np.int32), np.full(12, -7, np.int32)
    c.Allreduce([spread, 1, strided] if odd else x, [gaps, 1, strided] if odd else out, MPI.SUM)
    got = gaps[::2] if odd else out
    assert (got == sum(every)).all() and (not odd or (gaps[1::2] == -7).all())
    red = np.zeros(6, np.int32)
    c.Reduce([x, 1, block] if odd else x, [red, 1, block] if odd else red, MPI.MAX, N - 1)
    if RANK == N - 1:
        assert (red == np.maximum.reduce(every)).all()
    b = np.full(12, -7, np.int32)
    if RANK == 0:
        b[::2] = x
    c.Bcast([b, 1, strided] if odd or RANK == 0 else b[:6], 0)
    assert (b[::2] == every[0]).all() if odd or RANK == 0 else (b[:6] == every[0]).all()
    assert (b[1::2] == -7).all() or not (odd or RANK == 0)
    g = np.zeros(6 * N, np.int32)
    c.Gather(x, [g, 1, block] if odd else g, 0)
    if RANK == 0:
        assert (g == np.concatenate(every)).all()
    part = np.zeros(6, np.int32)
    c.Scatter([np.concatenate(every), 1, block] if odd else np.concatenate(every), [part, 1, block] if odd else part, 0)
    assert (part == every[RANK]).all()
    assert c.fallbacks == 0
    mixed = MPI.Datatype.Create_struct([1, 1], [0, 8], [MPI.INT, MPI.DOUBLE]).Commit()
    two = np.zeros(4, np.float64)                   # mixed elements: every rank's call goes to MPI
    c.Bcast([two, 1, mixed], 0)
    assert c.fallbacks == 1
    for t in (strided, block, mixed):
        t.Free()
    c.release()
