"""No hang on an error only some ranks see (issue 17): a rank-local refusal reaches every rank.

Run by tests/test_mpi_launch.py at 1-4 ranks (5 and 8 with ``-m slow``); a hang fails there, on the
launch's time limit. The communicators have no timeout and no check: the contract holds without them
(docs/communicator.md, Errors). Each case refuses on one rank only, on a shape's first call: every
rank raises the same ValueError naming that rank; then the communicator runs the next call normally.
"""

import numpy as np
import pytest
from mpi4py import MPI

import pyhccl

pytestmark = pytest.mark.mpi

WORLD = MPI.COMM_WORLD
N, RANK = WORLD.Get_size(), WORLD.Get_rank()
LAST = N - 1


def read_only(a):
    a.flags.writeable = False
    return a


def raises_everywhere(c, call, rank, message):
    """``call(c)`` raises on every rank, naming ``rank`` and ``message``; then an Allreduce works."""
    with pytest.raises(ValueError, match=f"rank {rank}: {message}") as info:
        call(c)
    assert "every rank raises this" in str(info.value)
    texts = WORLD.allgather(str(info.value))
    assert len(set(texts)) == 1, texts                      # the same text on every rank
    x, out = np.full(3, RANK + 1, np.int64), np.zeros(3, np.int64)
    c.Allreduce(x, out)                                     # the communicator is in step: the next call runs
    assert (out == N * (N + 1) // 2).all()


# Each case: (name, the call, the refusing rank, what it says). ``r`` is this rank, ``n`` the size.
CASES = [
    ("reduce root recvbuf too small",
     lambda c: c.Reduce(np.ones(4, np.float32), np.zeros(2 if RANK == LAST else 4, np.float32), MPI.SUM, LAST),
     LAST, r"expecting recvbuf to hold at least 4 elements \(the send count\), got 2"),
    ("allreduce last rank's recvbuf larger than the send count",
     lambda c: c.Allreduce(np.ones(4, np.float32), np.zeros(5 if RANK == LAST else 4, np.float32)),
     LAST, r"mismatch in send count 4 and receive count 5"),
    ("reduce root recvbuf read-only",
     lambda c: c.Reduce(np.ones(4), read_only(np.zeros(4)) if RANK == 0 else None, MPI.MAX, 0),
     0, "expecting a writable recvbuf, got a read-only buffer"),
    ("gather root recvbuf of other blocks",
     lambda c: c.Gather(np.ones(2, np.int32), np.zeros(3 * N, np.int32) if RANK == LAST else None, LAST),
     LAST, f"expecting recvbuf to hold {N} blocks of 2 elements \\(the send count\\), got {N} blocks of 3"),
    ("reduce_scatter_block last rank's recvbuf too small",
     lambda c: c.Reduce_scatter_block(np.ones(3 * N), np.zeros(1 if RANK == LAST else 3)),
     LAST, r"expecting recvbuf to hold at least 3 elements \(one block of sendbuf\), got 1"),
    ("allreduce one read-only recvbuf",
     lambda c: c.Allreduce(np.ones(5, np.int32), read_only(np.zeros(5, np.int32)) if RANK == LAST
                           else np.zeros(5, np.int32)),
     LAST, "expecting a writable recvbuf"),
    ("allgather overlapping buffers on one rank",
     lambda c: (lambda buf: c.Allgather(buf[:2] if RANK == LAST else np.ones(2), buf))(np.zeros(2 * N)),
     LAST, "sendbuf and recvbuf overlap; pass MPI.IN_PLACE as sendbuf to gather in place"),
]


@pytest.mark.parametrize("name,call,rank,message", CASES, ids=[c[0] for c in CASES])
def test_refusal_on_one_rank_raises_on_every_rank(name, call, rank, message):
    c = pyhccl.Communicator(WORLD, check=False, timeout=0)
    try:
        raises_everywhere(c, call, rank, message)
    finally:
        c.release()


@pytest.mark.skipif(N < 2, reason="a non-root rank")
def test_non_root_refusals():
    c = pyhccl.Communicator(WORLD, check=False, timeout=0)
    try:
        raises_everywhere(c, lambda c: c.Bcast(read_only(np.zeros(4)) if RANK == 1 else np.zeros(4), 0), 1,
                          "expecting a writable buf, got a read-only buffer")
        raises_everywhere(c, lambda c: c.Scatter(np.ones(4 * N) if RANK == 0 else None,
                                                 read_only(np.zeros(4)) if RANK == LAST else np.zeros(4), 0),
                          LAST, "expecting a writable recvbuf, got a read-only buffer")
    finally:
        c.release()


def test_refusal_on_an_agreed_shape():
    """The shape ran before: the refusing rank takes part over fresh memory, then raises; the others finish."""
    c = pyhccl.Communicator(WORLD, check=False, timeout=0)
    try:
        x = np.arange(6, dtype=np.float64) + RANK
        want = sum(np.arange(6, dtype=np.float64) + r for r in range(N))
        out = np.zeros(6)
        c.Allreduce(x, out)                                 # agrees on the shape
        assert (out == want).all()
        short = np.zeros(4 if RANK == LAST else 6)
        if RANK == LAST:
            with pytest.raises(ValueError, match=f"rank {LAST} refused Allreduce: expecting recvbuf to hold at least "
                                                 r"6 elements \(the send count\), got 4 \(the other ranks finished"):
                c.Allreduce(x, short)
        else:
            c.Allreduce(x, short)
            assert (short == want).all()                   # the refusing rank's input counted
        c.Allreduce(x, out)
        assert (out == want).all()
    finally:
        c.release()
