"""Buffers, dtypes and reduce ops: turn mpi4py buffer specs into flat numpy arrays.

pyhccl runs its own algorithms for contiguous buffers of the dtypes and ops below; for
anything else :func:`as_array` and :func:`reduce_ufunc` return None and the caller hands the
call to the wrapped MPI communicator, which supports it or raises its own error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from mpi4py import MPI

__all__ = ["SUPPORTED_DTYPES", "SUPPORTED_OPS", "Buffer", "as_array", "reduce_ufunc", "dtype_by_name"]

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


@dataclass(frozen=True, slots=True)
class Buffer:
    """A flat, contiguous, typed view of the user's memory, and how it reached us."""

    array: np.ndarray
    device: Any = None       # the cupy array when the memory is on a GPU


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


def as_array(spec: Any) -> Buffer | None:
    """A flat contiguous array over the memory ``spec`` describes, or None if pyhccl can't run it.

    Accepts what mpi4py accepts: a buffer-protocol object (numpy array, bytearray, array.array,
    memoryview), an object with ``__dlpack__`` or ``__cuda_array_interface__``, and the lists
    ``[buf, datatype]``, ``[buf, count, datatype]``, ``[buf, (count, displ), datatype]`` and
    ``[buf, count, displ, datatype]``. Returns None for derived or non-numeric datatypes,
    non-contiguous memory and dtypes outside :data:`SUPPORTED_DTYPES`.
    """
    if type(spec) is np.ndarray and spec.flags.c_contiguous and spec.dtype in _SUPPORTED:
        return Buffer(spec.reshape(-1))        # the common case, first
    count = displ = None
    datatype = None
    obj = spec
    if isinstance(spec, (list, tuple)):
        if len(spec) == 2:
            obj, datatype = spec
        elif len(spec) == 3:
            obj, count, datatype = spec
            if isinstance(count, tuple):
                if len(count) != 2:
                    return None
                count, displ = count
        elif len(spec) == 4:
            obj, count, displ, datatype = spec
        else:
            return None
        if not isinstance(datatype, MPI.Datatype):
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
    lo = displ or 0
    hi = lo + count if count is not None else arr.size
    if lo < 0 or hi > arr.size:
        raise ValueError(f"expecting count + displacement <= {arr.size} elements in the buffer, got {count} + {lo}")
    return Buffer(arr[lo:hi], device)


def _flat(obj: Any) -> tuple[np.ndarray, Any] | None:
    """A 1-D view of ``obj``'s memory with its own dtype, plus the GPU array if any."""
    if isinstance(obj, np.ndarray):
        arr = obj
    elif hasattr(obj, "__cuda_array_interface__"):
        return _from_gpu(obj)
    elif hasattr(obj, "__dlpack__") and not isinstance(obj, (bytes, bytearray, memoryview)):
        try:
            arr = np.from_dlpack(obj)
        except (BufferError, RuntimeError, TypeError):
            return _from_gpu(obj)
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


def _from_gpu(obj: Any) -> tuple[np.ndarray, Any] | None:
    """GPU memory: a host copy and the device array to copy results back into (cupy)."""
    try:
        import cupy
    except ImportError:
        return None
    dev = cupy.asarray(obj)
    if not (dev.flags.c_contiguous or dev.flags.f_contiguous):
        return None
    return cupy.asnumpy(dev).reshape(-1, order="A"), dev


def _mpi_dtype(datatype: MPI.Datatype) -> np.dtype | None:
    if datatype == MPI.DATATYPE_NULL or not datatype.is_predefined or datatype.py2f() in _NOT_NUMERIC:
        return None
    if _bfloat16 is not None and datatype == getattr(MPI, "BFLOAT16_T", None):
        return np.dtype(_bfloat16)
    try:
        dtype = np.dtype(datatype.typestr)
    except TypeError:
        return None
    return dtype if dtype in _SUPPORTED else None
