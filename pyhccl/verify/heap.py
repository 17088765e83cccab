"""Keep the simulator's large temporaries in the process heap while it runs, so the kernel does not map them anew.

A simulation at thousands of ranks allocates and frees numpy arrays of hundreds of MB at every
step. glibc serves each with its own ``mmap`` and unmaps it on free, and numpy asks for
transparent huge pages on each: the kernel then zeroes (and compacts memory for) every page of
every temporary. On NHR at 4096 ranks that was over half of the simulation's CPU seconds, in
the kernel. Inside :func:`heap`, glibc serves large blocks from its heap and keeps freed ones
for reuse, and numpy asks for no huge pages; on exit both are set back and, when the heap holds
more than ``_KEEP_FREE`` free, it is trimmed (that memory given back). Below that it is kept for the
next simulation: a sweep of small ones spent more time faulting trimmed pages back in than simulating
on them. Elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import platform
import threading
from contextlib import contextmanager
from functools import lru_cache
from typing import Iterator

import numpy as np

__all__ = ["heap", "free_bytes"]

# glibc malloc.h: mallopt parameters and their defaults
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4
_TRIM_DEFAULT, _MMAP_MAX_DEFAULT = 128 * 1024, 65536
_TRIM_NEVER = 2**31 - 1
#: Free heap bytes kept at exit (more is given back).
_KEEP_FREE = 256 << 20


@lru_cache(maxsize=1)
def _libc():
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


def _hugepage_switch():
    """numpy's (private) switch for asking huge pages on large arrays, None where this numpy has none."""
    for mod in ("_core", "core"):
        multiarray = getattr(getattr(np, mod, None), "multiarray", None)
        if hasattr(multiarray, "_set_madvise_hugepage"):
            return multiarray._set_madvise_hugepage
    return None


_lock = threading.Lock()
_depth = 0          # heaps open (threads may simulate at once): only the first sets, only the last restores
_was: bool | None = None


@contextmanager
def heap() -> Iterator[None]:
    """Within: large blocks from the heap, freed ones kept, no huge pages; on exit trimmed back when more
    than ``_KEEP_FREE`` is free."""
    global _depth, _was
    libc, switch = _libc(), _hugepage_switch()
    with _lock:
        _depth += 1
        if _depth == 1:
            if libc is not None:
                libc.mallopt(_M_MMAP_MAX, 0)
                libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_NEVER)
            _was = switch(False) if switch is not None else None
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                if switch is not None:
                    switch(_was)
                if libc is not None:
                    libc.mallopt(_M_MMAP_MAX, _MMAP_MAX_DEFAULT)
                    libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_DEFAULT)
                    free = free_bytes()         # 0 also where glibc cannot say: then trim
                    if not free or free > _KEEP_FREE:
                        libc.malloc_trim(0)


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                      "fsmblks", "uordblks", "fordblks", "keepcost")]


def free_bytes() -> int:
    """Bytes glibc's heap holds free for reuse (``mallinfo2().fordblks``: inside :func:`heap`, the freed
    temporaries that count as resident); 0 elsewhere than glibc 2.33+."""
    libc = _libc()
    fn = getattr(libc, "mallinfo2", None) if libc is not None else None
    if fn is None:
        return 0
    fn.restype = _Mallinfo2
    return int(fn().fordblks)
