"""Linux cross-memory attach: one copy from a peer process's memory into ours (``process_vm_readv``).

The shared-memory engine uses it to read a peer rank's ordinary numpy arrays in place, the
single-copy path MPICH and Open MPI take for large messages on one host. Reading another
process's memory needs ptrace permission over it (same user; Yama's ``ptrace_scope`` may
refuse it even then): :func:`probe` tries a read between every pair of neighbouring ranks and
every rank agrees on the outcome, so a refused read makes every rank fall back together.

* :class:`Remote` — a contiguous piece of a peer's memory (pid, address, elements), sliceable
  like a 1-D array;
* :func:`reader` — a prepared read of one piece into a local contiguous array: ``read()``;
  :func:`writer` — a prepared write of a local array into a peer's piece (``process_vm_writev``);
* :func:`probe` — whether reads between the node's ranks work (collective).
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys

import numpy as np
from mpi4py import MPI

__all__ = ["Remote", "reader", "writer", "probe", "available"]


class _Iovec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


def _libc(name: str):
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = getattr(libc, name)
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_ssize_t
    fn.argtypes = [ctypes.c_int, ctypes.POINTER(_Iovec), ctypes.c_ulong, ctypes.POINTER(_Iovec), ctypes.c_ulong,
                   ctypes.c_ulong]
    return fn


_READV = _libc("process_vm_readv")
_WRITEV = _libc("process_vm_writev")


def available() -> bool:
    """Whether this platform has ``process_vm_readv`` and ``process_vm_writev`` (Linux with glibc or musl)."""
    return _READV is not None and _WRITEV is not None


class Remote:
    """``size`` elements of ``itemsize`` bytes at ``addr`` in process ``pid``: a peer's array (read with
    :func:`reader`)."""

    __slots__ = ("pid", "addr", "size", "itemsize")

    def __init__(self, pid: int, addr: int, size: int, itemsize: int) -> None:
        self.pid, self.addr, self.size, self.itemsize = pid, addr, size, itemsize

    def __getitem__(self, s: slice) -> Remote:
        start, stop, step = s.indices(self.size)
        if step != 1:
            raise ValueError(f"expecting a contiguous slice of a peer's memory, got step {step}")
        return Remote(self.pid, self.addr + start * self.itemsize, max(0, stop - start), self.itemsize)

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize


class _Read:
    """One prepared ``process_vm_readv`` of a :class:`Remote` into a local array (``process_vm_writev`` of the
    local array into the :class:`Remote` with ``write``)."""

    __slots__ = ("pid", "local", "remote", "nbytes", "dst", "fn", "what")

    def __init__(self, remote: Remote, arr: np.ndarray, write: bool = False) -> None:
        self.dst = arr                      # keeps the local memory alive while the transfer is prepared
        self.pid, self.nbytes = remote.pid, remote.nbytes
        self.local = _Iovec(arr.__array_interface__["data"][0], remote.nbytes)
        self.remote = _Iovec(remote.addr, remote.nbytes)
        self.fn, self.what = (_WRITEV, "process_vm_writev") if write else (_READV, "process_vm_readv")

    def __call__(self) -> None:
        got = self.fn(self.pid, ctypes.byref(self.local), 1, ctypes.byref(self.remote), 1, 0)
        if got != self.nbytes:
            self._rest(got)

    def _rest(self, got: int) -> None:
        """A short or failed read: read the rest, or raise naming the fallback."""
        done = 0
        while True:
            if got < 0:
                err = ctypes.get_errno()
                raise OSError(err, f"{self.what} of {self.nbytes} bytes with process {self.pid} failed: "
                                   f"{os.strerror(err)}; set PYHCCL_CMA=0 to copy through the shared window instead")
            done += got
            if done >= self.nbytes or got == 0 and done:
                if done < self.nbytes:
                    raise OSError(errno.EFAULT, f"{self.what} moved {done} of {self.nbytes} bytes with process "
                                                f"{self.pid}; set PYHCCL_CMA=0 to copy through the shared window")
                return
            loc = _Iovec(self.local.iov_base + done, self.nbytes - done)
            rem = _Iovec(self.remote.iov_base + done, self.nbytes - done)
            got = self.fn(self.pid, ctypes.byref(loc), 1, ctypes.byref(rem), 1, 0)


def reader(src: Remote, dst: np.ndarray) -> _Read:
    """A callable that copies ``src`` (a peer's memory) into ``dst`` (contiguous, ``src.nbytes`` bytes).

    Raises (when called):
        OSError: the kernel refused or cut short the read (the message names PYHCCL_CMA=0).
    """
    if dst.nbytes != src.nbytes or not dst.flags.c_contiguous:
        raise ValueError(f"expecting a contiguous destination of {src.nbytes} bytes for a read from a peer, "
                         f"got {dst.nbytes} bytes{'' if dst.flags.c_contiguous else ', not contiguous'}")
    return _Read(src, dst)


def writer(src: np.ndarray, dst: Remote) -> _Read:
    """A callable that copies ``src`` (contiguous, ``dst.nbytes`` bytes) into ``dst`` (a peer's memory).

    Raises (when called):
        OSError: the kernel refused or cut short the write (the message names PYHCCL_CMA=0).
    """
    if src.nbytes != dst.nbytes or not src.flags.c_contiguous:
        raise ValueError(f"expecting a contiguous source of {dst.nbytes} bytes for a write into a peer, "
                         f"got {src.nbytes} bytes{'' if src.flags.c_contiguous else ', not contiguous'}")
    return _Read(dst, src, write=True)


def probe(comm) -> bool:
    """Whether every rank of ``comm`` (one node) reads and writes its neighbour's memory with
    ``process_vm_readv`` / ``process_vm_writev`` (collective; every rank returns the same answer). Each
    rank reads a known pattern from rank+1 and writes its own into rank+1's inbox."""
    n, me = comm.Get_size(), comm.Get_rank()
    pattern = np.arange(16, dtype=np.int64) * 7919 + me
    inbox = np.zeros(16, np.int64)
    mine = (os.getpid(), pattern.__array_interface__["data"][0], inbox.__array_interface__["data"][0]) \
        if available() else (0, 0, 0)
    peers = comm.allgather(mine)
    ok = all(p[0] for p in peers)
    if ok and n > 1:
        pid, addr, box = peers[(me + 1) % n]
        got = np.zeros(16, np.int64)
        try:
            reader(Remote(pid, addr, 16, 8), got)()
            writer(pattern, Remote(pid, box, 16, 8))()
            ok = bool(np.array_equal(got, np.arange(16, dtype=np.int64) * 7919 + (me + 1) % n))
        except OSError:
            ok = False
    comm.Barrier()                          # every write done before the inboxes are looked at
    if ok and n > 1:
        ok = bool(np.array_equal(inbox, np.arange(16, dtype=np.int64) * 7919 + (me - 1) % n))
    ok = comm.allreduce(ok, op=MPI.LAND)
    del pattern, inbox
    return ok
