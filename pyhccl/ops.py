"""Arguments of the collectives: mpi4py buffer specs -> flat numpy arrays and a :class:`Call`.

pyhccl runs its own algorithms for contiguous buffers of the dtypes and ops below. For anything
else :func:`as_array` and :func:`reduce_ufunc` return None, the parsers return the reason as a
string, and the communicator hands the call to the wrapped MPI communicator, which supports it
or raises its own error. Wrong arguments raise here, once, before the call reaches a plan.
Device arrays (cupy, ``__cuda_array_interface__``, CUDA DLPack) stay device arrays: the job
carries their :class:`pyhccl.gpu.DeviceBackend`, and staging space is made on their device.
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral
from operator import index
from typing import Any, Callable, Sequence

import numpy as np
from mpi4py import MPI

from . import gpu
from .core.call import Call

__all__ = ["SUPPORTED_DTYPES", "SUPPORTED_OPS", "Buffer", "Env", "Job", "PARSERS", "as_array", "as_vector",
           "in_place", "reduce_ufunc", "reduce_op_name", "dtype_by_name"]

try:  # bfloat16 (HCCL's BF16) comes from ml_dtypes when it is installed
    from ml_dtypes import bfloat16 as _bfloat16
except ImportError:  # pragma: no cover - depends on the environment
    _bfloat16 = None

#: dtypes pyhccl reduces itself (HCCL's CheckDataType set plus the unsigned types).
SUPPORTED_DTYPES: dict[str, np.dtype] = {
    name: np.dtype(name) for name in
    ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
     "float16", "float32", "float64")
}
if _bfloat16 is not None:
    SUPPORTED_DTYPES["bfloat16"] = np.dtype(_bfloat16)

#: MPI reduce ops pyhccl runs itself, as numpy ufuncs (HCCL_REDUCE_SUM/PROD/MAX/MIN).
SUPPORTED_OPS: dict[str, Callable] = {"SUM": np.add, "PROD": np.multiply, "MAX": np.maximum, "MIN": np.minimum}

# mpi4py handles are not hashable: key them by their Fortran handle.
_UFUNC_BY_HANDLE = {getattr(MPI, name).py2f(): uf for name, uf in SUPPORTED_OPS.items()}
_NAME_BY_HANDLE = {getattr(MPI, name).py2f(): name.lower() for name in SUPPORTED_OPS}
_NOT_NUMERIC = {d.py2f() for d in (MPI.BYTE, MPI.PACKED, MPI.CHAR, MPI.C_BOOL, MPI.WCHAR)}
_SUPPORTED = set(SUPPORTED_DTYPES.values())
#: MPI's other predefined reduce ops, for naming them in fallback reasons.
_OTHER_OPS = ("LAND", "BAND", "LOR", "BOR", "LXOR", "BXOR", "MAXLOC", "MINLOC", "REPLACE", "NO_OP")


@dataclass(frozen=True, slots=True)
class Buffer:
    """A flat, contiguous, typed view of the user's memory, and how it reached us.

    ``counts`` / ``displs``: a vector buffer's per-rank blocks (``array`` is then all of it).
    ``device``: the :class:`pyhccl.gpu.DeviceBackend` when the memory is on a device; ``array``
    is then that device's flat view of it (no copy).
    """

    array: Any
    device: gpu.DeviceBackend | None = None
    counts: tuple[int, ...] | None = None
    displs: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class Env:
    """What the parsers need from the communicator: its size and rank, staging space, an allgather."""

    rank: int
    size: int
    stage: Callable[[np.dtype, int], np.ndarray]
    allgather: Callable[[Any], list]


@dataclass(frozen=True, slots=True)
class Job:
    """One call, ready to run: the :class:`Call`, this rank's input and output, how to reduce.

    ``reduce_op`` is HCCL's name of the op (for the selection); ``device`` is the
    :class:`pyhccl.gpu.DeviceBackend` of device buffers (``inp`` and ``out`` are then device
    arrays, run by ``device.run``), None for host memory.
    """

    call: Call
    dtype: np.dtype
    inp: Any
    out: Any
    ufunc: Callable | None = None
    reduce_op: str = "sum"
    device: gpu.DeviceBackend | None = None


def dtype_by_name(name: str) -> np.dtype:
    """The supported dtype called ``name`` (numpy name or nccl-tests alias).

    Raises:
        ValueError: unknown or unsupported name; the message lists the valid ones.
    """
    alias = {"float": "float32", "double": "float64", "half": "float16", "int": "int32",
             "char": "int8", "uint": "uint32", "bf16": "bfloat16"}
    key = alias.get(name.lower(), name.lower())
    if key not in SUPPORTED_DTYPES:
        raise ValueError(f"unknown or unsupported dtype {name!r}; valid: {', '.join(SUPPORTED_DTYPES)}")
    return SUPPORTED_DTYPES[key]


def reduce_op_name(op: MPI.Op) -> str:
    """``"sum"``, ``"prod"``, ``"max"`` or ``"min"`` for a supported op (HCCL's reduce op names)."""
    return _NAME_BY_HANDLE[op.py2f()]


def reduce_ufunc(op: MPI.Op) -> Callable | None:
    """The numpy ufunc for ``op``, or None when pyhccl leaves ``op`` to MPI."""
    if not isinstance(op, MPI.Op) or op == MPI.OP_NULL:
        return None
    return _UFUNC_BY_HANDLE.get(op.py2f())


def in_place(spec: Any) -> bool:
    """Whether ``spec`` is ``MPI.IN_PLACE`` (mpi4py also reads None so)."""
    return spec is None or spec is MPI.IN_PLACE


def as_array(spec: Any, blocks: int = 1, name: str = "the buffer") -> Buffer | None:
    """A flat contiguous array over the memory ``spec`` describes, or None if pyhccl can't run it.

    Accepts what mpi4py accepts: a buffer-protocol object (numpy array, bytearray, array.array,
    memoryview), an object with ``__dlpack__`` or ``__cuda_array_interface__``, and the lists
    ``[buf, datatype]``, ``[buf, count]``, ``[buf, count, datatype]``,
    ``[buf, (count, displ), datatype]`` and ``[buf, count, displ, datatype]``. Device memory
    gives a device array (with cupy, or a registered :class:`pyhccl.gpu.DeviceBackend`). A count is per
    block: a buffer of ``blocks`` blocks (the receive buffer of Allgather, ...) spans
    ``blocks * count`` elements. Returns None for derived or non-numeric datatypes,
    non-contiguous memory and dtypes outside :data:`SUPPORTED_DTYPES`.

    Raises:
        ValueError: count and displacement past the end of the memory.
    """
    if type(spec) is np.ndarray and spec.flags.c_contiguous and spec.dtype in _SUPPORTED:
        return Buffer(spec.reshape(-1))        # the common case, first
    parts = _unpack(spec, vector=False)
    if parts is None:
        return None
    obj, count, displ, datatype = parts
    if not (_is_int(count) or count is None) or not (_is_int(displ) or displ is None):
        return None
    typed = _typed(obj, datatype)
    if typed is None:
        return None
    arr, device = typed
    lo = index(displ or 0)
    if lo < 0 or (count is not None and count < 0):
        raise ValueError(f"expecting a non-negative count and displacement in {name}, got {count} and {lo}")
    hi = lo + index(count) * blocks if count is not None else arr.size
    if lo < 0 or hi < lo or hi > arr.size:
        what = f"{blocks} x {count}" if blocks > 1 else f"{count}"
        raise ValueError(f"expecting count + displacement <= {arr.size} elements in {name}, got {what} + {lo}")
    return Buffer(arr[lo:hi], device)


def as_vector(spec: Any, blocks: int, name: str = "the buffer") -> Buffer | None:
    """A vector buffer (Allgatherv, Alltoallv): the whole memory plus ``blocks`` counts and displacements.

    mpi4py's forms: ``buf``, ``[buf, counts]``, ``[buf, (counts, displs)]``, ``[buf, datatype]``,
    ``[buf, counts, datatype]``, ``[buf, (counts, displs), datatype]``,
    ``[buf, counts, displs, datatype]``; counts None splits the buffer evenly (the first blocks
    one longer), an int gives every block that count; displs None packs the blocks, an int
    strides them. Returns None where :func:`as_array` would.

    Raises:
        ValueError: counts or displacements of the wrong length or sign, or a block past the end.
    """
    parts = _unpack(spec, vector=True)
    if parts is None:
        return None
    obj, counts, displs, datatype = parts
    typed = _typed(obj, datatype)
    if typed is None:
        return None
    arr, device = typed
    size = arr.size
    if counts is None:
        counts = [size // blocks + (size % blocks > i) for i in range(blocks)]
    counts = _ints(counts, blocks, f"counts of {name}")
    if displs is None:
        displs = [sum(counts[:i]) for i in range(blocks)]
    displs = _ints([index(displs) * i for i in range(blocks)] if _is_int(displs) else displs, blocks,
                   f"displs of {name}")
    for j, (c, d) in enumerate(zip(counts, displs)):
        if c and d + c > size:
            raise ValueError(f"expecting {name} to hold counts[{j}] = {c} elements at displs[{j}] = {d}, "
                             f"got {size} elements")
    return Buffer(arr, device, counts, displs)


# -- the parsers: one per method, mpi4py's arguments after the Env ------------------------------

def allreduce(env: Env, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM) -> Job | str:
    """Allreduce: the count is sendbuf's (recvbuf's when in place); recvbuf holds at least that."""
    ufunc = reduce_ufunc(op)
    if ufunc is None:
        return _unsupported_op(op)
    inplace = in_place(sendbuf)
    rb = as_array(recvbuf, name="recvbuf")
    sb = rb if inplace else as_array(sendbuf, name="sendbuf")
    if rb is None or sb is None:
        return _form(sendbuf=sendbuf, recvbuf=recvbuf)
    if why := _mismatch(sb, rb):
        return why
    count = sb.array.size
    out = _out(rb, count, "recvbuf", "the send count")
    if not inplace:
        _apart(sb.array, out, "pass MPI.IN_PLACE as sendbuf to reduce in place")
    return Job(Call("allreduce", env.size, count, in_place=inplace), out.dtype, out if inplace else sb.array, out,
               ufunc, reduce_op_name(op), rb.device)


def reduce(env: Env, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM, root: int = 0) -> Job | str:
    """Reduce: recvbuf is read at the root only; MPI.IN_PLACE (sendbuf) at the root."""
    root = _root(root, env.size)
    ufunc = reduce_ufunc(op)
    if ufunc is None:
        return _unsupported_op(op)
    at_root = env.rank == root
    inplace = at_root and in_place(sendbuf)
    if not at_root:
        _given(sendbuf, "sendbuf", "on a non-root rank (MPI.IN_PLACE is the root's)")
    elif in_place(recvbuf):
        raise TypeError("expecting recvbuf as a buffer at the root, got None")
    rb = as_array(recvbuf, name="recvbuf") if at_root else None
    sb = rb if inplace else as_array(sendbuf, name="sendbuf")
    if sb is None or (at_root and rb is None):
        return _form(sendbuf=sendbuf, recvbuf=recvbuf)
    if rb is not None and (why := _mismatch(sb, rb)):
        return why
    count = sb.array.size
    if at_root:
        out = _out(rb, count, "recvbuf", "the send count")
        if not inplace:
            _apart(sb.array, out, "pass MPI.IN_PLACE as sendbuf at the root to reduce in place")
    else:
        out = _stage(env, sb, count)          # the templates' work space; never the user's
    return Job(Call("reduce", env.size, count, root, in_place=inplace), out.dtype, out if inplace else sb.array,
               out, ufunc, reduce_op_name(op), sb.device)


def bcast(env: Env, buf: Any, root: int = 0) -> Job | str:
    """Bcast: one buffer, read at the root, written elsewhere."""
    root = _root(root, env.size)
    b = as_array(buf, name="buf")
    if b is None:
        return _form(buf=buf)
    arr = b.array
    if env.rank != root:
        _out(b, arr.size, "buf", "")
    elif not _writeable(arr):                          # the templates may rewrite the root's data
        arr = _staged(env, b, arr)
    return Job(Call("broadcast", env.size, arr.size, root), arr.dtype, arr, arr, device=b.device)


def _gathered(sb: Buffer, rb: Buffer, n: int, inplace: bool, hint: str) -> tuple[int, np.ndarray]:
    """(per-rank count, output array) of a gathering op: recvbuf holds n blocks of the send count."""
    block = _blocks(rb, n, "recvbuf")
    count = block if inplace else sb.array.size
    if block != count:
        raise ValueError(f"expecting recvbuf to hold {n} blocks of {count} elements (the send count), got "
                         f"{n} blocks of {block}")
    out = _out(rb, n * count, "recvbuf", f"{n} blocks of the send count")
    if not inplace:
        _apart(sb.array, out, hint)
    return count, out


def allgather(env: Env, sendbuf: Any, recvbuf: Any) -> Job | str:
    """Allgather: recvbuf holds size blocks of the send count; in place, block ``rank`` is the input."""
    n = env.size
    inplace = in_place(sendbuf)
    rb = as_array(recvbuf, n, "recvbuf")
    sb = rb if inplace else as_array(sendbuf, name="sendbuf")
    if rb is None or sb is None:
        return _form(sendbuf=sendbuf, recvbuf=recvbuf)
    if why := _mismatch(sb, rb):
        return why
    count, out = _gathered(sb, rb, n, inplace, "pass MPI.IN_PLACE as sendbuf to gather in place")
    return Job(Call("all_gather", n, count, in_place=inplace), out.dtype, out if inplace else sb.array, out,
               device=rb.device)


def gather(env: Env, sendbuf: Any, recvbuf: Any, root: int = 0) -> Job | str:
    """Gather: recvbuf (size blocks) is read at the root only; MPI.IN_PLACE (sendbuf) at the root."""
    n = env.size
    root = _root(root, n)
    at_root = env.rank == root
    inplace = at_root and in_place(sendbuf)
    if not at_root:
        _given(sendbuf, "sendbuf", "on a non-root rank (MPI.IN_PLACE is the root's)")
    elif in_place(recvbuf):
        raise TypeError("expecting recvbuf as a buffer at the root, got None")
    rb = as_array(recvbuf, n, "recvbuf") if at_root else None
    sb = rb if inplace else as_array(sendbuf, name="sendbuf")
    if sb is None or (at_root and rb is None):
        return _form(sendbuf=sendbuf, recvbuf=recvbuf)
    if rb is not None and (why := _mismatch(sb, rb)):
        return why
    if not at_root:
        arr = sb.array
        return Job(Call("gather", n, arr.size, root), arr.dtype, arr, arr[:0], device=sb.device)
    count, out = _gathered(sb, rb, n, inplace, "pass MPI.IN_PLACE as sendbuf at the root to gather in place")
    return Job(Call("gather", n, count, root, in_place=inplace), out.dtype, out if inplace else sb.array, out,
               device=rb.device)


def scatter(env: Env, sendbuf: Any, recvbuf: Any, root: int = 0) -> Job | str:
    """Scatter: sendbuf (size blocks) is read at the root only; MPI.IN_PLACE (recvbuf) at the root."""
    n = env.size
    root = _root(root, n)
    at_root = env.rank == root
    inplace = at_root and in_place(recvbuf)
    if not at_root:
        _given(recvbuf, "recvbuf", "on a non-root rank (MPI.IN_PLACE is the root's)")
    elif in_place(sendbuf):
        raise TypeError("expecting sendbuf as a buffer at the root, got None")
    sb = as_array(sendbuf, n, "sendbuf") if at_root else None
    rb = None if inplace else as_array(recvbuf, name="recvbuf")
    if (at_root and sb is None) or (not inplace and rb is None):
        return _form(sendbuf=sendbuf, recvbuf=recvbuf)
    if sb is not None and rb is not None and (why := _mismatch(sb, rb)):
        return why
    if not at_root:
        out = _out(rb, rb.array.size, "recvbuf", "")
        return Job(Call("scatter", n, out.size, root), out.dtype, out[:0], out, device=rb.device)
    count = _blocks(sb, n, "sendbuf")
    if inplace:                 # the root's block stays where it is: receive it into staging
        out = _stage(env, sb, count)
    else:
        out = _out(rb, count, "recvbuf", "one block of sendbuf")
        _apart(sb.array, out, "pass MPI.IN_PLACE as recvbuf at the root to leave the root's block in place")
    return Job(Call("scatter", n, count, root), out.dtype, sb.array[:n * count], out, device=sb.device)


def reduce_scatter_block(env: Env, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM) -> Job | str:
    """Reduce_scatter_block: sendbuf holds size blocks; in place, recvbuf holds them and gets block ``rank``."""
    n = env.size
    ufunc = reduce_ufunc(op)
    if ufunc is None:
        return _unsupported_op(op)
    inplace = in_place(sendbuf)
    rb = as_array(recvbuf, n if inplace else 1, "recvbuf")
    sb = rb if inplace else as_array(sendbuf, n, "sendbuf")
    if rb is None or sb is None:
        return _form(sendbuf=sendbuf, recvbuf=recvbuf)
    if why := _mismatch(sb, rb):
        return why
    count = _blocks(sb, n, "recvbuf (MPI.IN_PLACE: it holds the input)" if inplace else "sendbuf")
    if inplace:
        out = _out(rb, n * count, "recvbuf", "")
        return Job(Call("reduce_scatter", n, count, in_place=True), out.dtype, out, out, ufunc,
                   reduce_op_name(op), rb.device)
    out = _out(rb, count, "recvbuf", "one block of sendbuf")
    _apart(sb.array, out, "pass MPI.IN_PLACE as sendbuf to reduce in place")
    return Job(Call("reduce_scatter", n, count), out.dtype, sb.array, out, ufunc, reduce_op_name(op), rb.device)


def reduce_scatter(env: Env, sendbuf: Any, recvbuf: Any, recvcounts: Sequence[int] | None = None,
                   op: MPI.Op = MPI.SUM) -> Job | str:
    """Reduce_scatter: equal counts run ReduceScatter, uneven ones ReduceScatterV.

    recvcounts None (not in place) gathers every rank's recvbuf size, as mpi4py does.
    """
    n, rank = env.size, env.rank
    ufunc = reduce_ufunc(op)
    if ufunc is None:
        return _unsupported_op(op)
    inplace = in_place(sendbuf)
    rb = as_array(recvbuf, name="recvbuf")
    sb = rb if inplace else as_array(sendbuf, name="sendbuf")
    if rb is None or sb is None:
        return _form(sendbuf=sendbuf, recvbuf=recvbuf)
    if why := _mismatch(sb, rb):
        return why
    if recvcounts is None:
        if inplace:
            raise ValueError("expecting recvcounts with MPI.IN_PLACE (recvbuf then holds the input), got None")
        counts = tuple(env.allgather(rb.array.size))
    else:
        counts = _ints(recvcounts, n, "recvcounts")
    total, mine = sum(counts), counts[rank]
    src = "recvbuf (MPI.IN_PLACE: it holds the input)" if inplace else "sendbuf"
    if sb.array.size < total:
        raise ValueError(f"expecting {src} to hold at least sum(recvcounts) = {total} elements, got {sb.array.size}")
    out = _out(rb, total, "recvbuf", "sum(recvcounts) with MPI.IN_PLACE") if inplace else \
        _out(rb, mine, "recvbuf", f"recvcounts[{rank}]")
    if not inplace:
        _apart(sb.array, out, "pass MPI.IN_PLACE as sendbuf to reduce in place")
    dev = rb.device
    if len(set(counts)) == 1:
        call = Call("reduce_scatter", n, mine, in_place=inplace)
        return Job(call, out.dtype, out if inplace else sb.array[:total], out, ufunc, reduce_op_name(op), dev)
    inp = sb.array[:total]
    if inplace:                 # ReduceScatterV has no in-place form: stage the input
        inp = _staged(env, rb, out)
        out = out[:mine]
    return Job(Call("reduce_scatter_v", n, counts=counts), out.dtype, inp, out, ufunc, reduce_op_name(op), dev)


def allgatherv(env: Env, sendbuf: Any, recvbuf: Any) -> Job | str:
    """Allgatherv (HCCL's AllGatherV): recvbuf is ``[buf, counts, displs, datatype]`` or a shorter form."""
    n, rank = env.size, env.rank
    inplace = in_place(sendbuf)
    rv = as_vector(recvbuf, n, "recvbuf")
    sb = rv if inplace else as_array(sendbuf, name="sendbuf")
    if rv is None or sb is None:
        return _form(("recvbuf",), sendbuf=sendbuf, recvbuf=recvbuf)
    if why := _mismatch(sb, rv):
        return why
    _disjoint(rv, "recvbuf", "each rank's block its own memory")
    call = Call("all_gather_v", n, counts=rv.counts, displs=rv.displs)
    out = _out(rv, call.output_count(rank), "recvbuf", "max(displs + counts)")
    lo, k = rv.displs[rank], rv.counts[rank]
    if inplace:                 # AllGatherV has no in-place form: stage this rank's block
        inp = _staged(env, rv, out[lo:lo + k])
    else:
        inp = sb.array
        if inp.size != k:
            raise ValueError(f"expecting sendbuf to hold counts[{rank}] = {k} elements (recvbuf's count for "
                             f"this rank), got {inp.size}")
        _apart(inp, out, "pass MPI.IN_PLACE as sendbuf to gather in place")
    return Job(call, out.dtype, inp, out, device=rv.device)


def alltoall(env: Env, sendbuf: Any, recvbuf: Any) -> Job | str:
    """Alltoall: both buffers hold size blocks; in place, recvbuf's blocks are sent and replaced."""
    n = env.size
    inplace = in_place(sendbuf)
    rb = as_array(recvbuf, n, "recvbuf")
    sb = rb if inplace else as_array(sendbuf, n, "sendbuf")
    if rb is None or sb is None:
        return _form(sendbuf=sendbuf, recvbuf=recvbuf)
    if why := _mismatch(sb, rb):
        return why
    count = _blocks(sb, n, "sendbuf")
    block = _blocks(rb, n, "recvbuf")
    if block != count:
        raise ValueError(f"expecting recvbuf to hold {n} blocks of {count} elements (sendbuf's block), got "
                         f"{n} blocks of {block}")
    out = _out(rb, n * count, "recvbuf", "")
    inp = sb.array
    if inplace:                 # AllToAll has no in-place form: stage the blocks to send
        inp = _staged(env, rb, out)
    else:
        _apart(inp, out, "pass MPI.IN_PLACE as sendbuf to exchange in place")
    return Job(Call("alltoall", n, count), out.dtype, inp, out, device=rb.device)


def alltoallv(env: Env, sendbuf: Any, recvbuf: Any) -> Job | str:
    """Alltoallv: one small allgather of every rank's counts and displacements builds the matrix."""
    n, rank = env.size, env.rank
    inplace = in_place(sendbuf)
    rv = as_vector(recvbuf, n, "recvbuf")
    sv = rv if inplace else as_vector(sendbuf, n, "sendbuf")
    if rv is None or sv is None:
        return _form(("sendbuf", "recvbuf"), sendbuf=sendbuf, recvbuf=recvbuf)
    if why := _mismatch(sv, rv):
        return why
    out = _out(rv, rv.array.size, "recvbuf", "")
    if not inplace:
        _apart(sv.array, out, "pass MPI.IN_PLACE as sendbuf to exchange in place")
    rows = env.allgather((sv.counts, sv.displs, rv.counts, rv.displs))
    matrix = tuple(row[0] for row in rows)
    for j, row in enumerate(rows):
        for i, got in enumerate(row[2]):
            if got != matrix[i][j]:
                raise ValueError(f"expecting rank {j}'s recvbuf counts[{i}] = {matrix[i][j]} (what rank {i} sends "
                                 f"it), got {got}")
    for j, row in enumerate(rows):          # every rank checks every rank's blocks: all raise alike
        _disjoint(Buffer(out, counts=row[2], displs=row[3]), f"rank {j}'s recvbuf", "each peer's block its own memory")
    if any(_overlap(row[1], row[0]) for row in rows):
        return "send blocks that overlap (MPI allows them; pyhccl's plans do not)"
    call = Call("alltoallv", n, matrix=matrix, sdispls=tuple(row[1] for row in rows),
                rdispls=tuple(row[3] for row in rows))
    inp = sv.array
    if inplace:                 # AllToAllV has no in-place form: stage the blocks to send
        inp = _staged(env, rv, out[:call.input_count(rank)])
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


# -- helpers ----------------------------------------------------------------------------------

def _unsupported_op(op: Any) -> str:
    """The fallback reason for a reduce op pyhccl does not run, naming it."""
    name = next((f"MPI.{n}" for n in _OTHER_OPS if isinstance(op, MPI.Op) and op == getattr(MPI, n, None)),
                "a user-defined op" if isinstance(op, MPI.Op) else f"{type(op).__name__}")
    return f"reduce op {name} is not one of {', '.join(SUPPORTED_OPS)}"


def _form(vectors: tuple[str, ...] = (), **specs: Any) -> str:
    """The fallback reason for buffers pyhccl does not run: the first argument it rejects, and why."""
    for name, spec in specs.items():
        if in_place(spec):
            continue
        why = _why_not(spec, name in vectors)
        if why:
            return f"{name} has {why}, which pyhccl does not run"
    return "a buffer form pyhccl does not run"


def _why_not(spec: Any, vector: bool) -> str:
    """Why :func:`as_array` (:func:`as_vector`) returns None for ``spec``; "" when it does not."""
    parts = _unpack(spec, vector)
    if parts is None:
        return f"a list form mpi4py does not take for a {'vector ' if vector else ''}buffer ({len(spec)} items)"
    obj, count, displ, datatype = parts
    if not vector and not all(x is None or _is_int(x) for x in (count, displ)):
        return f"a count or displacement that is not an int ({count!r}, {displ!r})"
    if datatype is not None and not _is_datatype(datatype):
        return f"a datatype that is not an MPI.Datatype ({type(datatype).__name__})"
    base = _flat(obj)
    if base is None:
        if gpu.backend_of(obj) is not None:
            return "device memory that is not contiguous"
        try:
            if not memoryview(obj).contiguous:
                return "memory that is not contiguous"
        except TypeError:
            pass
        if isinstance(obj, np.ndarray):
            return "memory that is not contiguous"
        return f"a {type(obj).__name__}, not a buffer (buffer protocol, __dlpack__, or __cuda_array_interface__ " \
               "with cupy installed)"
    arr = base[0]
    if datatype is not None:
        dtype, dname = _mpi_dtype(datatype), getattr(datatype, "name", datatype)
        if dtype is None:
            return f"the non-numeric or unsupported datatype {dname}" if dname else "a derived datatype"
        if arr.nbytes % dtype.itemsize:
            return f"{arr.nbytes} bytes, not a whole number of {dname}"
        return ""
    if arr.dtype not in _SUPPORTED:
        return f"dtype {arr.dtype}"
    return ""


def _root(root: Any, n: int) -> int:
    if isinstance(root, bool) or not isinstance(root, Integral):
        raise TypeError(f"expecting root as an int, got {type(root).__name__}")
    if not 0 <= root < n:
        raise ValueError(f"expecting root in range(comm.size) = range({n}), got {root}")
    return int(root)


def _given(spec: Any, name: str, where: str) -> None:
    if in_place(spec):
        raise TypeError(f"expecting {name} as a buffer {where}, got {spec!r}")


def _mismatch(a: Buffer, b: Buffer) -> str:
    """The fallback reason for differing dtypes ("" if none); sendbuf ``a`` and recvbuf ``b`` in different memory raise.

    Raises:
        ValueError: one buffer on the host and the other on a device, or on two devices.
    """
    if a.device is not b.device or (a.device is not None and a.device.where(a.array) != a.device.where(b.array)):
        raise ValueError(f"expecting sendbuf and recvbuf in the same memory, got sendbuf {_where(a)} and recvbuf "
                         f"{_where(b)}; copy one of them to the other's device (cupy.asarray / cupy.asnumpy)")
    da, db = a.array.dtype, b.array.dtype
    return "" if da == db else f"send dtype {da} differs from receive dtype {db}"


def _out(buf: Buffer, count: int, name: str, what: str) -> np.ndarray:
    """The first ``count`` elements of a buffer pyhccl writes: big enough and writable."""
    arr = buf.array
    if arr.size < count:
        raise ValueError(f"expecting {name} to hold at least {count} elements ({what}), got {arr.size}")
    if not _writeable(arr):
        raise ValueError(f"expecting a writable {name}, got a read-only buffer")
    return arr[:count]


def _apart(src: Any, dst: Any, fix: str) -> None:
    if src.size and dst.size and (np.may_share_memory(src, dst) if isinstance(src, np.ndarray)
                                  else gpu.backend_of(src).may_share_memory(src, dst)):
        raise ValueError(f"sendbuf and recvbuf overlap; {fix}")


def _blocks(buf: Buffer, n: int, name: str) -> int:
    size = buf.array.size
    if size % n:
        raise ValueError(f"expecting {name} to hold {n} equal blocks (one per rank), got {size} elements; "
                         "give the block's count as [buf, count, datatype]")
    return size // n


def _ints(values: Any, n: int, name: str) -> tuple[int, ...]:
    try:
        out = tuple(index(v) for v in values)
    except TypeError:
        raise TypeError(f"expecting {name} as a sequence of {n} ints, got {values!r}") from None
    if len(out) != n or any(v < 0 for v in out):
        raise ValueError(f"expecting {name}: {n} non-negative ints (one per rank), got {list(out)}")
    return out


def _disjoint(buf: Buffer, name: str, rule: str) -> None:
    """Receive blocks must not overlap (MPI: a receive buffer's elements are written once)."""
    spans = sorted((d, d + c, j) for j, (c, d) in enumerate(zip(buf.counts, buf.displs)) if c)
    for (lo0, hi0, a), (lo1, _, b) in zip(spans, spans[1:]):
        if lo1 < hi0:
            raise ValueError(f"expecting displs to place blocks without overlap in {name} ({rule}), got "
                             f"counts[{a}] = {hi0 - lo0} at displs[{a}] = {lo0} overlapping displs[{b}] = {lo1}")


def _overlap(displs: Sequence[int], counts: Sequence[int]) -> bool:
    spans = sorted((d, d + c) for d, c in zip(displs, counts) if c)
    return any(lo < hi for (_, hi), (lo, _) in zip(spans, spans[1:]))


def _where(buf: Buffer) -> str:
    return "on the host" if buf.device is None else buf.device.where(buf.array)


def _writeable(arr: Any) -> bool:
    """Whether pyhccl may write ``arr`` (device arrays have no read-only flag)."""
    return arr.flags.writeable if isinstance(arr, np.ndarray) else True


def _stage(env: Env, like: Buffer, count: int) -> Any:
    """Work space for ``count`` elements of ``like``'s dtype in ``like``'s memory (host staging or its device)."""
    dtype = like.array.dtype
    return env.stage(dtype, count) if like.device is None else like.device.empty(count, dtype, like.array)


def _staged(env: Env, like: Buffer, src: Any) -> Any:
    """A copy of ``src`` (an array in ``like``'s memory) in work space beside it."""
    dst = _stage(env, like, src.size)
    if like.device is None:
        np.copyto(dst, src)
    else:
        like.device.copyto(dst, src)
    return dst


def _is_int(x: Any) -> bool:
    return isinstance(x, Integral) and not isinstance(x, bool)


def _is_datatype(x: Any) -> bool:
    return isinstance(x, (MPI.Datatype, str))


def _unpack(spec: Any, vector: bool) -> tuple[Any, Any, Any, Any] | None:
    """``(buffer, count(s), displ(s), datatype)`` of an mpi4py message, or None for another form.

    mpi4py reads a list as (count, displ) in a simple message, only a tuple as (counts, displs)
    in a vector one.
    """
    if not isinstance(spec, (list, tuple)):
        return spec, None, None, None
    pair = tuple if vector else (tuple, list)
    if len(spec) == 2:
        obj, x = spec
        if _is_datatype(x):
            return obj, None, None, x
        if isinstance(x, pair):
            return (obj, *x, None) if len(x) == 2 else None
        return obj, x, None, None
    if len(spec) == 3:
        obj, x, datatype = spec
        if isinstance(x, pair):
            return (obj, *x, datatype) if len(x) == 2 else None
        return obj, x, None, datatype
    if len(spec) == 4:
        return spec[0], spec[1], spec[2], spec[3]
    return None


def _typed(obj: Any, datatype: Any) -> tuple[Any, gpu.DeviceBackend | None] | None:
    """``obj``'s memory as a flat array of ``datatype`` (or of its own type): (array, device backend or None)."""
    if datatype is not None and not _is_datatype(datatype):
        return None
    base = _flat(obj)
    if base is None:
        return None
    arr, device = base
    if datatype is not None:
        dtype = _mpi_dtype(datatype)
        if dtype is None or arr.nbytes % dtype.itemsize:
            return None
        arr = arr.view(np.uint8).view(dtype)
    if arr.dtype not in _SUPPORTED:
        return None
    return arr, device


def _flat(obj: Any) -> tuple[Any, gpu.DeviceBackend | None] | None:
    """A 1-D view of ``obj``'s memory with its own dtype, plus its device backend (None: host memory)."""
    if isinstance(obj, np.ndarray):
        arr = obj
    elif (device := gpu.backend_of(obj)) is not None:
        flat = device.flat(obj)
        return None if flat is None else (flat, device)
    elif hasattr(obj, "__dlpack__") and not isinstance(obj, (bytes, bytearray, memoryview)):
        try:
            arr = np.from_dlpack(obj)
        except (BufferError, RuntimeError, TypeError):
            return None                 # GPU memory without cupy, or a device numpy cannot read
    else:
        try:
            mv = memoryview(obj)
        except TypeError:
            return None
        if not mv.contiguous:
            return None
        try:
            arr = np.frombuffer(mv, dtype=np.dtype(mv.format) if mv.format else np.uint8)
        except (TypeError, ValueError):
            arr = np.frombuffer(mv.cast("B"), dtype=np.uint8)
    if not (arr.flags.c_contiguous or arr.flags.f_contiguous):
        return None
    return arr.reshape(-1, order="A"), None


def _mpi_dtype(datatype: MPI.Datatype | str) -> np.dtype | None:
    if isinstance(datatype, str):
        try:
            datatype = MPI.Datatype.fromcode(datatype)
        except (KeyError, ValueError):
            return None
    if datatype == MPI.DATATYPE_NULL or not datatype.is_predefined or datatype.py2f() in _NOT_NUMERIC:
        return None
    if _bfloat16 is not None and datatype == getattr(MPI, "BFLOAT16_T", None):
        return np.dtype(_bfloat16)
    try:
        dtype = np.dtype(datatype.typestr)
    except TypeError:
        return None
    return dtype if dtype in _SUPPORTED else None
