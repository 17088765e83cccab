"""A parsed call: :class:`Job` (the Call and this rank's arrays), the :class:`Env` parsers get, and the
rules the parsers' arguments obey (roots, counts, block layouts, output space, staging)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from numbers import Integral
from typing import Any, Callable, Sequence

import numpy as np

from .. import gpu
from ..core.call import Call
from .buffers import Buffer, in_place

__all__ = ["Env", "Job", "job_key", "shared_shape", "total", "describe", "root_index", "require_buffer",
           "mismatch", "output_view", "require_apart", "refuse", "block_count", "require_disjoint", "overlaps",
           "location", "writeable", "stage", "staged"]


@dataclass(frozen=True, slots=True)
class Env:
    """What the parsers need from the communicator: its size and rank, staging space, an allgather, and
    ``refused``: the rank-local refusals of the call being parsed (see :func:`refuse`; the dispatcher clears it);
    ``after``: what to do once the call ran (write packed output back, :func:`output_view`; cleared alike)."""

    rank: int
    size: int
    stage: Callable[[np.dtype, int], np.ndarray]
    allgather: Callable[[Any], list]
    refused: list = dataclasses.field(default_factory=list)
    after: list = dataclasses.field(default_factory=list)


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
    #: ``out`` is the templates' work space, not the user's (a non-root's Reduce): nothing is written back
    work_out: bool = False


def root_index(root: Any, n: int) -> int:
    if isinstance(root, bool) or not isinstance(root, Integral):
        raise TypeError(f"expecting root as an int, got {type(root).__name__}")
    if not 0 <= root < n:
        raise ValueError(f"expecting root in range(comm.size) = range({n}), got {root}")
    return int(root)


def require_buffer(spec: Any, name: str, where: str) -> None:
    if in_place(spec):
        raise TypeError(f"expecting {name} as a buffer {where}, got {spec!r}")


def mismatch(a: Buffer, b: Buffer) -> str:
    """The fallback reason for differing dtypes ("" if none); sendbuf ``a`` and recvbuf ``b`` in different memory raise.

    Raises:
        ValueError: one buffer on the host and the other on a device, or on two devices.
    """
    if a.device is not b.device or (a.device is not None and a.device.where(a.array) != a.device.where(b.array)):
        raise ValueError(f"expecting sendbuf and recvbuf in the same memory, got sendbuf {location(a)} and recvbuf "
                         f"{location(b)}; copy one of them to the other's device (cupy.asarray / cupy.asnumpy)")
    da, db = a.array.dtype, b.array.dtype
    return "" if da == db else f"send dtype {da} differs from receive dtype {db}"


def output_view(env: Env, buf: Buffer, count: int, name: str, what: str, *, exact: str = "") -> Any:
    """The first ``count`` elements of a buffer pyhccl writes: big enough and writable, else a refusal
    (:func:`refuse`). ``exact`` (the other count's name): also refuse more than ``count`` elements, with mpi4py's
    message (a reduction's send and receive buffers hold one count: mpi4py raises where they differ)."""
    arr = buf.array
    if exact and arr.size > count:
        return refuse(env, ValueError(f"mismatch in {exact} {count} and receive count {arr.size}: expecting {name} "
                                      f"to hold {what}, {count} elements"), arr, count)
    if arr.size < count:
        return refuse(env, ValueError(f"expecting {name} to hold at least {count} elements ({what}), got {arr.size}"),
                      arr, count)
    if not writeable(arr):
        return refuse(env, ValueError(f"expecting a writable {name}, got a read-only buffer"), arr, count)
    if buf.unpack is not None:      # a packed copy (derived datatype): written back once the call ran
        env.after.append(buf.unpack)
    return arr[:count]


def require_apart(env: Env, src: Any, dst: Any, fix: str) -> Any:
    """``dst``, or a refusal (:func:`refuse`) when it overlaps ``src``."""
    if src.size and dst.size and (np.may_share_memory(src, dst) if isinstance(src, np.ndarray)
                                  else gpu.backend_of(src).may_share_memory(src, dst)):
        return refuse(env, ValueError(f"sendbuf and recvbuf overlap; {fix}"), dst, dst.size)
    return dst


def refuse(env: Env, error: Exception, arr: Any, count: int) -> Any:
    """A rank-local refusal: this rank's receive buffer cannot take the result, though every rank agrees on the call.

    The error is kept in ``env.refused`` and the call goes on over fresh memory of ``count`` elements (the
    buffer's first elements copied in, for in-place calls): the dispatcher then makes every rank raise it
    (first call of a shape) or runs the plan so the others finish, and raises it here (docs/communicator.md, Errors).
    """
    env.refused.append(error)
    dev = None if isinstance(arr, np.ndarray) else gpu.backend_of(arr)
    k = min(count, arr.size)
    if dev is None:
        sub = np.empty(count, arr.dtype)
        sub[:k] = arr[:k]
    else:
        sub = dev.empty(count, arr.dtype, arr)
        dev.copyto(sub[:k], arr[:k])
    return sub


def block_count(env: Env, buf: Buffer, n: int, name: str) -> int:
    """The count of ``n`` equal blocks in ``buf``; where they are not equal, a rank-local refusal (:func:`refuse`:
    every rank raises it, where a raise here would leave the others waiting) and the whole blocks it holds."""
    size = buf.array.size
    if size % n:
        env.refused.append(ValueError(f"expecting {name} to hold {n} equal blocks (one per rank), got {size} "
                                      "elements; give the block's count as [buf, count, datatype]"))
    return size // n


def require_disjoint(buf: Buffer, name: str, rule: str) -> None:
    """Receive blocks must not overlap (MPI: a receive buffer's elements are written once)."""
    spans = sorted((d, d + c, j) for j, (c, d) in enumerate(zip(buf.counts, buf.displs)) if c)
    for (lo0, hi0, a), (lo1, _, b) in zip(spans, spans[1:]):
        if lo1 < hi0:
            raise ValueError(f"expecting displs to place blocks without overlap in {name} ({rule}), got "
                             f"counts[{a}] = {hi0 - lo0} at displs[{a}] = {lo0} overlapping displs[{b}] = {lo1}")


def overlaps(displs: Sequence[int], counts: Sequence[int]) -> bool:
    spans = sorted((d, d + c) for d, c in zip(displs, counts) if c)
    return any(lo < hi for (_, hi), (lo, _) in zip(spans, spans[1:]))


def location(buf: Buffer) -> str:
    return "on the host" if buf.device is None else buf.device.where(buf.array)


def writeable(arr: Any) -> bool:
    """Whether pyhccl may write ``arr`` (device arrays have no read-only flag)."""
    return arr.flags.writeable if isinstance(arr, np.ndarray) else True


def stage(env: Env, like: Buffer, count: int) -> Any:
    """Work space for ``count`` elements of ``like``'s dtype in ``like``'s memory (host staging or its device)."""
    dtype = like.array.dtype
    return env.stage(dtype, count) if like.device is None else like.device.empty(count, dtype, like.array)


def staged(env: Env, like: Buffer, src: Any) -> Any:
    """A copy of ``src`` (an array in ``like``'s memory) in work space beside it."""
    dst = stage(env, like, src.size)
    if like.device is None:
        np.copyto(dst, src)
    else:
        like.device.copyto(dst, src)
    return dst



# -- the part of a call every rank shares ----------------------------------------------------------

def shared_shape(call: Call) -> Call:
    """The part of ``call`` every rank shares: a root's IN_PLACE and Allgatherv's displs are its own."""
    if call.op in ("reduce", "gather") and call.in_place:
        return dataclasses.replace(call, in_place=False)
    if call.op == "all_gather_v":
        return dataclasses.replace(call, displs=None)
    return call


def job_key(job: Job) -> tuple:
    """The key the algorithm is agreed (and checked) under: the shared shape, the dtype, the reduce op."""
    return shared_shape(job.call), job.dtype.str, job.reduce_op


def total(call: Call) -> int:
    """Elements of the call: count, the sum of counts, or of the matrix."""
    if call.counts is not None:
        return sum(call.counts)
    if call.matrix is not None:
        return sum(map(sum, call.matrix))
    return call.count


def describe(call: Call, root: bool = True) -> str:
    """The call's size in words (count, counts or matrix; root; in place), for messages."""
    if call.counts is not None:
        text = f"counts {list(call.counts)}"
    elif call.matrix is not None:
        text = f"matrix {[list(r) for r in call.matrix]}"
    else:
        text = str(call.count)
    text = text if len(text) < 80 else text[:76] + " ..."
    where = f" root {call.root}" if call.spec.rooted and root else ""
    return text + where + (" in place" if call.in_place and call.op != "broadcast" else "")
