"""MPI runtime: runs one rank's plan with Irecv/Isend and one wait per step.

Every transfer is cut into messages of at most the UB transfer size; strided regions are
packed into (and unpacked from) staging space after the plan's scratch. Cutting is done on
the transfer's element stream, so sender and receiver agree on the messages whatever the
shape of their regions.
"""

from __future__ import annotations

import os
from typing import Callable

import numpy as np
from mpi4py import MPI

from ..plan.ir import Buf, Kind, Plan, Region

__all__ = ["UB_TRANSFER_BYTES", "ub_transfer_bytes", "CompiledPlan", "compile_plan"]

#: SMALL_COUNT_512KB (src/ops/op_common/selector/auto_selector_base.h), commented there as
#: the UB protocol's largest single transfer; pyhccl uses it as its message size.
UB_TRANSFER_BYTES = 512 * 1024

_TAG = 0x48CC


def ub_transfer_bytes(value: int | str | None = None) -> int:
    """The message size: ``value``, else ``PYHCCL_UB_TRANSFER_BYTES``, else 512 KiB.

    Raises:
        ValueError: a value that is not a positive integer number of bytes.
    """
    src = "ub_transfer_bytes"
    if value is None:
        value = os.environ.get("PYHCCL_UB_TRANSFER_BYTES")
        src = "PYHCCL_UB_TRANSFER_BYTES"
        if value is None or value == "":
            return UB_TRANSFER_BYTES
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = 0
    if n <= 0:
        raise ValueError(f"expecting {src} to be a positive number of bytes, got {value!r}")
    return n


_BUF_INDEX = {Buf.INPUT: 0, Buf.OUTPUT: 1, Buf.SCRATCH: 2}


class CompiledPlan:
    """A plan prepared for one element size: messages, byte ranges and staging precomputed.

    Per step it keeps ``(messages, packs, unpacks, local)``: each message is
    ``(is_send, peer, buffer index, byte lo, byte hi)``; strided regions are packed into (and
    unpacked from) staging space after the plan's scratch; local ops on simple regions are
    element ranges, strided ones keep their region.
    """

    def __init__(self, plan: Plan, itemsize: int, ub_bytes: int) -> None:
        self.plan = plan
        per_msg = max(1, ub_bytes // itemsize) * itemsize
        base = plan.scratch_count()
        stage_need = base
        self.steps: list[tuple[list, list, list, list]] = []
        for step in plan.steps:
            msgs, packs, unpacks, stage = [], [], [], base
            for a in step.transfers:
                is_send = a.kind is Kind.SEND
                r = a.src if is_send else a.dst
                if not r.size:
                    continue
                if r.repeat > 1:          # pack / unpack through staging
                    (packs if is_send else unpacks).append((r, stage))
                    b, lo = 2, stage * itemsize
                    stage += r.size
                else:
                    b, lo = _BUF_INDEX[r.buf], r.offset * itemsize
                hi = lo + r.size * itemsize
                msgs += [(is_send, a.peer, b, x, min(x + per_msg, hi)) for x in range(lo, hi, per_msg)]
            stage_need = max(stage_need, stage)
            local = [(a.kind is Kind.REDUCE, _local_ref(a.dst), _local_ref(a.src)) for a in step.local if a.src.size]
            self.steps.append((msgs, packs, unpacks, local))
        self.scratch_count = stage_need

    def run(self, comm: MPI.Intracomm, bufs: tuple[np.ndarray, np.ndarray, np.ndarray], ufunc: Callable) -> None:
        """Execute on ``comm`` with ``(input, output, scratch)`` arrays of one dtype."""
        raw = [b.view(np.uint8) for b in bufs]
        scratch = bufs[2]
        isend, irecv = comm.Isend, comm.Irecv
        for msgs, packs, unpacks, local in self.steps:
            if msgs:
                for r, at in packs:
                    np.copyto(scratch[at:at + r.size].reshape(r.repeat, r.count), _view(bufs, r))
                reqs = [isend(raw[b][lo:hi], peer, _TAG) if send else irecv(raw[b][lo:hi], peer, _TAG)
                        for send, peer, b, lo, hi in msgs]
                MPI.Request.Waitall(reqs)
                for r, at in unpacks:
                    np.copyto(_view(bufs, r), scratch[at:at + r.size].reshape(r.repeat, r.count))
            for is_reduce, dst, src in local:
                d = bufs[dst[0]][dst[1]:dst[2]] if type(dst) is tuple else _view(bufs, dst)
                v = bufs[src[0]][src[1]:src[2]] if type(src) is tuple else _view(bufs, src)
                if d.shape != v.shape:      # same elements, one side strided
                    if d.ndim == 1:
                        d = d.reshape(v.shape)
                    else:
                        v = v.reshape(d.shape)
                if is_reduce:
                    ufunc(d, v, out=d)
                else:
                    np.copyto(d, v)


def _local_ref(r: Region) -> tuple[int, int, int] | Region:
    """``(buffer index, lo, hi)`` for a simple region, the region itself for a strided one."""
    return (_BUF_INDEX[r.buf], r.offset, r.offset + r.count) if r.repeat == 1 else r


def compile_plan(plan: Plan, itemsize: int, ub_bytes: int | None = None) -> CompiledPlan:
    """Prepare ``plan`` for elements of ``itemsize`` bytes and messages of ``ub_bytes``."""
    return CompiledPlan(plan, itemsize, ub_transfer_bytes(ub_bytes))


def _view(bufs: tuple[np.ndarray, ...], r: Region) -> np.ndarray:
    """The elements of ``r``: 1-D for a simple region, (repeat, count) for a strided one."""
    arr = bufs[_BUF_INDEX[r.buf]]
    if r.repeat == 1:
        return arr[r.offset:r.offset + r.count]
    return np.lib.stride_tricks.as_strided(arr[r.offset:], shape=(r.repeat, r.count),
                                           strides=(r.stride * arr.itemsize, arr.itemsize), writeable=True)
