"""MPI runtime: runs one rank's plan with Irecv/Isend and one wait per step.

One step loop (:meth:`CompiledPlan.run`) runs every variant; what differs is its transport
(:mod:`pyhccl.run.transport`): numpy arrays or a device's, and the wait policy — a plain
``Waitall`` per step, or with a timeout each step's wait polled against a deadline, a step that
does not complete raising :class:`~pyhccl.run.timeout.CollectiveTimeoutError` naming the step
and what it still waits for.

Every transfer is cut into messages of at most the UB transfer size; strided regions are
packed into (and unpacked from) staging space after the plan's scratch. Cutting is done on
the transfer's element stream, so sender and receiver agree on the messages whatever the
shape of their regions.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from mpi4py import MPI

from ..core.settings import UB_TRANSFER_BYTES
from ..plan.ir import Kind, Plan, Region
from .timeout import CollectiveTimeoutError, pending_of
from .transport import BUF_INDEX, HOST, TAG, DeviceTransport, HostTransport

__all__ = ["CompiledPlan", "compile_plan", "apply_local"]


class CompiledPlan:
    """A plan prepared for one element size: messages, byte ranges and staging precomputed (a
    :class:`~pyhccl.run.base.Runner`).

    Per step it keeps ``(messages, packs, unpacks, local)``: each message is
    ``(is_send, peer, buffer index, byte lo, byte hi)``; strided regions are packed into (and
    unpacked from) staging space after the plan's scratch; local ops on simple regions are
    element ranges, strided ones keep their region.
    """

    def __init__(self, plan: Plan, itemsize: int, ub_bytes: int) -> None:
        self.plan = plan
        self.itemsize = itemsize
        self.origins: list[list] = []    # per step, the plan action of each message (for timeout reports)
        #: Bytes of one message at most (the UB transfer size, whole elements).
        self.per_msg = per_msg = max(1, ub_bytes // itemsize) * itemsize
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
                    b, lo = BUF_INDEX[r.buf], r.offset * itemsize
                hi = lo + r.size * itemsize
                msgs += [(is_send, a.peer, b, x, min(x + per_msg, hi)) for x in range(lo, hi, per_msg)]
                origin += [a] * (len(msgs) - len(origin))
            stage_need = max(stage_need, stage)
            local = [(a.kind is Kind.REDUCE, _local_ref(a.dst), _local_ref(a.src)) for a in step.local if a.src.size]
            self.steps.append((msgs, packs, unpacks, local))
            self.origins.append(origin)
        self.scratch_count = stage_need
        #: Bytes of the largest step's messages: the pinned host memory a staged device run needs.
        self.step_nbytes = max((sum(hi - lo for *_, lo, hi in s[0]) for s in self.steps), default=0)

    def run(self, comm: MPI.Intracomm, bufs: tuple[np.ndarray, np.ndarray, np.ndarray], ufunc: Callable | None,
            timeout: float | None = None) -> None:
        """Execute on ``comm`` with ``(input, output, scratch)`` numpy arrays of one dtype.

        Raises:
            CollectiveTimeoutError: with ``timeout`` (seconds), a step that did not complete in time.
        """
        self._loop(comm, bufs, ufunc, HOST if timeout is None else HostTransport(timeout))

    def run_device(self, comm: MPI.Intracomm, bufs: tuple[Any, Any, Any], dev: Any, ufunc: Callable | None,
                   timeout: float | None = None) -> None:
        """``run`` for arrays on one device of ``dev`` (a :class:`pyhccl.gpu.DeviceBackend`).

        Local reduces and copies run on the device with the device's ufunc; messages go as
        device memory or through pinned host pieces (:class:`~pyhccl.run.transport.DeviceTransport`).
        A staged call whose buffers fit in one piece runs on host copies instead (one copy each way).
        Returns once the result is on the device.

        Raises:
            CollectiveTimeoutError: with ``timeout`` (seconds), a step that did not complete in time.
        """
        if self.step_nbytes and not dev.direct() and max(bufs[0].nbytes, bufs[1].nbytes) <= self.per_msg:
            # The whole call fits in one staged piece: copying it to the host once and running there moves the
            # same bytes with one copy each way, and saves the per-step copies, syncs and device kernels.
            dev.run_on_host(self, comm, bufs, ufunc, timeout)
            dev.staged_pieces += 2 if bufs[0] is bufs[1] else 3          # its copies: in, (out,) back
            return
        self._loop(comm, bufs, None if ufunc is None else dev.ufunc(ufunc),
                   DeviceTransport(dev, timeout, self.step_nbytes))

    def _loop(self, comm: MPI.Intracomm, bufs: tuple, ufunc: Callable | None, t: Any) -> None:
        """The step loop: pack, post, wait, unpack, then the step's local ops, each through transport ``t``."""
        raw = t.raw(bufs) if self.step_nbytes else None
        scratch = bufs[2]
        isend, irecv = comm.Isend, comm.Irecv
        view, copyto, stage, wait, land, finish = t.parts
        for msgs, packs, unpacks, local in self.steps:
            if msgs:
                for r, at in packs:
                    copyto(scratch[at:at + r.size].reshape(r.repeat, r.count), view(bufs, r))
                if stage is None:       # each message a slice of the buffers
                    reqs = [isend(raw[b][lo:hi], peer, TAG) if send else irecv(raw[b][lo:hi], peer, TAG)
                            for send, peer, b, lo, hi in msgs]
                else:
                    mem = stage(raw, msgs)
                    reqs = [isend(m, peer, TAG) if send else irecv(m, peer, TAG)
                            for (send, peer, *_), m in zip(msgs, mem)]
                if not wait(reqs):
                    raise self.stalled(comm, msgs, reqs, t.timeout)
                if land is not None:
                    land(raw, msgs, mem)
                for r, at in unpacks:
                    copyto(view(bufs, r), scratch[at:at + r.size].reshape(r.repeat, r.count))
            if local:
                apply_local(bufs, local, ufunc, view, copyto)
        if finish is not None:
            finish()

    def stalled(self, comm: MPI.Intracomm, msgs: list[tuple], reqs: list[MPI.Request],
                 timeout: float) -> CollectiveTimeoutError:
        """The error for the step of ``msgs``; pending receives are cancelled so no late message lands in the buffers."""
        i = next(k for k, s in enumerate(self.steps) if s[0] is msgs)
        origin = self.origins[i]
        pending = pending_of(reqs)
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


def apply_local(bufs: tuple, local: list, ufunc: Callable | None, view: Callable, copyto: Callable) -> None:
    """A step's local ops (``(is_reduce, dst, src)``, see :class:`CompiledPlan`) on ``bufs``."""
    for is_reduce, dst, src in local:
        d = bufs[dst[0]][dst[1]:dst[2]] if type(dst) is tuple else view(bufs, dst)
        v = bufs[src[0]][src[1]:src[2]] if type(src) is tuple else view(bufs, src)
        if d.shape != v.shape:      # same elements, one side strided
            if d.ndim == 1:
                d = d.reshape(v.shape)
            else:
                v = v.reshape(d.shape)
        if is_reduce:
            ufunc(d, v, out=d)
        else:
            copyto(d, v)


def _local_ref(r: Region) -> tuple[int, int, int] | Region:
    """``(buffer index, lo, hi)`` for a simple region, the region itself for a strided one."""
    return (BUF_INDEX[r.buf], r.offset, r.offset + r.count) if r.repeat == 1 else r


def compile_plan(plan: Plan, itemsize: int, ub_bytes: int = UB_TRANSFER_BYTES) -> CompiledPlan:
    """Prepare ``plan`` for elements of ``itemsize`` bytes and messages of at most ``ub_bytes``
    (the Communicator passes its ``ub_transfer_bytes``, :func:`pyhccl.core.settings.ub_transfer_bytes`)."""
    return CompiledPlan(plan, itemsize, ub_bytes)
