"""The runner interface: what every runtime's compiled collective offers the Communicator and the device path.

A runner is one rank's collective compiled for one call and element size: the MPI runtime's
:class:`pyhccl.run.mpi.CompiledPlan` and the shared-memory engine's
:class:`pyhccl.run.shm.ShmRunner` implement it. The Communicator calls :meth:`Runner.run` on
host arrays; :meth:`pyhccl.gpu.DeviceBackend.run` calls :meth:`Runner.run_device` on device arrays.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol, runtime_checkable

if TYPE_CHECKING:
    from mpi4py import MPI

    from ..gpu import DeviceBackend

__all__ = ["Runner"]


@runtime_checkable
class Runner(Protocol):
    """One rank's compiled collective.

    Attributes:
        scratch_count: elements of scratch the caller passes as the third buffer (0: the runner
            keeps its own work space).
    """

    scratch_count: int

    def run(self, comm: MPI.Intracomm, bufs: tuple[Any, Any, Any], ufunc: Callable | None,
            timeout: float | None = None) -> None:
        """Execute on ``comm`` with host arrays ``(input, output, scratch)`` of one dtype.

        ``ufunc`` is the reduction (a numpy ufunc; None for ops that reduce nothing). For an
        in-place call ``input`` is ``output``.

        Raises:
            CollectiveTimeoutError: with ``timeout`` (seconds), a step that did not complete in time.
        """

    def run_device(self, comm: MPI.Intracomm, bufs: tuple[Any, Any, Any], dev: DeviceBackend,
                   ufunc: Callable | None, timeout: float | None = None) -> None:
        """:meth:`run` for arrays on one device of ``dev``; the result is in ``bufs[1]`` on return.

        ``ufunc`` is the numpy ufunc (the runner takes the device's own from ``dev``); the scratch
        is device memory. A runner that reads host memory only copies through the host
        (:meth:`pyhccl.gpu.DeviceBackend.run_on_host`).
        """
