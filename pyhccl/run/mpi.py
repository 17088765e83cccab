"""MPI runtime: runs one rank's plan with Irecv/Isend and one wait per step.

With a timeout (``PYHCCL_TIMEOUT``) each step's wait polls against a deadline instead, and a
step that does not complete raises :class:`CollectiveTimeoutError` naming the step and what
it still waits for; without one the loop is a plain ``Waitall`` per step.

Every transfer is cut into messages of at most the UB transfer size; strided regions are
packed into (and unpacked from) staging space after the plan's scratch. Cutting is done on
the transfer's element stream, so sender and receiver agree on the messages whatever the
shape of their regions.

Device arrays run the same messages with ``CompiledPlan.run_device`` (see :mod:`pyhccl.gpu`):
device memory straight to a CUDA-aware MPI, else one pinned host piece per message.
"""

from __future__ import annotations

import pickle
import time
from typing import Any, Callable, Sequence

import numpy as np
from mpi4py import MPI

from ..core import settings
from ..plan.ir import Buf, Kind, Plan, Region

__all__ = ["UB_TRANSFER_BYTES", "ub_transfer_bytes", "timeout_seconds", "CollectiveTimeoutError", "CompiledPlan",
           "compile_plan", "wait_pending", "allgather_timed"]

UB_TRANSFER_BYTES = settings.UB_TRANSFER_BYTES
ub_transfer_bytes = settings.ub_transfer_bytes
timeout_seconds = settings.timeout_seconds

_TAG = 0x48CC


class CollectiveTimeoutError(TimeoutError):
    """A step of a collective did not complete within the timeout (``PYHCCL_TIMEOUT``).

    Raised on the rank that waits; the message names the algorithm, the step and the peers and
    regions still pending. The communicator's state is undefined afterwards (its peers may still
    be in the call): free it or end the job.

    Attributes:
        algorithm: the algorithm (or the library phase, such as the agreement) that waited.
        step: the step index in the plan, or None outside a plan.
        pending: one line per transfer still pending.
    """

    def __init__(self, message: str, algorithm: str = "", step: int | None = None,
                 pending: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.algorithm, self.step, self.pending = algorithm, step, tuple(pending)


#: Polling while a timed wait is pending: spin this long, then sleep, doubling up to the cap.
_SPIN_S, _SLEEP_CAP_S = 1e-4, 1e-3


def wait_pending(reqs: list[MPI.Request], timeout: float) -> list[int]:
    """``MPI.Request.Waitall`` with a deadline: the indices still pending after ``timeout`` s, [] when done."""
    if MPI.Request.Testall(reqs):
        return []
    start = time.monotonic()
    pause = 0.0
    while not MPI.Request.Testall(reqs):
        now = time.monotonic()
        if now - start >= timeout:
            pending = [k for k, r in enumerate(reqs) if not r.Get_status()]
            if pending or not MPI.Request.Testall(reqs):
                return pending or list(range(len(reqs)))
            return []
        if now - start > _SPIN_S:
            time.sleep(pause)
            pause = min(2 * pause or 1e-5, _SLEEP_CAP_S)
    return []


def allgather_timed(comm: MPI.Intracomm, obj: Any, timeout: float | None, what: str) -> list:
    """``comm.allgather(obj)``; with a timeout, non-blocking and raising CollectiveTimeoutError on expiry.

    ``what`` names the phase in the error (``"the algorithm agreement of AllReduce of 8 x float32"``).
    """
    if timeout is None:
        return comm.allgather(obj)
    data = pickle.dumps(obj)
    n = comm.Get_size()
    sizes = np.zeros(n, np.int64)
    _timed(comm.Iallgather(np.array([len(data)], np.int64), sizes), comm, timeout, what)
    displs = np.zeros(n, np.int64)
    np.cumsum(sizes[:-1], out=displs[1:])
    out = bytearray(int(sizes.sum()))
    _timed(comm.Iallgatherv(data, [out, sizes.tolist(), displs.tolist(), MPI.BYTE]), comm, timeout, what)
    return [pickle.loads(out[d:d + s]) for d, s in zip(displs.tolist(), sizes.tolist())]


def _timed(req: MPI.Request, comm: MPI.Intracomm, timeout: float, what: str) -> None:
    """Wait for one collective request; on expiry raise naming the phase (which ranks lag is not known)."""
    if wait_pending([req], timeout):
        raise CollectiveTimeoutError(
            f"rank {comm.Get_rank()} waited {timeout:g} s (PYHCCL_TIMEOUT) in {what}: a collective over all "
            f"{comm.Get_size()} ranks that some rank has not joined (stalled, or calling another collective)",
            algorithm=what)


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
        self.itemsize = itemsize
        self.origins: list[list] = []    # per step, the plan action of each message (for timeout reports)
        per_msg = max(1, ub_bytes // itemsize) * itemsize
        base = plan.scratch_count()
        stage_need = base
        self.steps: list[tuple[list, list, list, list]] = []
        for step in plan.steps:
            msgs, packs, unpacks, stage, origin = [], [], [], base, []
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
                origin += [a] * (len(msgs) - len(origin))
            stage_need = max(stage_need, stage)
            local = [(a.kind is Kind.REDUCE, _local_ref(a.dst), _local_ref(a.src)) for a in step.local if a.src.size]
            self.steps.append((msgs, packs, unpacks, local))
            self.origins.append(origin)
        self.scratch_count = stage_need
        self._staged_nbytes: int | None = None      # pinned bytes of the largest step (device runs only)

    def run(self, comm: MPI.Intracomm, bufs: tuple[np.ndarray, np.ndarray, np.ndarray], ufunc: Callable,
            timeout: float | None = None) -> None:
        """Execute on ``comm`` with ``(input, output, scratch)`` arrays of one dtype.

        Raises:
            CollectiveTimeoutError: with ``timeout`` (seconds), a step that did not complete in time.
        """
        if timeout is not None:
            return self._run_timed(comm, bufs, ufunc, timeout)
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
        return None

    def run_device(self, comm: MPI.Intracomm, bufs: tuple[Any, Any, Any], dev: Any, ufunc: Callable | None,
                   timeout: float | None = None) -> None:
        """``run`` for device arrays: ``bufs`` on one device, ``dev`` their :class:`pyhccl.gpu.DeviceBackend`.

        Local reduces and copies run on the device (``ufunc`` is the device's). With a CUDA-aware
        MPI (``dev.direct()``) each message is device memory; otherwise each message (at most the
        UB transfer size) is one piece of pinned host memory: device -> pinned before the step's
        sends, pinned -> device after its wait. Returns once the result is on the device.

        Raises:
            CollectiveTimeoutError: with ``timeout`` (seconds), a step that did not complete in time.
        """
        raw = [dev.bytes(b) for b in bufs]
        scratch = bufs[2]
        direct = dev.direct()
        if not direct:
            if self._staged_nbytes is None:
                self._staged_nbytes = max((sum(hi - lo for *_, lo, hi in s[0]) for s in self.steps), default=0)
            pinned = dev.pinned(self._staged_nbytes)
        for i, (msgs, packs, unpacks, local) in enumerate(self.steps):
            if msgs:
                for r, at in packs:
                    dev.copyto(scratch[at:at + r.size].reshape(r.repeat, r.count), _view_on(dev, bufs, r))
                if direct:
                    mem = [dev.mpi_buffer(raw[b][lo:hi]) for _, _, b, lo, hi in msgs]
                else:
                    mem, at = [], 0
                    for send, _, b, lo, hi in msgs:
                        mem.append(pinned[at:at + hi - lo])
                        at += hi - lo
                        if send:
                            dev.to_host(mem[-1], raw[b][lo:hi])
                    dev.staged_pieces += len(msgs)
                dev.synchronize()               # the data to send is complete; earlier copies out of pinned too
                reqs = [comm.Isend(m, peer, _TAG) if send else comm.Irecv(m, peer, _TAG)
                        for (send, peer, *_), m in zip(msgs, mem)]
                if timeout is None:
                    MPI.Request.Waitall(reqs)
                elif pending := wait_pending(reqs, timeout):
                    raise self._stalled(comm, i, reqs, pending, timeout)
                if not direct:
                    for (send, _, b, lo, hi), m in zip(msgs, mem):
                        if not send:
                            dev.from_host(raw[b][lo:hi], m)
                for r, at in unpacks:
                    dev.copyto(_view_on(dev, bufs, r), scratch[at:at + r.size].reshape(r.repeat, r.count))
            for is_reduce, dst, src in local:
                d = bufs[dst[0]][dst[1]:dst[2]] if type(dst) is tuple else _view_on(dev, bufs, dst)
                v = bufs[src[0]][src[1]:src[2]] if type(src) is tuple else _view_on(dev, bufs, src)
                if d.shape != v.shape:
                    d, v = (d.reshape(v.shape), v) if d.ndim == 1 else (d, v.reshape(d.shape))
                if is_reduce:
                    ufunc(d, v, out=d)
                else:
                    dev.copyto(d, v)
        dev.synchronize()

    def _run_timed(self, comm: MPI.Intracomm, bufs: tuple[np.ndarray, np.ndarray, np.ndarray], ufunc: Callable,
                   timeout: float) -> None:
        """``run`` with each step's wait polled against a deadline (only when a timeout is set)."""
        raw = [b.view(np.uint8) for b in bufs]
        scratch = bufs[2]
        for i, (msgs, packs, unpacks, local) in enumerate(self.steps):
            if msgs:
                for r, at in packs:
                    np.copyto(scratch[at:at + r.size].reshape(r.repeat, r.count), _view(bufs, r))
                reqs = [comm.Isend(raw[b][lo:hi], peer, _TAG) if send else comm.Irecv(raw[b][lo:hi], peer, _TAG)
                        for send, peer, b, lo, hi in msgs]
                pending = wait_pending(reqs, timeout)
                if pending:
                    raise self._stalled(comm, i, reqs, pending, timeout)
                for r, at in unpacks:
                    np.copyto(_view(bufs, r), scratch[at:at + r.size].reshape(r.repeat, r.count))
            for is_reduce, dst, src in local:
                d = bufs[dst[0]][dst[1]:dst[2]] if type(dst) is tuple else _view(bufs, dst)
                v = bufs[src[0]][src[1]:src[2]] if type(src) is tuple else _view(bufs, src)
                if d.shape != v.shape:
                    d, v = (d.reshape(v.shape), v) if d.ndim == 1 else (d, v.reshape(d.shape))
                if is_reduce:
                    ufunc(d, v, out=d)
                else:
                    np.copyto(d, v)

    def _stalled(self, comm: MPI.Intracomm, i: int, reqs: list[MPI.Request], pending: list[int],
                 timeout: float) -> CollectiveTimeoutError:
        """The error for step ``i``; pending receives are cancelled so no late message lands in the buffers."""
        msgs, origin = self.steps[i][0], self.origins[i]
        recvs = [reqs[k] for k in pending if not msgs[k][0]]
        for r in recvs:
            r.Cancel()
        MPI.Request.Waitall(recvs)      # completes locally once cancelled
        lines: dict[str, int] = {}
        for k in pending:
            a = origin[k]
            text = f"send to rank {a.peer} from {a.src}" if msgs[k][0] else f"recv from rank {a.peer} into {a.dst}"
            lines[text] = lines.get(text, 0) + 1
        parts = [t + (f" ({m} messages)" if m > 1 else "") for t, m in lines.items()]
        algo, op = self.plan.info("algo", "?"), self.plan.info("op", "?")
        nsteps = len(self.steps)
        return CollectiveTimeoutError(
            f"rank {comm.Get_rank()} waited {timeout:g} s (PYHCCL_TIMEOUT) in step {i} (of steps 0..{nsteps - 1}) of {op} "
            f"algorithm {algo} (count {self.plan.info('count', '?')}, {self.itemsize}-byte elements); still pending: "
            + "; ".join(parts), algorithm=algo, step=i, pending=parts)


def _local_ref(r: Region) -> tuple[int, int, int] | Region:
    """``(buffer index, lo, hi)`` for a simple region, the region itself for a strided one."""
    return (_BUF_INDEX[r.buf], r.offset, r.offset + r.count) if r.repeat == 1 else r


def compile_plan(plan: Plan, itemsize: int, ub_bytes: int | None = None) -> CompiledPlan:
    """Prepare ``plan`` for elements of ``itemsize`` bytes and messages of ``ub_bytes``."""
    return CompiledPlan(plan, itemsize, ub_transfer_bytes(ub_bytes))


def _view_on(dev: Any, bufs: tuple, r: Region) -> Any:
    """:func:`_view` of device arrays."""
    arr = bufs[_BUF_INDEX[r.buf]]
    if r.repeat == 1:
        return arr[r.offset:r.offset + r.count]
    return dev.as_strided(arr[r.offset:], (r.repeat, r.count), (r.stride * arr.itemsize, arr.itemsize))


def _view(bufs: tuple[np.ndarray, ...], r: Region) -> np.ndarray:
    """The elements of ``r``: 1-D for a simple region, (repeat, count) for a strided one."""
    arr = bufs[_BUF_INDEX[r.buf]]
    if r.repeat == 1:
        return arr[r.offset:r.offset + r.count]
    return np.lib.stride_tricks.as_strided(arr[r.offset:], shape=(r.repeat, r.count),
                                           strides=(r.stride * arr.itemsize, arr.itemsize), writeable=True)
