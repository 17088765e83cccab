"""What the MPI runtime's one step loop plugs in: where message memory is, how local ops run, how it waits.

A transport gives the loop (:meth:`pyhccl.run.mpi.CompiledPlan.run`) the buffers' byte views
(``raw``), views of a plan region (``view``), copies (``copyto``), the memory of one step's
messages (``stage``; None: each message is a slice of the buffers themselves), what follows
their wait (``land``), the end of the call (``finish``); None where nothing is to be done; and a
wait policy (``wait``: true when every request completed):

* :class:`HostTransport` — numpy arrays; each message is a slice of the user's array;
* :class:`DeviceTransport` — arrays of a :class:`pyhccl.gpu.DeviceBackend`: local ops as device
  kernels, each message device memory (a CUDA-aware MPI) or one pinned host piece per message;

and either policy: ``Waitall``, or polling against a deadline (:func:`pyhccl.run.timeout.wait_pending`),
after which the loop raises naming the step and the transfers still pending.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

import numpy as np
from mpi4py import MPI

from ..plan.ir import Buf, Region
from .timeout import wait_pending

__all__ = ["HostTransport", "DeviceTransport", "HOST", "TAG", "BUF_INDEX", "host_view"]

#: The MPI tag of every message of a plan.
TAG = 0x48CC
#: The position of each plan buffer in ``(input, output, scratch)``.
BUF_INDEX = {Buf.INPUT: 0, Buf.OUTPUT: 1, Buf.SCRATCH: 2}


def _policy(timeout: float | None) -> Callable[[list], bool]:
    """``Waitall``, or with a timeout a wait of ``timeout`` seconds; true when every request completed."""
    return MPI.Request.Waitall if timeout is None else partial(_done_by, timeout=timeout)


def _done_by(reqs: list, timeout: float) -> bool:
    return not wait_pending(reqs, timeout)


def _parts(t: Any) -> tuple:
    """What the loop takes from transport ``t``, in one tuple: one attribute load per call on the hot path."""
    return t.view, t.copyto, t.stage, t.wait, t.land, t.finish


def host_view(bufs: tuple[np.ndarray, ...], r: Region) -> np.ndarray:
    """The elements of ``r``: 1-D for a simple region, (repeat, count) for a strided one."""
    arr = bufs[BUF_INDEX[r.buf]]
    if r.repeat == 1:
        return arr[r.offset:r.offset + r.count]
    return np.lib.stride_tricks.as_strided(arr[r.offset:], shape=(r.repeat, r.count),
                                           strides=(r.stride * arr.itemsize, arr.itemsize), writeable=True)


class HostTransport:
    """numpy arrays: messages are slices of the user's arrays, local ops are numpy's."""

    __slots__ = ("timeout", "wait", "parts")
    stage = land = finish = None
    view = staticmethod(host_view)
    copyto = staticmethod(np.copyto)

    def __init__(self, timeout: float | None = None) -> None:
        self.timeout = timeout
        self.wait = _policy(timeout)
        self.parts = _parts(self)

    @staticmethod
    def raw(bufs: tuple[np.ndarray, ...]) -> list[np.ndarray]:
        return [b.view(np.uint8) for b in bufs]


#: The host transport without a timeout: the hot path's, shared.
HOST = HostTransport()


class DeviceTransport:
    """Arrays on one device of ``dev``: local ops as device kernels; messages direct or staged.

    With a CUDA-aware MPI (``dev.direct()``) each message is device memory; otherwise each
    message (at most the UB transfer size) is one piece of pinned host memory: device -> pinned
    before the step's sends, pinned -> device after its wait. ``staged_nbytes``: the bytes of
    the largest step's messages (the pinned space needed).
    """

    __slots__ = ("dev", "timeout", "wait", "copyto", "land", "pinned", "parts")

    def __init__(self, dev: Any, timeout: float | None, staged_nbytes: int) -> None:
        self.dev, self.timeout, self.wait = dev, timeout, _policy(timeout)
        self.copyto = dev.copyto
        direct = dev.direct()
        self.pinned = None if direct else dev.pinned(staged_nbytes)
        self.land = None if direct else self._unstage
        self.parts = _parts(self)

    def raw(self, bufs: tuple) -> list:
        return [self.dev.bytes(b) for b in bufs]

    def view(self, bufs: tuple, r: Region) -> Any:
        """:func:`host_view` of device arrays."""
        arr = bufs[BUF_INDEX[r.buf]]
        if r.repeat == 1:
            return arr[r.offset:r.offset + r.count]
        return self.dev.as_strided(arr[r.offset:], (r.repeat, r.count), (r.stride * arr.itemsize, arr.itemsize))

    def stage(self, raw: list, msgs: list[tuple]) -> list:
        """Each message's memory: device memory, or a pinned piece (the sends' copied there)."""
        dev = self.dev
        if self.pinned is None:
            mem = [dev.mpi_buffer(raw[b][lo:hi]) for _, _, b, lo, hi in msgs]
        else:
            mem, at = [], 0
            for send, _, b, lo, hi in msgs:
                mem.append(self.pinned[at:at + hi - lo])
                at += hi - lo
                if send:
                    dev.to_host(mem[-1], raw[b][lo:hi])
            dev.staged_pieces += len(msgs)
        dev.synchronize()               # the data to send is complete; earlier copies out of pinned too
        return mem

    def _unstage(self, raw: list, msgs: list[tuple], mem: list) -> None:
        """The received pinned pieces to their place on the device."""
        for (send, _, b, lo, hi), m in zip(msgs, mem):
            if not send:
                self.dev.from_host(raw[b][lo:hi], m)

    def finish(self) -> None:
        """Returns once the result is on the device."""
        self.dev.synchronize()
