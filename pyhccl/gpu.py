"""Device buffers: GPU arrays recognised, and their plans run on the device they live on.

A device array (a ``cupy.ndarray``, any object with ``__cuda_array_interface__``, or a DLPack
object on a CUDA device) is parsed like a host buffer, but its job carries a
:class:`DeviceBackend`: the runner runs with :meth:`pyhccl.run.base.Runner.run_device`; the MPI
runtime's local reduces and copies then run on the device, and its messages go to MPI as device
memory when the MPI library is CUDA-aware (:func:`cuda_aware`), else through pinned host pieces
of at most the UB transfer size. The user's array is written in place; nothing is copied whole
to the host, except by a runner that reads host memory only (the shared-memory engine's), and for a
staged call whose buffers fit in one piece (one copy each way is then the least there is).
cupy is imported on the first device array only.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from functools import cache
from typing import Any, Callable, ContextManager

import numpy as np

from .core import settings
from .run.base import Runner

__all__ = ["DeviceBackend", "EmulatedArray", "EmulatedDevice", "backend_of", "cuda_aware", "register",
           "unregister"]

#: DLPack device types of CUDA memory (kDLCUDA, kDLCUDAManaged).
_DLPACK_CUDA = (2, 13)


def cuda_aware() -> bool:
    """Whether the MPI library takes GPU memory in its calls: ``PYHCCL_CUDA_AWARE``, else the library's answer.

    The library is asked through ``MPIX_Query_cuda_support`` (Open MPI, MPICH), else
    ``MV2_USE_CUDA=1`` (MVAPICH2) says yes; anything else is taken as not CUDA-aware.

    Raises:
        ValueError: ``PYHCCL_CUDA_AWARE`` set to something other than 0, 1 or empty.
    """
    value = settings.cuda_aware()
    return _library_cuda_support() if value is None else value


@cache
def _library_cuda_support() -> bool:
    """``MPIX_Query_cuda_support()`` of the libmpi this process loaded (mpi4py loads it privately)."""
    from mpi4py import MPI  # noqa: F401 - loads and initialises the library being asked
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split()[-1] for line in f if "/libmpi" in line})
    except OSError:
        paths = []
    for path in paths:
        try:
            query = getattr(ctypes.CDLL(path), "MPIX_Query_cuda_support", None)
        except OSError:
            continue
        if query is not None:
            query.restype = ctypes.c_int
            return bool(query())
    return os.environ.get("MV2_USE_CUDA") == "1"


class DeviceBackend:
    """What the device runner needs from an array library: allocation, copies, ufuncs, staging, MPI views.

    One instance per library. ``staged_pieces`` counts the copies between device and host of the
    staged path: one per message piece (each at most the UB transfer size), or, for a call whose
    buffers fit in one piece, its whole-buffer copies.
    """

    name = "device"
    staged_pieces = 0

    def owns(self, obj: Any) -> bool:
        """Whether ``obj`` is one of this backend's device arrays."""
        raise NotImplementedError

    def flat(self, obj: Any) -> Any | None:
        """A flat view of ``obj``'s memory with its own dtype, or None when it is not contiguous."""
        raise NotImplementedError

    def where(self, arr: Any) -> str:
        """Which device ``arr`` is on, for messages (``"on GPU 1"``)."""
        raise NotImplementedError

    def direct(self) -> bool:
        """Whether messages go to MPI as device memory (else staged through pinned host memory)."""
        return cuda_aware()

    def run(self, runner: Runner, comm: Any, job: Any, timeout: float | None = None) -> None:
        """Run ``runner`` on ``job``'s device arrays (``job.inp``, ``job.out``, ``job.dtype``, ``job.ufunc``),
        on their device; the result stays in ``job.out``."""
        like = job.out if job.out.size else job.inp
        with self.on(like):
            scratch = self.scratch(job.dtype, runner.scratch_count, like)
            runner.run_device(comm, (job.inp, job.out, scratch), self, job.ufunc, timeout)

    def run_on_host(self, runner: Runner, comm: Any, bufs: tuple, ufunc: Callable | None,
                    timeout: float | None = None) -> None:
        """Run a runner that reads host memory only on device ``bufs``: input and output copied to the host,
        :meth:`~pyhccl.run.base.Runner.run` there, the output copied back."""
        out = self.get(bufs[1], wait=False)
        inp = out if bufs[0] is bufs[1] else self.get(bufs[0], wait=False)
        self.synchronize()                                    # both copies in flight, one wait
        runner.run(comm, (inp, out, np.empty(runner.scratch_count, out.dtype)), ufunc, timeout)
        self.from_host(self.bytes(bufs[1]), out.view(np.uint8))
        self.synchronize()

    def get(self, arr: Any, wait: bool = True) -> np.ndarray:
        """A host copy of ``arr`` (complete on return, or after :meth:`synchronize` with ``wait=False``)."""
        host = np.empty(arr.size, arr.dtype)
        self.to_host(host.view(np.uint8), self.bytes(arr))
        if wait:
            self.synchronize()
        return host

    def scratch(self, dtype: np.dtype, count: int, like: Any) -> Any:
        """``count`` elements of device work space beside ``like``, reused across calls."""
        key = (self.where(like), np.dtype(dtype))
        cache_ = self.__dict__.setdefault("_scratch", {})
        arr = cache_.get(key)
        if arr is None or arr.size < count:
            arr = cache_[key] = self.empty(max(count, 1), dtype, like)
        return arr[:count]

    def pinned(self, nbytes: int) -> np.ndarray:
        """At least ``nbytes`` of pinned host memory (uint8), reused across calls and grown as needed."""
        buf = self.__dict__.get("_pinned")
        if buf is None or buf.size < nbytes:
            buf = self.__dict__["_pinned"] = self.alloc_pinned(max(nbytes, 1))
        return buf

    # -- the array library ---------------------------------------------------------------------
    def on(self, arr: Any) -> ContextManager:
        return contextlib.nullcontext()

    def empty(self, count: int, dtype: np.dtype, like: Any) -> Any:
        raise NotImplementedError

    def copyto(self, dst: Any, src: Any) -> None:
        raise NotImplementedError

    def ufunc(self, host_ufunc: Callable) -> Callable:
        """The device's ufunc of the numpy one (``np.add`` -> ``cupy.add``)."""
        raise NotImplementedError

    def may_share_memory(self, a: Any, b: Any) -> bool:
        raise NotImplementedError

    def as_strided(self, arr: Any, shape: tuple[int, int], strides: tuple[int, int]) -> Any:
        raise NotImplementedError

    def bytes(self, arr: Any) -> Any:
        return arr.view(np.uint8)

    def alloc_pinned(self, nbytes: int) -> np.ndarray:
        raise NotImplementedError

    def to_host(self, host: np.ndarray, dev: Any) -> None:
        """Start copying contiguous uint8 ``dev`` into ``host`` (complete after :meth:`synchronize`)."""
        raise NotImplementedError

    def from_host(self, dev: Any, host: np.ndarray) -> None:
        """Start copying uint8 ``host`` into contiguous ``dev`` (ordered before later device work)."""
        raise NotImplementedError

    def synchronize(self) -> None:
        """Wait for the work queued on the current stream."""
        raise NotImplementedError

    def mpi_buffer(self, dev: Any) -> Any:
        """What a CUDA-aware MPI receives for device memory ``dev``."""
        return dev


class _Cupy(DeviceBackend):
    """cupy: ``cupy.ndarray``, ``__cuda_array_interface__`` and CUDA DLPack objects."""

    name = "cupy"

    def __init__(self, cupy: Any) -> None:
        self.cp = cupy

    def owns(self, obj: Any) -> bool:
        return isinstance(obj, self.cp.ndarray) or _foreign_cuda(obj)

    def flat(self, obj: Any) -> Any | None:
        cp = self.cp
        if isinstance(obj, cp.ndarray):
            arr = obj
        elif hasattr(obj, "__cuda_array_interface__"):
            arr = cp.asarray(obj)
        else:
            arr = cp.from_dlpack(obj)
        if arr.flags.c_contiguous:
            return arr.reshape(-1)
        return arr.T.reshape(-1) if arr.flags.f_contiguous else None      # memory order, no copy

    def where(self, arr: Any) -> str:
        return f"on GPU {arr.device.id}"

    def on(self, arr: Any) -> ContextManager:
        return arr.device

    def empty(self, count: int, dtype: np.dtype, like: Any) -> Any:
        with like.device:
            return self.cp.empty(count, dtype)

    def copyto(self, dst: Any, src: Any) -> None:
        self.cp.copyto(dst, src)

    def ufunc(self, host_ufunc: Callable) -> Callable:
        return getattr(self.cp, host_ufunc.__name__)

    def may_share_memory(self, a: Any, b: Any) -> bool:
        return bool(self.cp.may_share_memory(a, b))

    def as_strided(self, arr: Any, shape: tuple[int, int], strides: tuple[int, int]) -> Any:
        return self.cp.lib.stride_tricks.as_strided(arr, shape, strides)

    def alloc_pinned(self, nbytes: int) -> np.ndarray:
        import cupyx
        return cupyx.empty_pinned(nbytes, np.uint8)

    def to_host(self, host: np.ndarray, dev: Any) -> None:
        if dev.size:
            dev.data.copy_to_host_async(host.ctypes.data_as(ctypes.c_void_p), dev.size)

    def from_host(self, dev: Any, host: np.ndarray) -> None:
        if dev.size:
            dev.data.copy_from_host_async(host.ctypes.data_as(ctypes.c_void_p), dev.size)

    def synchronize(self) -> None:
        self.cp.cuda.get_current_stream().synchronize()


class EmulatedArray:
    """A device array over host memory, for :class:`EmulatedDevice`: no buffer protocol, no ``__array__``.

    numpy and MPI cannot read it, so any host-side shortcut in the device path fails loudly.
    """

    __slots__ = ("a", "device_id")

    def __init__(self, a: np.ndarray, device_id: int = 0) -> None:
        self.a, self.device_id = a, device_id

    size = property(lambda self: self.a.size)
    dtype = property(lambda self: self.a.dtype)
    nbytes = property(lambda self: self.a.nbytes)
    itemsize = property(lambda self: self.a.itemsize)
    shape = property(lambda self: self.a.shape)
    ndim = property(lambda self: self.a.ndim)
    flags = property(lambda self: self.a.flags)

    def __getitem__(self, key: Any) -> EmulatedArray:
        return EmulatedArray(self.a[key], self.device_id)

    def reshape(self, *shape: Any, order: str = "C") -> EmulatedArray:
        return EmulatedArray(self.a.reshape(*shape, order=order), self.device_id)

    def view(self, dtype: Any) -> EmulatedArray:
        return EmulatedArray(self.a.view(dtype), self.device_id)

    def get(self) -> np.ndarray:
        """A host copy (cupy's name)."""
        return self.a.copy()


class EmulatedDevice(DeviceBackend):
    """A device backend over host memory: runs the device path (staging, direct, device ufuncs) without a GPU.

    Register it (:func:`register`) and pass :class:`EmulatedArray` buffers. ``direct`` plays the
    CUDA-aware MPI; the counters record what the runner did: ``pieces`` (bytes of each staged
    copy), ``kernels`` (device copies and ufunc calls), ``syncs``.
    """

    name = "emulated"

    def __init__(self, direct: bool = False) -> None:
        self._direct = direct
        self.pieces: list[int] = []
        self.kernels = self.syncs = 0

    def direct(self) -> bool:
        return self._direct

    def owns(self, obj: Any) -> bool:
        return isinstance(obj, EmulatedArray)

    def flat(self, obj: EmulatedArray) -> EmulatedArray | None:
        if not (obj.flags.c_contiguous or obj.flags.f_contiguous):
            return None
        return obj.reshape(-1, order="A")

    def where(self, arr: EmulatedArray) -> str:
        return f"on emulated device {arr.device_id}"

    def empty(self, count: int, dtype: np.dtype, like: EmulatedArray) -> EmulatedArray:
        return EmulatedArray(np.empty(count, dtype), like.device_id)

    def copyto(self, dst: EmulatedArray, src: EmulatedArray) -> None:
        self.kernels += 1
        np.copyto(dst.a, src.a)

    def ufunc(self, host_ufunc: Callable) -> Callable:
        def kernel(x: EmulatedArray, y: EmulatedArray, out: EmulatedArray) -> None:
            self.kernels += 1
            host_ufunc(x.a, y.a, out=out.a)
        return kernel

    def may_share_memory(self, a: EmulatedArray, b: EmulatedArray) -> bool:
        return bool(np.may_share_memory(a.a, b.a))

    def as_strided(self, arr: EmulatedArray, shape: tuple[int, int], strides: tuple[int, int]) -> EmulatedArray:
        return EmulatedArray(np.lib.stride_tricks.as_strided(arr.a, shape, strides, writeable=True), arr.device_id)

    def alloc_pinned(self, nbytes: int) -> np.ndarray:
        return np.empty(nbytes, np.uint8)

    def to_host(self, host: np.ndarray, dev: EmulatedArray) -> None:
        self.pieces.append(host.nbytes)
        np.copyto(host, dev.a)

    def from_host(self, dev: EmulatedArray, host: np.ndarray) -> None:
        self.pieces.append(host.nbytes)
        np.copyto(dev.a, host)

    def synchronize(self) -> None:
        self.syncs += 1

    def mpi_buffer(self, dev: EmulatedArray) -> np.ndarray:
        return dev.a


_REGISTERED: list[DeviceBackend] = []


def register(backend: DeviceBackend) -> None:
    """Recognise ``backend``'s arrays as device buffers (before cupy's)."""
    _REGISTERED.insert(0, backend)


def unregister(backend: DeviceBackend) -> None:
    """Undo :func:`register`."""
    _REGISTERED.remove(backend)


def backend_of(obj: Any) -> DeviceBackend | None:
    """The backend of a device array ``obj``; None for host memory, or for GPU memory without cupy."""
    for b in _REGISTERED:
        if b.owns(obj):
            return b
    if _foreign_cuda(obj):
        return _cupy_backend()
    return None


def _foreign_cuda(obj: Any) -> bool:
    """Whether ``obj`` exposes CUDA memory (``__cuda_array_interface__``, or DLPack on a CUDA device)."""
    if hasattr(obj, "__cuda_array_interface__"):
        return True
    where = getattr(obj, "__dlpack_device__", None)
    if where is None or not hasattr(obj, "__dlpack__"):
        return False
    try:
        return where()[0] in _DLPACK_CUDA
    except Exception:          # noqa: BLE001 - an object that cannot say where it lives is not ours
        return False


@cache
def _cupy_backend() -> DeviceBackend | None:
    try:
        import cupy
    except ImportError:
        return None
    return _Cupy(cupy)
