"""Every Communicator collective under mpiexec against its OpSpec reference.

Run by tests/test_mpi_launch.py as ``mpiexec -n K python -m pytest --with-mpi tests/mpi``.
Each body is written once in a mixin and runs on the world and on a split communicator whose
ranks are numbered in reverse. Inputs are small integers, so every reduction order gives the
same bits and results compare with ``array_equal``; replicated results are also compared
across ranks byte for byte.
"""

import time
from itertools import product

import numpy as np
import pytest
from mpi4py import MPI

import pyhccl
from pyhccl.core.call import Call

pytestmark = pytest.mark.mpi

DTYPES = [np.dtype(d) for d in ("float32", "float64", "int32", "int64")]
OPS = {"sum": (MPI.SUM, np.add), "prod": (MPI.PROD, np.multiply),
       "max": (MPI.MAX, np.maximum), "min": (MPI.MIN, np.minimum)}
CASES = list(product(DTYPES, OPS))          # every dtype with every reduce op


def data(dtype, count, rank, op="sum", seed=0):
    """Small integers (+-1 for PROD): exact in any reduction order."""
    rng = np.random.default_rng([seed, rank, count])
    v = rng.choice([1, -1], count) if op == "prod" else rng.integers(-3, 4, count)
    return v.astype(dtype)


def reference(call, dtype, op="sum", seed=0):
    """Every rank's inputs and the OpSpec's answer for ``call``."""
    xs = [data(dtype, call.input_count(r), r, op, seed) for r in range(call.nranks)]
    return xs, call.spec.reference(call, xs, OPS[op][1])


def uneven(n, shift=0):
    """Per-rank counts with zeros and differing sizes."""
    return [(3 * j + shift) % 4 for j in range(n)]


class BaseCollectives:
    COMM = MPI.COMM_NULL

    def setup_method(self):
        self.c = pyhccl.Communicator(self.COMM)
        self.rank, self.n = self.COMM.Get_rank(), self.COMM.Get_size()
        self.bad = []

    def teardown_method(self):
        self.c.release()

    def check(self, label, got, want):
        if got is None or want is None or got.dtype != want.dtype or not np.array_equal(got, want):
            self.bad.append((label, None if got is None else got.tolist(), None if want is None else want.tolist()))

    def same(self, label, arr):
        if len(set(self.COMM.allgather(arr.tobytes()))) != 1:
            self.bad.append((label, "differs across ranks"))

    def done(self):
        ok = self.COMM.allreduce(not self.bad, op=MPI.LAND)
        assert ok and self.c.fallbacks == 0, (self.bad[:6], self.c.fallbacks)

    def roots(self):
        return sorted({0, self.n // 2, self.n - 1})

    def counts(self):
        return sorted({0, 1, self.n + 1, 13})

    # -- rooted ---------------------------------------------------------------------------
    def test_reduce(self):
        c, r, n = self.c, self.rank, self.n
        roots = self.roots()
        cases = [(dt, op, 7, roots[i % len(roots)]) for i, (dt, op) in enumerate(CASES)]
        cases += [(DTYPES[0], "sum", k, root) for k in self.counts() for root in roots]
        for dtype, op, k, root in cases:
            xs, want = reference(Call("reduce", n, k, root), dtype, op)
            out = np.full(k, 99, dtype) if r == root else None
            c.Reduce(xs[r], out, OPS[op][0], root)
            buf = xs[r].copy()
            if r == root:
                self.check((dtype.name, op, k, root), out, want[root])
                c.Reduce(MPI.IN_PLACE, buf, OPS[op][0], root)
                self.check((dtype.name, op, k, root, "in place"), buf, want[root])
            else:
                c.Reduce(buf, None, OPS[op][0], root)
                self.check((dtype.name, op, k, root, "sendbuf kept"), buf, xs[r])
        self.done()

    def test_bcast(self):
        c, r, n = self.c, self.rank, self.n
        roots = self.roots()
        cases = [(dt, 7, roots[i % len(roots)]) for i, dt in enumerate(DTYPES)]
        cases += [(DTYPES[1], k, root) for k in self.counts() for root in roots]
        for dtype, k, root in cases:
            xs, want = reference(Call("broadcast", n, k, root), dtype)
            buf = xs[r].copy() if r == root else np.full(k, 99, dtype)
            c.Bcast(buf, root)
            self.check((dtype.name, k, root), buf, want[r])
            self.same((dtype.name, k, root), buf)
        ro = np.arange(5, dtype=np.int32)             # a read-only root buffer is fine: it is only read
        ro.flags.writeable = r != 0
        buf = ro if r == 0 else np.zeros(5, np.int32)
        c.Bcast(buf, 0)
        self.check("read-only root", buf, np.arange(5, dtype=np.int32))
        self.done()

    def test_gather(self):
        c, r, n = self.c, self.rank, self.n
        roots = self.roots()
        cases = [(dt, 5, roots[i % len(roots)]) for i, dt in enumerate(DTYPES)]
        cases += [(DTYPES[2], k, root) for k in self.counts() for root in roots]
        for dtype, k, root in cases:
            xs, want = reference(Call("gather", n, k, root), dtype)
            out = np.full(n * k, 99, dtype) if r == root else None
            c.Gather(xs[r], out, root)
            if r == root:
                self.check((dtype.name, k, root), out, want[root])
                buf = np.full(n * k, 99, dtype)
                buf[r * k:(r + 1) * k] = xs[r]
                c.Gather(MPI.IN_PLACE, buf, root)
                self.check((dtype.name, k, root, "in place"), buf, want[root])
            else:
                c.Gather(xs[r], None, root)
        self.done()

    def test_scatter(self):
        c, r, n = self.c, self.rank, self.n
        roots = self.roots()
        cases = [(dt, 5, roots[i % len(roots)]) for i, dt in enumerate(DTYPES)]
        cases += [(DTYPES[3], k, root) for k in self.counts() for root in roots]
        for dtype, k, root in cases:
            xs, want = reference(Call("scatter", n, k, root), dtype)
            out = np.full(k, 99, dtype)
            c.Scatter(xs[root] if r == root else None, out, root)
            self.check((dtype.name, k, root), out, want[r])
            if r == root:                              # the root's block stays in sendbuf
                send = xs[root].copy()
                c.Scatter(send, MPI.IN_PLACE, root)
                self.check((dtype.name, k, root, "in place"), send, xs[root])
            else:
                out = np.full(k, 99, dtype)
                c.Scatter(None, out, root)
                self.check((dtype.name, k, root, "in place elsewhere"), out, want[r])
        self.done()

    # -- all ranks ------------------------------------------------------------------------
    def test_allgather(self):
        c, r, n = self.c, self.rank, self.n
        cases = [(dt, 3) for dt in DTYPES] + [(DTYPES[0], k) for k in self.counts()]
        for dtype, k in cases:
            xs, want = reference(Call("all_gather", n, k), dtype)
            out = np.full(n * k, 99, dtype)
            c.Allgather(xs[r], out)
            self.check((dtype.name, k), out, want[r])
            self.same((dtype.name, k), out)
            buf = np.full(n * k, 99, dtype)
            buf[r * k:(r + 1) * k] = xs[r]
            c.Allgather(MPI.IN_PLACE, buf)
            self.check((dtype.name, k, "in place"), buf, want[r])
        self.done()

    def test_allgatherv(self):
        c, r, n = self.c, self.rank, self.n
        layouts = [uneven(n), uneven(n, 1), [0] * n, [5] * n]
        for i, counts in enumerate(layouts):
            dtype = DTYPES[i % len(DTYPES)]
            xs, want = reference(Call("all_gather_v", n, counts=tuple(counts)), dtype)
            out = np.full(sum(counts), 99, dtype)
            c.Allgatherv(xs[r], [out, counts])
            self.check((dtype.name, counts), out, want[r])
            self.same((dtype.name, counts), out)
            # blocks in reverse rank order with one-element gaps, every mpi4py form
            displs = [sum(counts[j + 1:]) + (n - 1 - j) for j in range(n)]
            call = Call("all_gather_v", n, counts=tuple(counts), displs=tuple(displs))
            _, want = reference(call, dtype)
            size = call.output_count(r)
            mpitype = MPI.Datatype.fromcode(dtype.char)
            for form in ([None, counts, displs, mpitype], [None, (counts, displs), mpitype], [None, (counts, displs)]):
                out = np.zeros(size, dtype)
                form[0] = out
                c.Allgatherv(xs[r], form)
                self.check((dtype.name, counts, "displs", len(form)), out, want[r])
            if len(set(counts)) == 1:           # mpi4py's int forms: every block that count, packed or strided
                k = counts[0]
                for form, stride in (([None, k], k), ([None, (k, k + 2), None], k + 2), ([None, k, 3 * k, None], 3 * k)):
                    out = np.full(n * stride, 99, dtype)
                    form[0] = out
                    c.Allgatherv(xs[r], form)
                    want_int = np.full(n * stride, 99, dtype)
                    for j in range(n):
                        want_int[j * stride:j * stride + k] = xs[j]
                    self.check((dtype.name, k, "int count, stride", stride), out, want_int)
            out = np.zeros(size, dtype)
            out[displs[r]:displs[r] + counts[r]] = xs[r]
            c.Allgatherv(MPI.IN_PLACE, [out, (counts, displs)])
            self.check((dtype.name, counts, "in place"), out, want[r])
        self.done()

    def test_reduce_scatter_block(self):
        c, r, n = self.c, self.rank, self.n
        cases = [(dt, op, 3) for dt, op in CASES] + [(DTYPES[0], "sum", k) for k in self.counts()]
        for dtype, op, k in cases:
            xs, want = reference(Call("reduce_scatter", n, k), dtype, op)
            out = np.full(k, 99, dtype)
            c.Reduce_scatter_block(xs[r], out, OPS[op][0])
            self.check((dtype.name, op, k), out, want[r])
            buf = xs[r].copy()
            c.Reduce_scatter_block(MPI.IN_PLACE, buf, OPS[op][0])
            self.check((dtype.name, op, k, "in place"), buf[:k], want[r])
            self.check((dtype.name, op, k, "in place: the rest as it was"), buf[k:], xs[r][k:])
        self.done()

    def test_reduce_scatter(self):
        c, r, n = self.c, self.rank, self.n
        for i, (dtype, op) in enumerate(CASES):
            counts = uneven(n, i)
            xs, want = reference(Call("reduce_scatter_v", n, counts=tuple(counts)), dtype, op)
            out = np.full(counts[r], 99, dtype)
            c.Reduce_scatter(xs[r], out, counts, OPS[op][0])
            self.check((dtype.name, op, counts), out, want[r])
            buf = xs[r].copy()
            c.Reduce_scatter(MPI.IN_PLACE, buf, counts, OPS[op][0])
            self.check((dtype.name, op, counts, "in place"), buf[:counts[r]], want[r])
        for k in self.counts():                         # even counts: ReduceScatter; recvcounts from recvbuf
            xs, want = reference(Call("reduce_scatter", n, k), DTYPES[1])
            out = np.full(k, 99, DTYPES[1])
            c.Reduce_scatter(xs[r], out)
            self.check(("even", k), out, want[r])
            buf = xs[r].copy()
            c.Reduce_scatter(MPI.IN_PLACE, buf, [k] * n)
            self.check(("even", k, "in place"), buf[:k], want[r])
            self.check(("even", k, "in place: the rest as it was"), buf[k:], xs[r][k:])
        self.done()

    def test_alltoall(self):
        c, r, n = self.c, self.rank, self.n
        cases = [(dt, 2) for dt in DTYPES] + [(DTYPES[2], k) for k in (0, 1, 3)]
        for dtype, k in cases:
            xs, want = reference(Call("alltoall", n, k), dtype)
            out = np.full(n * k, 99, dtype)
            c.Alltoall(xs[r], out)
            self.check((dtype.name, k), out, want[r])
            buf = xs[r].copy()
            c.Alltoall(MPI.IN_PLACE, buf)
            self.check((dtype.name, k, "in place"), buf, want[r])
        self.done()

    def test_alltoallv(self):
        c, r, n = self.c, self.rank, self.n
        for i, dtype in enumerate(DTYPES):
            m = tuple(tuple((a + 2 * b + i) % 3 for b in range(n)) for a in range(n))
            rdispls = tuple(tuple(sum(m[a][j] for a in range(q)) + q for q in range(n)) for j in range(n))
            call = Call("alltoallv", n, matrix=m, rdispls=rdispls)          # one-element gaps on receive
            xs, want = reference(call, dtype)
            out = np.full(call.output_count(r), 99, dtype)
            want_r = want[r].copy()
            gaps = np.ones(out.size, bool)
            for q in range(n):
                gaps[rdispls[r][q]:rdispls[r][q] + m[q][r]] = False
            want_r[gaps] = 99                           # the gaps keep their values
            scounts, rcounts = list(m[r]), [m[q][r] for q in range(n)]
            c.Alltoallv([xs[r], (scounts, list(call.sdispls[r]))], [out, rcounts, list(rdispls[r]), None])
            self.check((dtype.name, "matrix", m), out, want_r)
        for k in (0, 2):                    # mpi4py's int form: every block that count
            xs, want = reference(Call("alltoall", n, k), DTYPES[2])
            out = np.full(n * k, 99, DTYPES[2])
            c.Alltoallv([xs[r], k], [out, k])
            self.check(("int count", k), out, want[r])
        sym = tuple(tuple((a + b) % 3 for b in range(n)) for a in range(n))     # in place needs a symmetric matrix
        xs, want = reference(Call("alltoallv", n, matrix=sym), DTYPES[0])
        buf = xs[r].copy()
        c.Alltoallv(MPI.IN_PLACE, [buf, list(sym[r])])
        self.check(("in place", sym), buf, want[r])
        self.done()

    def test_barrier(self):
        c, r = self.c, self.rank
        self.COMM.Barrier()
        start = time.monotonic()
        if r == 0:
            time.sleep(0.2)
        c.Barrier()
        waited = time.monotonic() - start
        if waited < 0.15:
            self.bad.append(("left the barrier early", waited))
        self.done()

    # -- buffer forms, fallbacks, errors on every rank --------------------------------------
    def test_buffer_forms(self):
        c, r, n = self.c, self.rank, self.n
        xs, want = reference(Call("all_gather", n, 3), DTYPES[0])
        big = np.full(n * 3 + 4, 99, DTYPES[0])
        c.Allgather([xs[r], MPI.FLOAT], [big, (3, 2), MPI.FLOAT])   # 3 per block, from element 2
        self.check("count and displacement", big[2:2 + 3 * n], want[r])
        raw = bytearray(xs[r].tobytes())
        got = bytearray(4 * 3 * n)
        c.Allgather([raw, "f"], [got, 3, "f"])
        self.check("typecodes", np.frombuffer(got, np.float32), want[r])
        self.done()

    def test_unsupported_goes_to_mpi(self):
        c, r, n = self.c, self.rank, self.n
        z = np.arange(3, dtype=np.complex64) * (1j + r)
        out = np.zeros(3 * n, np.complex64)
        c.Allgather(z, out)
        ok = np.array_equal(out, np.concatenate([np.arange(3) * (1j + q) for q in range(n)]).astype(np.complex64))
        b = np.full(2, r, np.int32)
        res = np.zeros(2, np.int32) if r == 0 else None
        c.Reduce(b, res, MPI.BOR, 0)
        if r == 0:
            ok &= np.array_equal(res, np.full(2, np.bitwise_or.reduce(np.arange(n)), np.int32))
        if n > 1:                                       # send blocks that overlap: legal MPI, not a plan
            src = np.arange(2, dtype=np.float64) + r
            got = np.zeros(n, np.float64)
            c.Alltoallv([src, ([1] * n, [0] * n)], [got, [1] * n])
            ok &= np.array_equal(got, np.arange(n, dtype=np.float64))
        ok &= c.fallbacks == (3 if n > 1 else 2)
        assert self.COMM.allreduce(bool(ok), op=MPI.LAND)

    def test_errors_every_rank_raises(self):
        c, r, n = self.c, self.rank, self.n
        with pytest.raises(ValueError, match=rf"expecting root in range\(comm.size\) = range\({n}\), got {n}"):
            c.Bcast(np.zeros(2), n)
        with pytest.raises(ValueError, match="expecting recvbuf to hold at least 8 elements"):
            c.Reduce_scatter_block(np.zeros(8 * n), np.zeros(4))
        if n > 1:
            bad = [1] * n
            bad[r] = 2                                  # every rank expects 2 from itself: nobody sends it
            with pytest.raises(ValueError, match=r"expecting rank \d+'s recvbuf counts\[\d+\] = 1 \(what rank"):
                c.Alltoallv([np.zeros(n), [1] * n], [np.zeros(n + 1), bad])
            k = 2 if r == 0 else 3                      # rank 0 sends 2 elements, the others 3
            with pytest.raises(ValueError, match="ranks disagree on the AllGather call; rank 0: AllGather of 2"):
                c.Allgather(np.zeros(k), np.zeros(n * k))
            op = MPI.MAX if r == 0 else MPI.SUM              # the counts agree: the message names the ops
            with pytest.raises(ValueError, match=r"ranks disagree on the AllReduce call; rank 0: AllReduce of 5 x "
                                                 r"float64, op max; rank 1: AllReduce of 5 x float64, op sum"):
                c.Allreduce(np.zeros(5), np.zeros(5), op)
            with pytest.raises(ValueError, match=rf"expecting sendbuf to hold {n} equal blocks \(one per rank\), "
                                                 rf"got {n + 1} elements"):       # on every rank: no rank waits
                c.Alltoall(np.zeros(n + 1 if r == n - 1 else n), np.zeros(n))
            with pytest.raises(ValueError, match=rf"expecting recvbuf to hold {n} equal blocks \(one per rank\), "
                                                 rf"got {2 * n + 1} elements"):
                c.Allgather(np.zeros(2), np.zeros(2 * n + 1))
            with pytest.raises(ValueError, match=rf"expecting count \+ displacement <= 8 elements in recvbuf, "
                                                 rf"got {n} x 3 \+ 6"):
                c.Allgather(np.zeros(3), [np.zeros(8), 3, 6, MPI.DOUBLE])
            with pytest.raises(ValueError, match="expecting displs to place blocks without overlap"):
                c.Allgatherv(np.zeros(2), [np.zeros(2 * n), ([2] * n, [0] * n)])
            if r != 0:                                  # the root does not call: nothing reaches MPI
                with pytest.raises(TypeError, match="expecting sendbuf as a buffer on a non-root rank "
                                                    r"\(MPI.IN_PLACE is the root's\), got IN_PLACE"):
                    c.Reduce(MPI.IN_PLACE, None, MPI.SUM, 0)
                with pytest.raises(TypeError, match="expecting recvbuf as a buffer on a non-root rank"):
                    c.Scatter(None, None, 0)
            ro = np.zeros(2)
            ro.flags.writeable = r == 0                 # read-only where Bcast writes: refused, and every rank raises
            with pytest.raises(ValueError, match=f"rank{'s' * (n > 2)} 1.*: expecting a writable buf, got a "
                                                 "read-only buffer"):
                c.Bcast(ro, 0)
        self.COMM.Barrier()


class TestWorld(BaseCollectives):
    COMM = MPI.COMM_WORLD


class TestSplit(BaseCollectives):
    """Odd and even ranks, numbered in reverse: sub-communicator ranks differ from world ranks."""

    COMM = MPI.COMM_WORLD.Split(MPI.COMM_WORLD.Get_rank() % 2, -MPI.COMM_WORLD.Get_rank())
