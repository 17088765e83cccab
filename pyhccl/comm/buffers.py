"""Reading buffers: mpi4py buffer specs, DLPack, device arrays -> flat typed arrays (:class:`Buffer`).

pyhccl runs its own algorithms for contiguous buffers of the dtypes and ops below. For anything
else :func:`as_array` and :func:`reduce_ufunc` return None, and :func:`unsupported_form` says why;
the communicator then hands the call to the wrapped MPI communicator, which supports it or raises
its own error. Device arrays (cupy, ``__cuda_array_interface__``, CUDA DLPack) stay device arrays:
the buffer carries their :class:`pyhccl.gpu.DeviceBackend`.
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral
from operator import index
from typing import Any, Callable

import numpy as np
from mpi4py import MPI
from mpi4py.util.dtlib import to_numpy_dtype

from .. import gpu
from .dlpack import host_array

__all__ = ["SUPPORTED_DTYPES", "SUPPORTED_OPS", "Buffer", "as_array", "as_vector", "in_place", "reduce_ufunc",
           "reduce_op_name", "dtype_by_name", "unsupported_op", "unsupported_form",
           "count_list"]

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
#: MPI's other predefined reduce ops, for naming them in fallback reasons.
_OTHER_OPS = ("LAND", "BAND", "LOR", "BOR", "LXOR", "BXOR", "MAXLOC", "MINLOC", "REPLACE", "NO_OP")


@dataclass(frozen=True, slots=True)
class Buffer:
    """A flat, contiguous, typed view of the user's memory, and how it reached us.

    ``counts`` / ``displs``: a vector buffer's per-rank blocks (``array`` is then all of it).
    ``unpack``: for memory described by a derived datatype, ``array`` is a packed copy of its elements and
    ``unpack()`` writes the copy back (:func:`as_array`).
    ``device``: the :class:`pyhccl.gpu.DeviceBackend` when the memory is on a device; ``array``
    is then that device's flat view of it (no copy).
    """

    array: Any
    device: gpu.DeviceBackend | None = None
    counts: tuple[int, ...] | None = None
    displs: tuple[int, ...] | None = None
    unpack: Callable[[], None] | None = None


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


def in_place(spec: Any) -> bool:
    """Whether ``spec`` is ``MPI.IN_PLACE`` (mpi4py also reads None so)."""
    return spec is None or spec is MPI.IN_PLACE


def as_array(spec: Any, blocks: int = 1, name: str = "the buffer") -> Buffer | None:
    """A flat contiguous array over the memory ``spec`` describes, or None if pyhccl can't run it.

    Accepts what mpi4py accepts: a buffer-protocol object (numpy array, bytearray, array.array,
    memoryview), an object with ``__dlpack__`` or ``__cuda_array_interface__``, and the lists
    ``[buf, datatype]``, ``[buf, count]``, ``[buf, count, datatype]``,
    ``[buf, (count, displ), datatype]`` and ``[buf, count, displ, datatype]``. Device memory
    gives a device array (with cupy, or a registered :class:`pyhccl.gpu.DeviceBackend`). A count is per
    block: a buffer of ``blocks`` blocks (the receive buffer of Allgather, ...) spans
    ``blocks * count`` elements. A derived datatype whose elements are all of one supported type gives a
    packed copy of those elements (copied by MPI itself, so the type map is MPI's; :attr:`Buffer.unpack`
    writes it back): a rank whose buffer is described so runs the same plan as its peers, whose
    buffers may be plain (MPI matches type signatures, not datatypes). Returns None for other derived or
    non-numeric datatypes, non-contiguous memory and dtypes outside :data:`SUPPORTED_DTYPES`.

    Raises:
        ValueError: count and displacement past the end of the memory.
    """
    if type(spec) is np.ndarray and spec.flags.c_contiguous and spec.dtype in _SUPPORTED:
        return Buffer(spec.reshape(-1))        # the common case, first
    parts = _unpack(spec, vector=False)
    if parts is None:
        return None
    obj, count, displ, datatype = parts
    if not (_is_int(count) or count is None) or not (_is_int(displ) or displ is None):
        return None
    if isinstance(datatype, MPI.Datatype) and datatype != MPI.DATATYPE_NULL and not datatype.is_predefined:
        try:
            return _packed(obj, count, displ, datatype, blocks, name)
        except MPI.Exception:           # MPI cannot pack it (an uncommitted type, ...): the wrapped MPI's call
            return None
    typed = _typed(obj, datatype)
    if typed is None:
        return None
    arr, device = typed
    lo = index(displ or 0)
    if lo < 0 or (count is not None and count < 0):
        raise ValueError(f"expecting a non-negative count and displacement in {name}, got {count} and {lo}")
    hi = lo + index(count) * blocks if count is not None else arr.size
    if lo < 0 or hi < lo or hi > arr.size:
        what = f"{blocks} x {count}" if blocks > 1 else f"{count}"
        raise ValueError(f"expecting count + displacement <= {arr.size} elements in {name}, got {what} + {lo}")
    return Buffer(arr[lo:hi], device)


def as_vector(spec: Any, blocks: int, name: str = "the buffer") -> Buffer | None:
    """A vector buffer (Allgatherv, Alltoallv): the whole memory plus ``blocks`` counts and displacements.

    mpi4py's forms: ``buf``, ``[buf, counts]``, ``[buf, (counts, displs)]``, ``[buf, datatype]``,
    ``[buf, counts, datatype]``, ``[buf, (counts, displs), datatype]``,
    ``[buf, counts, displs, datatype]``; counts None splits the buffer evenly (the first blocks
    one longer), an int gives every block that count; displs None packs the blocks, an int
    strides them. Returns None where :func:`as_array` would.

    Raises:
        ValueError: counts or displacements of the wrong length or sign, or a block past the end.
    """
    parts = _unpack(spec, vector=True)
    if parts is None:
        return None
    obj, counts, displs, datatype = parts
    typed = _typed(obj, datatype)
    if typed is None:
        return None
    arr, device = typed
    size = arr.size
    if counts is None:
        counts = [size // blocks + (size % blocks > i) for i in range(blocks)]
    elif _is_int(counts):
        counts = [index(counts)] * blocks
    counts = count_list(counts, blocks, f"counts of {name}")
    if displs is None:
        displs = [sum(counts[:i]) for i in range(blocks)]
    displs = count_list([index(displs) * i for i in range(blocks)] if _is_int(displs) else displs, blocks,
                   f"displs of {name}")
    for j, (c, d) in enumerate(zip(counts, displs)):
        if c and d + c > size:
            raise ValueError(f"expecting {name} to hold counts[{j}] = {c} elements at displs[{j}] = {d}, "
                             f"got {size} elements")
    return Buffer(arr, device, counts, displs)

# -- derived datatypes ------------------------------------------------------------------------

_SELF: list[MPI.Intracomm] = []     # a private duplicate of COMM_SELF: MPI copies derived layouts over it


def _packed(obj: Any, count: Any, displ: Any, datatype: MPI.Datatype, blocks: int, name: str) -> Buffer | None:
    """``count * blocks`` items of the derived ``datatype`` at ``displ`` extents into host memory ``obj``, packed into
    a flat array of their one element type by a send to self; None for mixed or unsupported elements."""
    base = _flat(obj)
    element = _element_dtype(datatype)
    if base is None or base[1] is not None or element is None:
        return None
    mem = base[0]
    lb, extent = datatype.Get_extent()
    tlb, textent = datatype.Get_true_extent()
    if count is None:
        if extent <= 0 or mem.nbytes % extent:
            return None
        count = mem.nbytes // extent // blocks
    k, lo = index(count) * blocks, index(displ or 0)
    end = lo * extent + (k - 1) * extent + tlb + textent if k else 0
    if k < 0 or lo < 0 or (k and (lo * extent + tlb < 0 or end > mem.nbytes)):
        raise ValueError(f"expecting {k} items of the derived datatype (extent {extent} bytes) at displacement {lo} "
                         f"within {name}'s {mem.nbytes} bytes")
    packed = np.empty(k * (datatype.Get_size() // element.itemsize), element)
    spec, flat = [mem, (k, lo), datatype], [packed, MPI.Datatype.fromcode(element.char)]
    if not _SELF:
        _SELF.append(MPI.COMM_SELF.Dup())
    _SELF[0].Sendrecv(spec, 0, 0, flat, 0, 0)
    packed.flags.writeable = mem.flags.writeable

    def unpack() -> None:
        _SELF[0].Sendrecv(flat, 0, 0, spec, 0, 0)
    return Buffer(packed, unpack=unpack)


def _element_dtype(datatype: MPI.Datatype) -> np.dtype | None:
    """The one supported numpy dtype every element of ``datatype`` has, or None (mixed, or unsupported)."""
    try:
        layout = to_numpy_dtype(datatype)
    except (ValueError, TypeError, KeyError):
        return None
    leaves, todo = set(), [layout]
    while todo:
        dt = todo.pop()
        if dt.subdtype is not None:
            todo.append(dt.subdtype[0])
        elif dt.fields:
            todo.extend(f[0] for f in dt.fields.values())
        else:
            leaves.add(dt)
    leaf = leaves.pop() if len(leaves) == 1 else None
    return leaf if leaf in _SUPPORTED and datatype.Get_size() % leaf.itemsize == 0 else None


# -- helpers ----------------------------------------------------------------------------------

def unsupported_op(op: Any) -> str:
    """The fallback reason for a reduce op pyhccl does not run, naming it."""
    name = next((f"MPI.{n}" for n in _OTHER_OPS if isinstance(op, MPI.Op) and op == getattr(MPI, n, None)),
                "a user-defined op" if isinstance(op, MPI.Op) else f"{type(op).__name__}")
    return f"reduce op {name} is not one of {', '.join(SUPPORTED_OPS)}"


def unsupported_form(vectors: tuple[str, ...] = (), **specs: Any) -> str:
    """The fallback reason for buffers pyhccl does not run: the first argument it rejects, and why."""
    for name, spec in specs.items():
        if in_place(spec):
            continue
        why = _why_not(spec, name in vectors)
        if why:
            return f"{name} has {why}, which pyhccl does not run"
    return "a buffer form pyhccl does not run"


def _why_not(spec: Any, vector: bool) -> str:
    """Why :func:`as_array` (:func:`as_vector`) returns None for ``spec``; "" when it does not."""
    parts = _unpack(spec, vector)
    if parts is None:
        return f"a list form mpi4py does not take for a {'vector ' if vector else ''}buffer ({len(spec)} items)"
    obj, count, displ, datatype = parts
    if not vector and not all(x is None or _is_int(x) for x in (count, displ)):
        return f"a count or displacement that is not an int ({count!r}, {displ!r})"
    if datatype is not None and not _is_datatype(datatype):
        return f"a datatype that is not an MPI.Datatype ({type(datatype).__name__})"
    base = _flat(obj)
    if base is None:
        if gpu.backend_of(obj) is not None:
            return "device memory that is not contiguous"
        try:
            if not memoryview(obj).contiguous:
                return "memory that is not contiguous"
        except TypeError:
            pass
        if isinstance(obj, np.ndarray):
            return "memory that is not contiguous"
        return f"a {type(obj).__name__}, not a buffer (buffer protocol, __dlpack__, or __cuda_array_interface__ " \
               "with cupy installed)"
    arr = base[0]
    if datatype is not None:
        dtype, dname = _mpi_dtype(datatype), getattr(datatype, "name", datatype)
        if dtype is None and isinstance(datatype, MPI.Datatype) and not datatype.is_predefined:
            return "a derived datatype whose elements are not all of one supported type"
        if dtype is None:
            return f"the non-numeric or unsupported datatype {dname}"
        if arr.nbytes % dtype.itemsize:
            return f"{arr.nbytes} bytes, not a whole number of {dname}"
        return ""
    if arr.dtype not in _SUPPORTED:
        return f"dtype {arr.dtype}"
    return ""



def count_list(values: Any, n: int, name: str) -> tuple[int, ...]:
    try:
        out = tuple(index(v) for v in values)
    except TypeError:
        raise TypeError(f"expecting {name} as a sequence of {n} ints, got {values!r}") from None
    if len(out) != n or any(v < 0 for v in out):
        raise ValueError(f"expecting {name}: {n} non-negative ints (one per rank), got {list(out)}")
    return out


def _is_int(x: Any) -> bool:
    return isinstance(x, Integral) and not isinstance(x, bool)


def _is_datatype(x: Any) -> bool:
    return isinstance(x, (MPI.Datatype, str))


def _unpack(spec: Any, vector: bool) -> tuple[Any, Any, Any, Any] | None:
    """``(buffer, count(s), displ(s), datatype)`` of an mpi4py message, or None for another form.

    mpi4py reads a list as (count, displ) in a simple message, only a tuple as (counts, displs)
    in a vector one.
    """
    if not isinstance(spec, (list, tuple)):
        return spec, None, None, None
    pair = tuple if vector else (tuple, list)
    if len(spec) == 2:
        obj, x = spec
        if _is_datatype(x):
            return obj, None, None, x
        if isinstance(x, pair):
            return (obj, *x, None) if len(x) == 2 else None
        return obj, x, None, None
    if len(spec) == 3:
        obj, x, datatype = spec
        if isinstance(x, pair):
            return (obj, *x, datatype) if len(x) == 2 else None
        return obj, x, None, datatype
    if len(spec) == 4:
        return spec[0], spec[1], spec[2], spec[3]
    return None


def _typed(obj: Any, datatype: Any) -> tuple[Any, gpu.DeviceBackend | None] | None:
    """``obj``'s memory as a flat array of ``datatype`` (or of its own type): (array, device backend or None)."""
    if datatype is not None and not _is_datatype(datatype):
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
    return arr, device


def _flat(obj: Any) -> tuple[Any, gpu.DeviceBackend | None] | None:
    """A 1-D view of ``obj``'s memory with its own dtype, plus its device backend (None: host memory).

    mpi4py's order (``PyMPI_GetBuffer``): the buffer protocol, then DLPack (read without consuming the
    capsule, :func:`pyhccl.comm.dlpack.host_array`); device arrays go to their backend. The view keeps
    the producer alive and has its writability.
    """
    if isinstance(obj, np.ndarray):
        arr = obj
    elif (device := gpu.backend_of(obj)) is not None:
        flat = device.flat(obj)
        return None if flat is None else (flat, device)
    else:
        try:
            mv = memoryview(obj)
        except TypeError:
            mv = None
        if mv is not None:
            if not mv.contiguous:
                return None
            try:
                arr = np.frombuffer(mv, dtype=np.dtype(mv.format) if mv.format else np.uint8)
            except (TypeError, ValueError):
                arr = np.frombuffer(mv.cast("B"), dtype=np.uint8)
        elif hasattr(obj, "__dlpack__"):
            try:
                arr = host_array(obj)
            except (BufferError, RuntimeError, TypeError, ValueError):
                return None             # the producer refuses: the wrapped MPI gets the object and says why
            if arr is None:
                return None             # device memory without a backend, or strided: the wrapped MPI's
        else:
            return None
    if not (arr.flags.c_contiguous or arr.flags.f_contiguous):
        return None
    return arr.reshape(-1, order="A"), None


def _mpi_dtype(datatype: MPI.Datatype | str) -> np.dtype | None:
    if isinstance(datatype, str):
        try:
            datatype = MPI.Datatype.fromcode(datatype)
        except (KeyError, ValueError):
            return None
    if datatype == MPI.DATATYPE_NULL or not datatype.is_predefined or datatype.py2f() in _NOT_NUMERIC:
        return None
    if _bfloat16 is not None and datatype == getattr(MPI, "BFLOAT16_T", None):
        return np.dtype(_bfloat16)
    try:
        dtype = np.dtype(datatype.typestr)
    except TypeError:
        return None
    return dtype if dtype in _SUPPORTED else None
