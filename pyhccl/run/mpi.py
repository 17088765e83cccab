"""MPI runtime: runs one rank's plan with Irecv/Isend and one wait per step.

Every transfer is cut into messages of at most the UB transfer size; strided regions are
packed into (and unpacked from) staging space after the plan's scratch. Cutting is done on
the transfer's element stream, so sender and receiver agree on the messages whatever the
shape of their regions.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
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


@dataclass(frozen=True, slots=True)
class _Xfer:
    send: bool
    peer: int
    region: Region
    stage: int | None       # scratch offset of the packing area for strided regions
    chunks: tuple[tuple[int, int], ...]   # (start, stop) in the element stream


@dataclass(frozen=True, slots=True)
class _Local:
    reduce: bool
    dst: Region
    src: Region


class CompiledPlan:
    """A plan prepared for one element size: message cuts and staging offsets precomputed."""

    def __init__(self, plan: Plan, itemsize: int, ub_bytes: int) -> None:
        self.plan = plan
        per_msg = max(1, ub_bytes // itemsize)
        base = plan.scratch_count()
        stage_need = 0
        self.steps: list[tuple[tuple[_Xfer, ...], tuple[_Local, ...]]] = []
        for step in plan.steps:
            xfers, stage = [], base
            for a in step.transfers:
                is_send = a.kind is Kind.SEND
                r = a.src if is_send else a.dst
                if not r.size:
                    continue
                st = None
                if r.repeat > 1:
                    st, stage = stage, stage + r.size
                cuts = tuple((i, min(i + per_msg, r.size)) for i in range(0, r.size, per_msg))
                xfers.append(_Xfer(is_send, a.peer, r, st, cuts))
            stage_need = max(stage_need, stage)
            local = tuple(_Local(a.kind is Kind.REDUCE, a.dst, a.src) for a in step.local if a.src.size)
            self.steps.append((tuple(xfers), local))
        self.scratch_count = max(base, stage_need)

    def run(self, comm: MPI.Intracomm, bufs: dict[Buf, np.ndarray], ufunc: Callable) -> None:
        """Execute on ``comm`` with ``bufs`` (input, output, scratch arrays of one dtype)."""
        for xfers, local in self.steps:
            if xfers:
                reqs = []
                unpack = []
                for x in xfers:
                    flat = _stream(bufs, x)
                    if x.send and x.stage is not None:
                        np.copyto(flat.reshape(x.region.repeat, x.region.count), _view(bufs, x.region))
                    elif x.stage is not None:
                        unpack.append((x.region, flat))
                    raw = flat.view(np.uint8)
                    k = flat.itemsize
                    for lo, hi in x.chunks:
                        msg = [raw[lo * k:hi * k], MPI.BYTE]
                        reqs.append(comm.Isend(msg, x.peer, _TAG) if x.send else comm.Irecv(msg, x.peer, _TAG))
                MPI.Request.Waitall(reqs)
                for region, flat in unpack:
                    np.copyto(_view(bufs, region), flat.reshape(region.repeat, region.count))
            for op in local:
                dst = _view(bufs, op.dst)
                src = _view(bufs, op.src)
                if op.reduce:
                    ufunc(dst, src, out=dst)
                else:
                    np.copyto(dst, src)


def compile_plan(plan: Plan, itemsize: int, ub_bytes: int | None = None) -> CompiledPlan:
    """Prepare ``plan`` for elements of ``itemsize`` bytes and messages of ``ub_bytes``."""
    return CompiledPlan(plan, itemsize, ub_transfer_bytes(ub_bytes))


def _view(bufs: dict[Buf, np.ndarray], r: Region) -> np.ndarray:
    """The elements of ``r``: 1-D for a simple region, (repeat, count) for a strided one."""
    arr = bufs[r.buf]
    if r.repeat == 1:
        return arr[r.offset:r.offset + r.count]
    return np.lib.stride_tricks.as_strided(arr[r.offset:], shape=(r.repeat, r.count),
                                           strides=(r.stride * arr.itemsize, arr.itemsize), writeable=True)


def _stream(bufs: dict[Buf, np.ndarray], x: _Xfer) -> np.ndarray:
    if x.stage is None:
        return _view(bufs, x.region)
    return bufs[Buf.SCRATCH][x.stage:x.stage + x.region.size]
