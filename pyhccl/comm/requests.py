"""Requests of pyhccl's nonblocking and persistent collectives: mpi4py requests MPI itself can wait on.

A pyhccl request is an :class:`mpi4py.MPI.Request` (a persistent one an :class:`mpi4py.MPI.Prequest`)
whose handle is an MPICH *extended generalized request* (``MPIX_Grequest_class_allocate``, the mechanism
ROMIO's nonblocking I/O uses): MPI calls its poll function whenever the request is tested or waited
on, alone or in a list with MPI's own requests (``MPI.Request.Waitall``, ``Testall``, ``Waitany``,
``Testany``, ``Waitsome``, ...). The poll function advances the plan (:class:`pyhccl.run.progress.Progress`)
and completes the request when its last step has. So progress happens when the request is started
and every time it is tested or waited on, and at no other time.

MPICH only: where ``MPIX_Grequest_class_create`` is missing (another MPI), :data:`AVAILABLE` is False and
the Communicator hands its nonblocking and persistent calls to the wrapped communicator.
"""

from __future__ import annotations

import ctypes
import itertools
from typing import Any, Callable

from mpi4py import MPI

from ..run.progress import Progress

__all__ = ["AVAILABLE", "Request", "Prequest", "start"]

_HANDLE = ctypes.c_int if MPI._sizeof(MPI.Request) == ctypes.sizeof(ctypes.c_int) else ctypes.c_void_p
_QUERY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_FREE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
_CANCEL = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int)
_WAIT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_double, ctypes.c_void_p)

#: The runs in flight, by the ``extra_state`` number MPI hands the callbacks; removed when MPI frees the request.
_live: dict[int, "_Run"] = {}
_ids = itertools.count(1)


class _Run:
    """One start of a request: its progress, its MPI handle, the error its progress raised."""

    __slots__ = ("progress", "handle", "error", "on_error")

    def __init__(self, progress: Progress, on_error: Callable[[BaseException], None]) -> None:
        self.progress, self.handle, self.error, self.on_error = progress, 0, None, on_error


def _poll(state: int, status: int) -> int:
    """MPI's poll of one of pyhccl's requests: advance the plan; complete the request when it is done."""
    run = _live.get(state)
    return 0 if run is None else _advance(run)


def _advance(run: _Run) -> int:
    """Advance ``run`` (if still active) without waiting; complete its MPI request when the plan is done.
    Returns MPI's error code: ``MPI.ERR_OTHER`` when the progress raised (kept in ``run.error``)."""
    if not run.handle:
        return MPI.ERR_OTHER if run.error is not None else 0
    try:
        done = run.error is not None or run.progress.advance()
    except BaseException as e:      # noqa: BLE001 - nothing may unwind through MPI's C frames
        run.error = e
        done = True
    if done:
        handle, run.handle = run.handle, 0
        _complete(handle)
        if run.error is not None:
            run.on_error(run.error)
            return MPI.ERR_OTHER
    return 0


def _finish(run: _Run) -> int:
    """Run ``run`` to its end, blocking in MPI's wait for each step; complete its MPI request. Returns as :func:`_advance`."""
    try:
        run.progress.wait()
    except BaseException as e:      # noqa: BLE001 - nothing may unwind through MPI's C frames
        run.error = e
    return _advance(run)


def _wait(count: int, states: int, timeout: float, status: int) -> int:
    """MPI's blocking wait of ``count`` of pyhccl's requests: run each to its end."""
    arr = ctypes.cast(states, ctypes.POINTER(ctypes.c_void_p))
    rc = 0
    for i in range(count):
        run = _live.get(arr[i])
        if run is not None:
            rc = _finish(run) or rc
    return rc


def _query(state: int, status: int) -> int:
    """The status of a completed request: no elements, not cancelled (MPI leaves a collective's status
    undefined); ``MPI.ERR_OTHER`` when its progress raised, which the completing MPI call then reports."""
    _set_elements(status, _BYTE, 0)
    _set_cancelled(status, 0)
    run = _live.get(state)
    return MPI.ERR_OTHER if run is not None and run.error is not None else 0


def _free(state: int) -> int:
    _live.pop(state, None)
    return 0


def _cancel(state: int, complete: int) -> int:
    return 0                        # MPI: cancelling a collective's request is erroneous; nothing to undo


def _handle_offset() -> int:
    """Where an mpi4py request object keeps its MPI handle (checked by writing one and reading ``.handle``)."""
    probe = MPI.Request()
    size = ctypes.sizeof(_HANDLE)
    null = ctypes.string_at(ctypes.addressof(_HANDLE(MPI.REQUEST_NULL.handle)), size)
    head = ctypes.string_at(id(probe), 64)
    at = head.find(null)
    if at < 0 or head.find(null, at + 1) >= 0:
        return -1
    ctypes.memmove(id(probe) + at, ctypes.byref(_HANDLE(12345)), size)
    ok = probe.handle == 12345
    ctypes.memmove(id(probe) + at, ctypes.byref(_HANDLE(MPI.REQUEST_NULL.handle)), size)
    return at if ok else -1


_BYTE = MPI.BYTE.handle
try:
    _lib = ctypes.CDLL(MPI.__file__)        # dlsym searches the extension's dependencies: the MPI library
    _class_create = _lib.MPIX_Grequest_class_create
    _complete = _lib.MPI_Grequest_complete
    _set_elements, _set_cancelled = _lib.MPI_Status_set_elements_x, _lib.MPI_Status_set_cancelled
    _allocate = _lib.MPIX_Grequest_class_allocate
    _allocate.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(_HANDLE)]
    _complete.argtypes = [_HANDLE]
    _set_elements.argtypes = [ctypes.c_void_p, _HANDLE, ctypes.c_longlong]
    _set_cancelled.argtypes = [ctypes.c_void_p, ctypes.c_int]
    _AT = _handle_offset()
except (OSError, AttributeError):
    _AT = -1
#: pyhccl can give MPI requests that run its plans (MPICH's ``MPIX_Grequest_class_create``).
AVAILABLE = _AT >= 0
_CALLBACKS = (_QUERY(_query), _FREE(_free), _CANCEL(_cancel), _QUERY(_poll), _WAIT(_wait))
_CLASS = ctypes.c_int()
if AVAILABLE and _class_create(*_CALLBACKS, ctypes.byref(_CLASS)):       # one class: each start allocates
    AVAILABLE = False


def _arm(req: MPI.Request, run: _Run) -> None:
    """Give ``req`` a fresh generalized request driving ``run``, and post what can be posted."""
    state = next(_ids)
    handle = _HANDLE()
    err = _allocate(_CLASS.value, state, ctypes.byref(handle))
    if err:
        raise MPI.Exception(err)
    run.handle = handle.value
    run.error = None
    _live[state] = run
    _HANDLE.from_address(id(req) + _AT).value = handle.value
    _advance(run)                   # the first step's messages go out now


class _Waits:
    """Wait and Test that advance the plan here (no call back from MPI) and raise the error its progress
    raised (MPI itself reports ``MPI.ERR_OTHER``)."""

    _run: _Run
    algorithm: str
    selection: Any

    def Wait(self, status: MPI.Status | None = None) -> bool:
        run = self._run
        if run.handle:
            _finish(run)
        if run.error is not None:
            self._fail(run)
        return super().Wait(status)                     # type: ignore[misc]

    def Test(self, status: MPI.Status | None = None) -> bool:
        run = self._run
        if run.handle:
            _advance(run)
            if run.handle:
                return False
        if run.error is not None:
            self._fail(run)
        return super().Test(status)                     # type: ignore[misc]

    def _fail(self, run: _Run) -> None:
        """Let MPI free the failed request (it reports ``MPI.ERR_OTHER``), then raise what the progress raised."""
        try:
            super().Wait()                              # type: ignore[misc]
        except MPI.Exception:
            pass
        raise run.error


class Request(_Waits, MPI.Request):
    """The request of a pyhccl nonblocking collective (``Iallreduce``, ...): an ``MPI.Request``.

    Attributes:
        algorithm: the algorithm the plan runs (``str`` of its :class:`pyhccl.algo.names.AlgoRef`).
        selection: the :class:`pyhccl.select.Selection` behind it (None when a template was forced).
    """

    def Free(self) -> None:
        """Free the request of a completed collective; an active one raises (MPI: freeing it is erroneous)."""
        _require_inactive(self._run)
        super().Free()


class Prequest(_Waits, MPI.Prequest):
    """The request of a pyhccl persistent collective (``Allreduce_init``, ...): an ``MPI.Prequest``.

    The plan is compiled and the arrays bound once, at init; :meth:`Start` replays it. Start it with
    :meth:`Start` or :meth:`Startall` (mpi4py's ``MPI.Prequest.Startall`` raises MPI's invalid-request
    error for it); wait or test it like any request. Between a completion and the next start its
    handle is ``MPI.REQUEST_NULL``.
    """

    def Start(self) -> None:
        """Start the next run of the plan (its first step is posted now)."""
        run = self._run
        if run.handle:
            raise ValueError("Start: the request is active; wait for (or test until) its completion first")
        run.progress.restart()
        _arm(self, run)

    def Free(self) -> None:
        """Free the request (between a completion and the next start it holds no MPI handle); an active one raises
        (MPI: a persistent collective's request is freed inactive)."""
        _require_inactive(self._run)

    @classmethod
    def Startall(cls, requests: list[MPI.Prequest]) -> None:
        """Start every request of ``requests``: pyhccl's and mpi4py's persistent requests, mixed."""
        theirs = [r for r in requests if not isinstance(r, Prequest)]
        for r in requests:
            if isinstance(r, Prequest):
                r.Start()
        if theirs:
            MPI.Prequest.Startall(theirs)


def _require_inactive(run: _Run) -> None:
    """Refuse to free a running collective: nothing would advance its plan again, so its result would never be
    written and the other ranks' parts would wait on this rank's."""
    if run.handle:
        raise ValueError("Free: the collective of this request is still running (MPI: freeing an active "
                         "collective's request is erroneous); Wait or Test it to completion first")


def start(progress: Progress, algorithm: str, selection: Any, on_error: Callable[[BaseException], None],
          persistent: bool = False) -> MPI.Request:
    """A request running ``progress``: started now (a :class:`Request`), or at its first ``Start`` (a :class:`Prequest`).

    ``on_error(e)``: called when the progress raises (the Communicator aborts the job on a timeout when
    it is asked to); the waiting call then raises ``e``.
    """
    req = Prequest() if persistent else Request()
    req._run, req.algorithm, req.selection = _Run(progress, on_error), algorithm, selection
    if not persistent:
        _arm(req, req._run)
    return req
