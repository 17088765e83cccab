"""The per-op parsers: a Communicator method's mpi4py arguments -> a :class:`Job`, or the reason (a string) the
wrapped MPI must run the call. Wrong arguments raise here, once, before the call reaches a plan."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
from mpi4py import MPI

from ..core.call import Call
from .buffers import (Buffer, as_array, as_vector, count_list, in_place, reduce_op_name, reduce_ufunc,
                      unsupported_form, unsupported_op)
from .job import (Env, Job, block_count, mismatch, output_view, overlaps, refuse, require_apart, require_buffer,
                  require_disjoint, root_index, stage, staged, writeable)

__all__ = ["PARSERS", "allreduce", "reduce", "bcast", "allgather", "gather", "scatter", "reduce_scatter_block",
           "reduce_scatter", "allgatherv", "alltoall", "alltoallv", "barrier"]


# -- the parsers: one per method, mpi4py's arguments after the Env ------------------------------

def allreduce(env: Env, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM) -> Job | str:
    """Allreduce: the count is sendbuf's (recvbuf's when in place); recvbuf holds exactly that, as mpi4py requires."""
    ufunc = reduce_ufunc(op)
    if ufunc is None:
        return unsupported_op(op)
    inplace = in_place(sendbuf)
    rb = as_array(recvbuf, name="recvbuf")
    sb = rb if inplace else as_array(sendbuf, name="sendbuf")
    if rb is None or sb is None:
        return unsupported_form(sendbuf=sendbuf, recvbuf=recvbuf)
    if why := mismatch(sb, rb):
        return why
    count = sb.array.size
    out = output_view(env, rb, count, "recvbuf", "the send count", exact="send count")
    if not inplace:
        out = require_apart(env, sb.array, out, "pass MPI.IN_PLACE as sendbuf to reduce in place")
    return Job(Call("allreduce", env.size, count, in_place=inplace), out.dtype, out if inplace else sb.array, out,
               ufunc, reduce_op_name(op), rb.device)


def reduce(env: Env, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM, root: int = 0) -> Job | str:
    """Reduce: recvbuf is read at the root only; MPI.IN_PLACE (sendbuf) at the root."""
    root = root_index(root, env.size)
    ufunc = reduce_ufunc(op)
    if ufunc is None:
        return unsupported_op(op)
    at_root = env.rank == root
    inplace = at_root and in_place(sendbuf)
    if not at_root:
        require_buffer(sendbuf, "sendbuf", "on a non-root rank (MPI.IN_PLACE is the root's)")
    elif in_place(recvbuf):
        raise TypeError("expecting recvbuf as a buffer at the root, got None")
    rb = as_array(recvbuf, name="recvbuf") if at_root else None
    sb = rb if inplace else as_array(sendbuf, name="sendbuf")
    if sb is None or (at_root and rb is None):
        return unsupported_form(sendbuf=sendbuf, recvbuf=recvbuf)
    if rb is not None and (why := mismatch(sb, rb)):
        return why
    count = sb.array.size
    if at_root:
        out = output_view(env, rb, count, "recvbuf", "the send count", exact="send count")
        if not inplace:
            out = require_apart(env, sb.array, out, "pass MPI.IN_PLACE as sendbuf at the root to reduce in place")
    else:
        out = stage(env, sb, count)          # the templates' work space; never the user's
    return Job(Call("reduce", env.size, count, root, in_place=inplace), out.dtype, out if inplace else sb.array,
               out, ufunc, reduce_op_name(op), sb.device, work_out=not at_root)


def bcast(env: Env, buf: Any, root: int = 0) -> Job | str:
    """Bcast: one buffer, read at the root, written elsewhere."""
    root = root_index(root, env.size)
    b = as_array(buf, name="buf")
    if b is None:
        return unsupported_form(buf=buf)
    arr = b.array
    if env.rank != root:
        arr = output_view(env, b, arr.size, "buf", "")
    elif not writeable(arr):                          # the templates may rewrite the root's data
        arr = staged(env, b, arr)
    return Job(Call("broadcast", env.size, arr.size, root), arr.dtype, arr, arr, device=b.device)


def _gathered(env: Env, sb: Buffer, rb: Buffer, n: int, inplace: bool, hint: str) -> tuple[int, np.ndarray]:
    """(per-rank count, output array) of a gathering op: recvbuf holds n blocks of the send count."""
    size = rb.array.size
    count = size // n if inplace else sb.array.size
    if size != n * count:                   # the send count is the call's: a recvbuf of other blocks is refused
        error = ValueError(f"expecting recvbuf to hold {n} blocks of {count} elements (the send count), got {n} "
                           f"blocks of {size // n}" if size % n == 0 else f"expecting recvbuf to hold {n} equal blocks "
                           f"(one per rank), got {size} elements; give the block's count as [buf, count, datatype]")
        return count, refuse(env, error, rb.array, n * count)
    out = output_view(env, rb, n * count, "recvbuf", f"{n} blocks of the send count")
    if not inplace:
        out = require_apart(env, sb.array, out, hint)
    return count, out


def allgather(env: Env, sendbuf: Any, recvbuf: Any) -> Job | str:
    """Allgather: recvbuf holds size blocks of the send count; in place, block ``rank`` is the input."""
    n = env.size
    inplace = in_place(sendbuf)
    rb = as_array(recvbuf, n, "recvbuf")
    sb = rb if inplace else as_array(sendbuf, name="sendbuf")
    if rb is None or sb is None:
        return unsupported_form(sendbuf=sendbuf, recvbuf=recvbuf)
    if why := mismatch(sb, rb):
        return why
    count, out = _gathered(env, sb, rb, n, inplace, "pass MPI.IN_PLACE as sendbuf to gather in place")
    return Job(Call("all_gather", n, count, in_place=inplace), out.dtype, out if inplace else sb.array, out,
               device=rb.device)


def gather(env: Env, sendbuf: Any, recvbuf: Any, root: int = 0) -> Job | str:
    """Gather: recvbuf (size blocks) is read at the root only; MPI.IN_PLACE (sendbuf) at the root."""
    n = env.size
    root = root_index(root, n)
    at_root = env.rank == root
    inplace = at_root and in_place(sendbuf)
    if not at_root:
        require_buffer(sendbuf, "sendbuf", "on a non-root rank (MPI.IN_PLACE is the root's)")
    elif in_place(recvbuf):
        raise TypeError("expecting recvbuf as a buffer at the root, got None")
    rb = as_array(recvbuf, n, "recvbuf") if at_root else None
    sb = rb if inplace else as_array(sendbuf, name="sendbuf")
    if sb is None or (at_root and rb is None):
        return unsupported_form(sendbuf=sendbuf, recvbuf=recvbuf)
    if rb is not None and (why := mismatch(sb, rb)):
        return why
    if not at_root:
        arr = sb.array
        return Job(Call("gather", n, arr.size, root), arr.dtype, arr, arr[:0], device=sb.device)
    count, out = _gathered(env, sb, rb, n, inplace, "pass MPI.IN_PLACE as sendbuf at the root to gather in place")
    return Job(Call("gather", n, count, root, in_place=inplace), out.dtype, out if inplace else sb.array, out,
               device=rb.device)


def scatter(env: Env, sendbuf: Any, recvbuf: Any, root: int = 0) -> Job | str:
    """Scatter: sendbuf (size blocks) is read at the root only; MPI.IN_PLACE (recvbuf) at the root."""
    n = env.size
    root = root_index(root, n)
    at_root = env.rank == root
    inplace = at_root and in_place(recvbuf)
    if not at_root:
        require_buffer(recvbuf, "recvbuf", "on a non-root rank (MPI.IN_PLACE is the root's)")
    elif in_place(sendbuf):
        raise TypeError("expecting sendbuf as a buffer at the root, got None")
    sb = as_array(sendbuf, n, "sendbuf") if at_root else None
    rb = None if inplace else as_array(recvbuf, name="recvbuf")
    if (at_root and sb is None) or (not inplace and rb is None):
        return unsupported_form(sendbuf=sendbuf, recvbuf=recvbuf)
    if sb is not None and rb is not None and (why := mismatch(sb, rb)):
        return why
    if not at_root:
        out = output_view(env, rb, rb.array.size, "recvbuf", "")
        return Job(Call("scatter", n, out.size, root), out.dtype, out[:0], out, device=rb.device)
    count = block_count(env, sb, n, "sendbuf")
    if inplace:                 # the root's block stays where it is: receive it into staging
        out = stage(env, sb, count)
    else:
        out = output_view(env, rb, count, "recvbuf", "one block of sendbuf")
        out = require_apart(env, sb.array, out,
                            "pass MPI.IN_PLACE as recvbuf at the root to leave the root's block in place")
    return Job(Call("scatter", n, count, root), out.dtype, sb.array[:n * count], out, device=sb.device)


def reduce_scatter_block(env: Env, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM) -> Job | str:
    """Reduce_scatter_block: sendbuf holds size blocks; in place, recvbuf holds them and gets block ``rank``."""
    n = env.size
    ufunc = reduce_ufunc(op)
    if ufunc is None:
        return unsupported_op(op)
    inplace = in_place(sendbuf)
    rb = as_array(recvbuf, n if inplace else 1, "recvbuf")
    sb = rb if inplace else as_array(sendbuf, n, "sendbuf")
    if rb is None or sb is None:
        return unsupported_form(sendbuf=sendbuf, recvbuf=recvbuf)
    if why := mismatch(sb, rb):
        return why
    count = block_count(env, sb, n, "recvbuf (MPI.IN_PLACE: it holds the input)" if inplace else "sendbuf")
    if inplace:                 # the input is staged: MPI leaves recvbuf past the result block as it was
        whole = output_view(env, rb, n * count, "recvbuf", "")
        return Job(Call("reduce_scatter", n, count), whole.dtype, staged(env, rb, whole), whole[:count], ufunc,
                   reduce_op_name(op), rb.device)
    out = output_view(env, rb, count, "recvbuf", "one block of sendbuf", exact="send count")
    out = require_apart(env, sb.array, out, "pass MPI.IN_PLACE as sendbuf to reduce in place")
    return Job(Call("reduce_scatter", n, count), out.dtype, sb.array[:n * count], out, ufunc, reduce_op_name(op),
               rb.device)


def reduce_scatter(env: Env, sendbuf: Any, recvbuf: Any, recvcounts: Sequence[int] | None = None,
                   op: MPI.Op = MPI.SUM) -> Job | str:
    """Reduce_scatter: equal counts run ReduceScatter, uneven ones ReduceScatterV.

    recvcounts None (not in place) gathers every rank's recvbuf size, as mpi4py does.
    """
    n, rank = env.size, env.rank
    ufunc = reduce_ufunc(op)
    if ufunc is None:
        return unsupported_op(op)
    inplace = in_place(sendbuf)
    rb = as_array(recvbuf, name="recvbuf")
    sb = rb if inplace else as_array(sendbuf, name="sendbuf")
    if rb is None or sb is None:
        return unsupported_form(sendbuf=sendbuf, recvbuf=recvbuf)
    if why := mismatch(sb, rb):
        return why
    if recvcounts is None:
        if inplace:
            raise ValueError("expecting recvcounts with MPI.IN_PLACE (recvbuf then holds the input), got None")
        counts = tuple(env.allgather(rb.array.size))
    else:
        counts = count_list(recvcounts, n, "recvcounts")
    total, mine = sum(counts), counts[rank]
    src = "recvbuf (MPI.IN_PLACE: it holds the input)" if inplace else "sendbuf"
    if sb.array.size < total:
        raise ValueError(f"expecting {src} to hold at least sum(recvcounts) = {total} elements, got {sb.array.size}")
    out = output_view(env, rb, total, "recvbuf", "sum(recvcounts) with MPI.IN_PLACE") if inplace else \
        output_view(env, rb, mine, "recvbuf", f"recvcounts[{rank}]", exact=f"recvcounts[{rank}]")
    if not inplace:
        out = require_apart(env, sb.array, out, "pass MPI.IN_PLACE as sendbuf to reduce in place")
    dev = rb.device
    inp = sb.array[:total]
    if inplace:                 # stage the input: MPI leaves recvbuf past the result block as it was
        inp = staged(env, rb, out)
        out = out[:mine]
    if len(set(counts)) == 1:
        return Job(Call("reduce_scatter", n, mine), out.dtype, inp, out, ufunc, reduce_op_name(op), dev)
    return Job(Call("reduce_scatter_v", n, counts=counts), out.dtype, inp, out, ufunc, reduce_op_name(op), dev)


def allgatherv(env: Env, sendbuf: Any, recvbuf: Any) -> Job | str:
    """Allgatherv (HCCL's AllGatherV): recvbuf is ``[buf, counts, displs, datatype]`` or a shorter form."""
    n, rank = env.size, env.rank
    inplace = in_place(sendbuf)
    rv = as_vector(recvbuf, n, "recvbuf")
    sb = rv if inplace else as_array(sendbuf, name="sendbuf")
    if rv is None or sb is None:
        return unsupported_form(("recvbuf",), sendbuf=sendbuf, recvbuf=recvbuf)
    if why := mismatch(sb, rv):
        return why
    require_disjoint(rv, "recvbuf", "each rank's block its own memory")
    call = Call("all_gather_v", n, counts=rv.counts, displs=rv.displs)
    out = output_view(env, rv, call.output_count(rank), "recvbuf", "max(displs + counts)")
    lo, k = rv.displs[rank], rv.counts[rank]
    if inplace:                 # AllGatherV has no in-place form: stage this rank's block
        inp = staged(env, rv, out[lo:lo + k])
    else:
        inp = sb.array
        if inp.size != k:
            raise ValueError(f"expecting sendbuf to hold counts[{rank}] = {k} elements (recvbuf's count for "
                             f"this rank), got {inp.size}")
        out = require_apart(env, inp, out, "pass MPI.IN_PLACE as sendbuf to gather in place")
    return Job(call, out.dtype, inp, out, device=rv.device)


def alltoall(env: Env, sendbuf: Any, recvbuf: Any) -> Job | str:
    """Alltoall: both buffers hold size blocks; in place, recvbuf's blocks are sent and replaced."""
    n = env.size
    inplace = in_place(sendbuf)
    rb = as_array(recvbuf, n, "recvbuf")
    sb = rb if inplace else as_array(sendbuf, n, "sendbuf")
    if rb is None or sb is None:
        return unsupported_form(sendbuf=sendbuf, recvbuf=recvbuf)
    if why := mismatch(sb, rb):
        return why
    count = block_count(env, sb, n, "sendbuf")
    block = block_count(env, rb, n, "recvbuf")
    if block != count:
        out = refuse(env, ValueError(f"expecting recvbuf to hold {n} blocks of {count} elements (sendbuf's block), "
                                     f"got {n} blocks of {block}"), rb.array, n * count)
    else:
        out = output_view(env, rb, n * count, "recvbuf", "")
    inp = sb.array[:n * count]
    if inplace:                 # AllToAll has no in-place form: stage the blocks to send
        inp = staged(env, rb, out)
    else:
        out = require_apart(env, inp, out, "pass MPI.IN_PLACE as sendbuf to exchange in place")
    return Job(Call("alltoall", n, count), out.dtype, inp, out, device=rb.device)


def alltoallv(env: Env, sendbuf: Any, recvbuf: Any) -> Job | str:
    """Alltoallv: one small allgather of every rank's counts and displacements builds the matrix."""
    n, rank = env.size, env.rank
    inplace = in_place(sendbuf)
    rv = as_vector(recvbuf, n, "recvbuf")
    sv = rv if inplace else as_vector(sendbuf, n, "sendbuf")
    if rv is None or sv is None:
        return unsupported_form(("sendbuf", "recvbuf"), sendbuf=sendbuf, recvbuf=recvbuf)
    if why := mismatch(sv, rv):
        return why
    out = output_view(env, rv, rv.array.size, "recvbuf", "")
    if not inplace:
        out = require_apart(env, sv.array, out, "pass MPI.IN_PLACE as sendbuf to exchange in place")
    rows = env.allgather((sv.counts, sv.displs, rv.counts, rv.displs))
    matrix = tuple(row[0] for row in rows)
    for j, row in enumerate(rows):
        for i, got in enumerate(row[2]):
            if got != matrix[i][j]:
                raise ValueError(f"expecting rank {j}'s recvbuf counts[{i}] = {matrix[i][j]} (what rank {i} sends "
                                 f"it), got {got}")
    for j, row in enumerate(rows):          # every rank checks every rank's blocks: all raise alike
        require_disjoint(Buffer(out, counts=row[2], displs=row[3]), f"rank {j}'s recvbuf",
                         "each peer's block its own memory")
    if any(overlaps(row[1], row[0]) for row in rows):
        return "send blocks that overlap (MPI allows them; pyhccl's plans do not)"
    call = Call("alltoallv", n, matrix=matrix, sdispls=tuple(row[1] for row in rows),
                rdispls=tuple(row[3] for row in rows))
    inp = sv.array
    if inplace:                 # AllToAllV has no in-place form: stage the blocks to send
        inp = staged(env, rv, out[:call.input_count(rank)])
    return Job(call, out.dtype, inp, out, device=rv.device)


def barrier(env: Env) -> Job:
    """Barrier: the barrier op on a one-element uint8 token, reduced with bitwise OR."""
    return Job(Call("barrier", env.size), np.dtype(np.uint8), np.ones(1, np.uint8), np.zeros(1, np.uint8),
               np.bitwise_or)


#: The parser of each Communicator method.
PARSERS: dict[str, Callable[..., Job | str]] = {
    "Allreduce": allreduce, "Reduce": reduce, "Bcast": bcast, "Allgather": allgather, "Gather": gather,
    "Scatter": scatter, "Reduce_scatter_block": reduce_scatter_block, "Reduce_scatter": reduce_scatter,
    "Allgatherv": allgatherv, "Alltoall": alltoall, "Alltoallv": alltoallv, "Barrier": barrier,
}


