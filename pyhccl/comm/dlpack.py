"""Host memory behind ``__dlpack__``, read the way mpi4py reads it (mpi4py 4.1 ``src/mpi4py/MPI.src/asdlpack.pxi``).

The capsule is read, never consumed: the array pyhccl makes keeps the capsule alive, and when the
array goes the producer's own capsule destructor calls the deleter, once. (``numpy.from_dlpack``
consumes the capsule and calls the deleter itself later, which a producer that frees its managed
tensor with the capsule, like mpi4py's own test producer, turns into a crash.) Writability is the
producer's: a versioned capsule's read-only flag, else writable, as mpi4py has it.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

__all__ = ["host_array"]

try:  # bfloat16 (HCCL's BF16) comes from ml_dtypes when it is installed
    from ml_dtypes import bfloat16 as _bfloat16
except ImportError:  # pragma: no cover - depends on the environment
    _bfloat16 = None

#: DLPack device types whose memory the CPU reads: CPU, CUDAHost, ROCMHost, CUDAManaged (mpi4py's list).
_CPU = 1
_HOST = frozenset({_CPU, 3, 11, 13})
_READ_ONLY = 1          # DLPACK_FLAG_BITMASK_READ_ONLY
_INT, _UINT, _FLOAT, _BFLOAT, _COMPLEX, _BOOL = 0, 1, 2, 4, 5, 6


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int32)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32), ("dtype", _DataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _Managed(ctypes.Structure):                   # DLManagedTensor (DLPack 0.x)
    _fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class _Versioned(ctypes.Structure):                 # DLManagedTensorVersioned (DLPack 1.x)
    _fields_ = [("version", _Version), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", _Tensor)]


_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_is_valid.restype, _is_valid.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]
_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype, _get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]


class _Holder:
    """The base of the array: holds the capsule (and so the producer's memory) as long as any view of it lives."""

    __slots__ = ("capsule", "__array_interface__")


def host_array(obj: Any) -> np.ndarray | None:
    """A flat array over ``obj``'s memory (no copy), or None where it is not host memory pyhccl can read.

    None for: no ``__dlpack_device__``, device memory, an invalid capsule, strides that are not C or
    Fortran contiguous. Element types numpy has no dtype for come back as raw bytes of a void dtype
    (pyhccl hands those to the wrapped MPI). A producer's own error (``BufferError``, ...) propagates.
    """
    try:
        device_type = int(obj.__dlpack_device__()[0])
    except (AttributeError, TypeError, ValueError, IndexError):
        return None
    if device_type not in _HOST:
        return None
    stream = {} if device_type == _CPU else {"stream": -1}
    try:                                            # DLPack 1.0: the versioned capsule carries the read-only flag
        capsule = obj.__dlpack__(max_version=(1, 0), copy=False, **stream)
    except TypeError:                               # a DLPack 0.x producer
        capsule = obj.__dlpack__(**stream)
    if _is_valid(capsule, b"dltensor_versioned"):
        managed = _Versioned.from_address(_get_pointer(capsule, b"dltensor_versioned"))
        if managed.version.major < 1:
            return None
        readonly = bool(managed.flags & _READ_ONLY)
    elif _is_valid(capsule, b"dltensor"):
        managed, readonly = _Managed.from_address(_get_pointer(capsule, b"dltensor")), False
    else:
        return None
    t = managed.dl_tensor
    shape = [t.shape[i] for i in range(t.ndim)] if t.ndim > 0 and t.shape else []
    if t.ndim < 0 or len(shape) != t.ndim or any(s < 0 for s in shape):
        return None
    dtype = _dtype(t.dtype.code, t.dtype.bits, t.dtype.lanes)
    if t.strides and not _contiguous(shape, [t.strides[i] for i in range(t.ndim)]):
        return None
    count = int(np.prod(shape, dtype=np.int64))
    if count == 0 or not t.data:
        return np.empty(0, dtype)
    holder = _Holder()
    holder.capsule = capsule
    holder.__array_interface__ = {"data": (t.data + t.byte_offset, readonly), "shape": (count * dtype.itemsize,),
                                  "typestr": "|u1", "version": 3}
    return np.asarray(holder).view(dtype)


def _contiguous(shape: list[int], strides: list[int]) -> bool:
    """C or Fortran contiguous in elements (mpi4py's dlpack_is_contig, either order)."""
    def dense(order: range) -> bool:
        size = 1
        for i in order:
            if shape[i] > 1 and strides[i] != size:
                return False
            size *= shape[i]
        return True
    n = len(shape)
    return dense(range(n - 1, -1, -1)) or dense(range(n))


def _dtype(code: int, bits: int, lanes: int) -> np.dtype:
    """The numpy dtype of a DLPack type (mpi4py's dlpack_get_format); raw bytes where numpy has none."""
    nbytes = (bits * lanes + 7) // 8
    if lanes == 2 and code == _FLOAT:
        code, bits = _COMPLEX, 2 * bits
    elif lanes != 1:
        return np.dtype(f"V{max(nbytes, 1)}")
    kinds = {_INT: "i", _UINT: "u", _FLOAT: "f", _COMPLEX: "c"}
    if code == _BOOL and bits == 8:
        return np.dtype(np.bool_)
    if code == _BFLOAT and bits == 16 and _bfloat16 is not None:
        return np.dtype(_bfloat16)
    if code in kinds and bits % 8 == 0:
        try:
            dtype = np.dtype(f"{kinds[code]}{bits // 8}")
        except TypeError:
            dtype = None
        if dtype is not None and dtype.itemsize * 8 == bits:
            return dtype
    return np.dtype(f"V{max(nbytes, 1)}")
