"""The Communicator's check (PYHCCL_CHECK) and timed run loop (PYHCCL_TIMEOUT) under mpiexec.

A mismatched call raises the same ValueError on every rank instead of hanging; with a timeout
and every rank on time, the timed loop gives the same results as the plain one. A stalled rank
needs a job of its own: tests/test_reliability_launch.py.
"""

import numpy as np
import pytest
from mpi4py import MPI

import pyhccl

pytestmark = pytest.mark.mpi

WORLD = MPI.COMM_WORLD
RANK, SIZE = WORLD.Get_rank(), WORLD.Get_size()
many = pytest.mark.skipif(SIZE < 2, reason="a mismatch needs two ranks")


def checked(**kw):
    return pyhccl.Communicator(WORLD, check=True, timeout=60, abort_on_timeout=False, **kw)


def error_everywhere(c, call):
    """Run ``call`` on every rank; return the ValueError's text, asserting every rank raised the same."""
    try:
        call(c)
        text = None
    except ValueError as e:
        text = str(e)
    texts = WORLD.allgather(text)
    assert texts[0] is not None and len(set(texts)) == 1, texts
    return texts[0]


@many
def test_count_mismatch_on_a_cached_shape_raises_on_every_rank():
    c = checked()
    x, out = np.ones(8, np.float32), np.zeros(8, np.float32)
    c.Allreduce(x, out)                                 # agreed and cached on every rank
    n = 9 if RANK == 1 else 8
    text = error_everywhere(c, lambda c: c.Allreduce(np.ones(n, np.float32), np.zeros(n, np.float32)))
    others = "rank 0" if SIZE == 2 else "ranks 0, 2"
    assert f"ranks disagree on a collective call (PYHCCL_CHECK): count: {others}" in text and "rank 1: 9" in text
    c.Allreduce(x, out)                                 # still usable: nothing was sent
    assert np.array_equal(out, np.full(8, SIZE))


@many
@pytest.mark.parametrize("case", ["method", "dtype", "root", "op", "zero", "argument", "exchange"])
def test_every_kind_of_difference_fails_together(case):
    c = checked()
    x, out = np.ones(4), np.zeros(4)
    last = RANK == SIZE - 1

    def call(c):
        if case == "method":
            c.Bcast(x) if last else c.Allreduce(x, out)
        elif case == "dtype":
            c.Allreduce(x.astype(np.float32) if last else x, out.astype(np.float32) if last else out)
        elif case == "root":
            c.Bcast(x, root=1 if last else 0)
        elif case == "op":
            c.Allreduce(x, out, MPI.MAX if last else MPI.SUM)
        elif case == "zero":
            c.Allreduce(x[:0] if last else x, out)
        elif case == "argument":
            c.Allreduce([x, 4, 2, MPI.DOUBLE] if last else x, out)     # (a receive buffer refused: test_comm_refusals)
        else:                                           # a parser that exchanges counts meets another call
            c.Alltoallv([x, [0] * SIZE], [out, [0] * SIZE]) if last else c.Barrier()
    text = error_everywhere(c, call)
    want = {"method": "method: ", "dtype": "dtype: ", "root": "root: ", "op": "reduce op: ", "zero": "count: ",
            "argument": "an argument error (ValueError: expecting count + displacement <= 4 elements in sendbuf",
            "exchange": "its count exchange"}[case]
    assert want in text, text


def test_matching_calls_pass_the_check_and_run():
    c = checked()
    n, r = SIZE, RANK
    x = np.arange(6, dtype=np.float64) + r
    out = np.zeros(6)
    c.Allreduce(x, out)
    assert np.array_equal(out, n * np.arange(6) + sum(range(n)))
    root_out = np.zeros(6) if r == 0 else None
    c.Reduce(MPI.IN_PLACE if r == 0 else x, x.copy() if r == 0 else None)   # the root's IN_PLACE is its own
    c.Reduce(x, root_out)
    g = np.zeros(6 * n)
    c.Gather(x, g if r == 0 else None)
    counts = [r2 + 1 for r2 in range(n)]
    v = np.zeros(sum(counts) + 3)
    c.Allgatherv(np.full(r + 1, r, np.float64), [v, counts, [3 + sum(counts[:k]) for k in range(n)], MPI.DOUBLE])
    assert np.array_equal(v[3:], np.repeat(np.arange(n), counts))
    rs = np.zeros(2)
    c.Reduce_scatter(np.ones(2 * n), rs)               # recvcounts None: the parser's exchange is checked too
    assert np.array_equal(rs, [n, n])
    c.Alltoallv([np.ones(n), [1] * n], [np.zeros(n), [1] * n])
    z = np.ones(3, np.complex128)
    c.Allreduce(z, np.zeros(3, np.complex128))         # every rank falls back alike
    c.Allreduce(x[:0], out[:0])
    c.Barrier()
    assert c.fallbacks == 1


@pytest.mark.parametrize("ub", [None, 64])
def test_timed_loop_gives_the_plain_results(ub):
    plain = pyhccl.Communicator(WORLD, ub_transfer_bytes=ub)
    timed = pyhccl.Communicator(WORLD, ub_transfer_bytes=ub, timeout=60, abort_on_timeout=False)
    for count in ((1, 40) if ub else (1, 1000)):
        x = (np.arange(count * SIZE) % 5 + RANK).astype(np.float32)
        for method, args in (("Allreduce", lambda: (x, np.zeros_like(x))),
                             ("Reduce_scatter_block", lambda: (x, np.zeros(count, np.float32))),
                             ("Allgather", lambda: (x[:count], np.zeros_like(x))),
                             ("Alltoall", lambda: (x, np.zeros_like(x))),
                             ("Bcast", lambda: (x.copy(),))):
            a, b = args(), args()
            getattr(plain, method)(*a)
            getattr(timed, method)(*b)
            assert np.array_equal(a[-1], b[-1]), (method, count)
    timed.Barrier()
