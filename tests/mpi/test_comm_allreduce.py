"""Communicator.Allreduce under mpiexec: every algorithm, dtype and op against numpy.

Run by tests/test_mpi_launch.py as ``mpiexec -n K python -m pytest --with-mpi tests/mpi``.
Each test body is written once in a mixin and runs on world, self, a dup and a split
communicator, with pyhccl's Communicator and, as a check of the tests, with plain mpi4py.
"""

import array

import numpy as np
import pytest
from mpi4py import MPI

import pyhccl
from pyhccl.core.call import Call, get_opspec
from pyhccl.comm import SUPPORTED_DTYPES

pytestmark = pytest.mark.mpi

ALGOS = list(pyhccl.ALLREDUCE_ALGOS)
ALLREDUCE = get_opspec("allreduce")
OPS = {"sum": (MPI.SUM, np.add), "prod": (MPI.PROD, np.multiply),
       "max": (MPI.MAX, np.maximum), "min": (MPI.MIN, np.minimum)}


def exact_input(dtype, count, rank, op, seed=0):
    """Random small integers whose reduction is exact in any order (so any algorithm is bit-exact)."""
    rng = np.random.default_rng([seed, rank, count])
    if op == "prod":
        v = rng.choice([1, -1], count) if dtype.kind != "u" else rng.choice([1, 2], count)
    elif dtype.kind == "u":
        v = rng.integers(0, 5, count)
    else:
        v = rng.integers(-2, 3, count)
    return v.astype(dtype)


def reference(dtype, count, size, op, seed=0):
    """The OpSpec's numpy reference: every rank's input folded in rank order."""
    inputs = [exact_input(dtype, count, r, op, seed) for r in range(size)]
    return ALLREDUCE.reference(Call("allreduce", size, count), inputs, OPS[op][1])[0]


def agree(comm, ok):
    """Every rank learns whether all ranks passed, so no rank stops early and hangs the others."""
    return comm.allreduce(bool(ok), op=MPI.LAND)


class BaseAllreduce:
    COMM = MPI.COMM_NULL
    PYHCCL = True

    def make(self, algo=None, **kw):
        if self.PYHCCL:
            return pyhccl.Communicator(self.COMM, algo=algo, **kw)
        return self.COMM

    def counts(self):
        n = self.COMM.Get_size()
        return sorted({0, 1, max(n - 1, 1), n, 13, 1031})

    def cases(self, shift=0):
        """Every (dtype, op) pair once, the counts turning with ``shift``, plus every count for float32 SUM."""
        counts = self.counts()
        pairs = [(d, op) for d in SUPPORTED_DTYPES for op in OPS]
        return [(d, op, counts[(i + shift) % len(counts)]) for i, (d, op) in enumerate(pairs)] + \
            [("float32", "sum", k) for k in counts]

    @pytest.mark.parametrize("algo", ALGOS)
    def test_every_dtype_and_op_exact(self, algo):
        comm = self.make(algo)
        rank, size = self.COMM.Get_rank(), self.COMM.Get_size()
        bad = []
        for dname, op, count in self.cases(ALGOS.index(algo)):
            dtype, mop = SUPPORTED_DTYPES[dname], OPS[op][0]
            want = reference(dtype, count, size, op)
            x = exact_input(dtype, count, rank, op)
            out = np.full(count, 77, dtype)
            comm.Allreduce(x, out, mop)
            if not np.array_equal(out, want):
                bad.append((dname, op, count, "out-of-place"))
            if not np.array_equal(x, exact_input(dtype, count, rank, op)):
                bad.append((dname, op, count, "sendbuf modified"))
            comm.Allreduce(MPI.IN_PLACE, x, mop)
            if not np.array_equal(x, want):
                bad.append((dname, op, count, "in-place"))
        assert agree(self.COMM, not bad), bad[:10]

    @pytest.mark.parametrize("algo", ALGOS)
    @pytest.mark.parametrize("dname", ["float16", "float32", "float64"])
    def test_random_floats_bitwise_identical_across_ranks(self, algo, dname):
        comm = self.make(algo)
        rank, size = self.COMM.Get_rank(), self.COMM.Get_size()
        dtype = np.dtype(dname)
        count = 4099
        xs = [np.random.default_rng([7, r]).standard_normal(count).astype(dtype) for r in range(size)]
        out = np.empty(count, dtype)
        comm.Allreduce(xs[rank], out, MPI.SUM)
        want = np.sum(np.array(xs, dtype=np.float64), axis=0)
        tol = {"float16": 2e-2, "float32": 1e-5, "float64": 1e-12}[dname]
        close = np.allclose(out.astype(np.float64), want, rtol=tol, atol=tol * size)
        same = len(set(self.COMM.allgather(out.tobytes()))) == 1
        assert agree(self.COMM, close and same), (close, same)

    def test_buffer_forms(self):
        comm = self.make()
        rank, size = self.COMM.Get_rank(), self.COMM.Get_size()
        total = size * (size - 1) // 2
        x = np.full(8, rank, np.float32)
        checks = []
        out = np.zeros(8, np.float32)
        comm.Allreduce([x, MPI.FLOAT], [out, MPI.FLOAT])
        checks.append(np.all(out == total))
        out = np.zeros(8, np.float32)
        comm.Allreduce([x, 5, MPI.FLOAT], [out, 5, MPI.FLOAT])
        checks.append(np.all(out[:5] == total) and np.all(out[5:] == 0))
        out = np.zeros(8, np.float32)
        comm.Allreduce([x, (3, 2), MPI.FLOAT], [out, (3, 4), MPI.FLOAT])
        checks.append(np.all(out[4:7] == total) and out[:4].sum() == 0)
        a, b = array.array("d", [rank, 1.0]), array.array("d", [0.0, 0.0])
        comm.Allreduce(a, b)
        checks.append(list(b) == [total, size])
        raw, got = bytearray(np.full(4, rank, np.int32).tobytes()), bytearray(16)
        comm.Allreduce([raw, MPI.INT], [got, MPI.INT])
        checks.append(np.frombuffer(got, np.int32).tolist() == [total] * 4)
        m = np.arange(6, dtype=np.float64).reshape(2, 3) + rank
        for order in ("C", "F"):
            src = np.asarray(m, order=order)
            mine, ref = np.zeros((2, 3)), np.zeros((2, 3))
            comm.Allreduce(src, mine)
            self.COMM.Allreduce(src, ref)
            checks.append(np.array_equal(mine, ref))
        assert agree(self.COMM, all(checks)), checks

    def test_unsupported_goes_to_mpi(self):
        comm = self.make()
        size = self.COMM.Get_size()
        x = np.arange(4, dtype=np.int32)
        out = np.zeros(4, np.int32)
        comm.Allreduce(x, out, MPI.BAND)
        ok = np.array_equal(out, x)
        z, w = np.arange(3, dtype=np.complex64) * 1j, np.zeros(3, np.complex64)
        comm.Allreduce(z, w, MPI.SUM)
        ok &= np.array_equal(w, z * size)
        user = MPI.Op.Create(lambda a, b, t: np.maximum(
            np.frombuffer(a, np.int32), np.frombuffer(b, np.int32), out=np.frombuffer(b, np.int32)), commute=True)
        try:
            comm.Allreduce(x, out, user)
        finally:
            user.Free()
        ok &= np.array_equal(out, x)
        if self.PYHCCL:
            ok &= comm.fallbacks == 3
        with pytest.raises(BufferError):
            comm.Allreduce(np.arange(10.0)[::2], np.zeros(5))
        assert agree(self.COMM, ok)

    def test_errors_name_the_argument(self):
        if not self.PYHCCL:
            pytest.skip("pyhccl's own messages")
        comm = self.make()
        with pytest.raises(ValueError, match="expecting recvbuf to hold at least 8 elements"):
            comm.Allreduce(np.zeros(8), np.zeros(4))
        buf = np.zeros(8)
        with pytest.raises(ValueError, match="sendbuf and recvbuf overlap; pass MPI.IN_PLACE"):
            comm.Allreduce(buf, buf)
        ro = np.zeros(8)
        ro.flags.writeable = False
        with pytest.raises(ValueError, match="expecting a writable recvbuf"):
            comm.Allreduce(np.zeros(8), ro)
        with pytest.raises(ValueError, match="unknown template 'NHRR' in PYHCCL_ALGO 'NHRR'; did you mean nhr"):
            pyhccl.Communicator(self.COMM, algo="NHRR")
        with pytest.raises(ValueError, match="expecting ub_transfer_bytes to be a positive"):
            pyhccl.Communicator(self.COMM, ub_transfer_bytes=0)
        with pytest.raises(TypeError, match="expecting an mpi4py intracommunicator"):
            pyhccl.Communicator("world")

    def test_small_ub_transfers(self):
        if not self.PYHCCL:
            pytest.skip("pyhccl option")
        rank, size = self.COMM.Get_rank(), self.COMM.Get_size()
        ok = True
        for algo in ALGOS:
            comm = self.make(algo, ub_transfer_bytes=24)
            x = exact_input(np.dtype(np.float64), 301, rank, "sum")
            out = np.empty(301)
            comm.Allreduce(x, out)
            ok &= np.array_equal(out, reference(np.dtype(np.float64), 301, size, "sum"))
        assert agree(self.COMM, ok)

    def test_warm_calls_allocate_no_scratch(self):
        if not self.PYHCCL:
            pytest.skip("pyhccl internals")
        comm = self.make("NHR")
        x, out = np.ones(4096), np.empty(4096)
        comm.Allreduce(x, out)
        before = comm.scratch_allocations
        for _ in range(5):
            comm.Allreduce(x, out)
        assert agree(self.COMM, comm.scratch_allocations == before)

    def test_forwards_the_rest(self):
        comm = self.make()
        ok = comm.Get_rank() == self.COMM.Get_rank() and comm.Get_size() == self.COMM.Get_size()
        ok &= comm.rank == self.COMM.rank
        comm.Barrier()
        ok &= comm.bcast(42 if comm.Get_rank() == 0 else None, root=0) == 42
        dup = comm.Dup()
        out = np.zeros(3)
        dup.Allreduce(np.ones(3), out)
        ok &= np.all(out == self.COMM.Get_size())
        if self.PYHCCL:
            ok &= isinstance(dup, pyhccl.Communicator)
        dup.Free()
        assert agree(self.COMM, ok)


class TestWorld(BaseAllreduce):
    COMM = MPI.COMM_WORLD


class TestSelf(BaseAllreduce):
    COMM = MPI.COMM_SELF


class TestDup(BaseAllreduce):
    COMM = MPI.COMM_WORLD.Dup()


class TestSplit(BaseAllreduce):
    """Odd and even ranks, numbered in reverse: sub-communicator ranks differ from world ranks."""

    COMM = MPI.COMM_WORLD.Split(MPI.COMM_WORLD.Get_rank() % 2, -MPI.COMM_WORLD.Get_rank())


class TestWorldNative(BaseAllreduce):
    """The same tests against plain mpi4py: they check the tests themselves."""

    COMM = MPI.COMM_WORLD
    PYHCCL = False

    def test_every_dtype_and_op_exact(self, algo):
        if algo != ALGOS[0]:
            pytest.skip("one pass is enough for native MPI")
        comm = self.COMM
        rank, size = comm.Get_rank(), comm.Get_size()
        bad = []
        for dname, op, count in self.cases():
            if dname in ("float16", "bfloat16"):
                continue                  # MPICH has no reductions for these
            dtype = SUPPORTED_DTYPES[dname]
            out = np.empty(count, dtype)
            comm.Allreduce(exact_input(dtype, count, rank, op), out, OPS[op][0])
            if not np.array_equal(out, reference(dtype, count, size, op)):
                bad.append((dname, op, count))
        assert agree(comm, not bad), bad[:10]

    def test_random_floats_bitwise_identical_across_ranks(self, algo, dname):
        if dname == "float16" or algo != ALGOS[0]:
            pytest.skip("native: one pass, no float16")
        super().test_random_floats_bitwise_identical_across_ranks(algo, dname)

    test_every_dtype_and_op_exact = pytest.mark.parametrize("algo", ALGOS)(test_every_dtype_and_op_exact)
    test_random_floats_bitwise_identical_across_ranks = pytest.mark.parametrize("algo", ALGOS)(
        pytest.mark.parametrize("dname", ["float16", "float32", "float64"])(
            test_random_floats_bitwise_identical_across_ranks))
