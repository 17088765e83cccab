"""Shared-memory runtime: every rank's plan run on one node through an MPI-3 shared window.

The plans are the ones the MPI runtime runs (:mod:`pyhccl.run.mpi`); only the transport
differs. Each rank's data that a peer reads lives in that rank's segment of one window, and a
receive becomes a load from the peer's segment, the way UB's memory semantics let an NPU load
and reduce a peer's HBM (HCCL's Mesh templates over ``MemSemantic`` links).

* :mod:`.engine` — the window and node communicator of a communicator (:class:`ShmEngine`,
  cached by :func:`shm_engine`), and memory plans read in place (:meth:`ShmEngine.alloc`);
* :mod:`.compile` — :func:`compile_shm`: every rank's plan compiled for one rank (:class:`ShmPlan`),
  with :mod:`.program` placing values and listing the rank's ops and barriers;
* :mod:`.execute` — :class:`ShmRunner`: a compiled plan run on an engine (a
  :class:`~pyhccl.run.base.Runner`);
* :mod:`.hier` — :class:`HierRunner`: on several nodes, the same plan with the node's peers read
  from the node's window and the other nodes' over MPI (:func:`node_engine`, :func:`compile_hier`).
* :mod:`.flags` — the node barrier every runner here waits at: sequence flags in shared memory;
* :mod:`.oneshot` — :class:`OneShotRunner`: the one-step Mesh templates on double-buffered shared
  slots, one flag barrier a call (small calls: :func:`one_shot` says which);
* :mod:`.cma` — cross-memory attach (``process_vm_readv``): with ``shm_engine(comm, cma=True)``
  where it works on every rank (:attr:`ShmEngine.cma`), plans compiled with ``cma=True`` read
  peers' ordinary arrays in place instead of copying them through the window
  (:meth:`ShmEngine.cma_for` says when that pays: from ``CMA_MIN_BYTES``).

API::

    engine = shm_engine(comm, cma=True)          # collective on first use; ValueError off one node
    plans = [build_plan(call, "MeshTwoShot", r) for r in range(call.nranks)]
    runner = ShmRunner(compile_shm(call, plans, 4, comm.Get_rank(), engine.cma_for(call, 4)), engine)
    runner.run(comm, (inp, out, None), np.add, timeout=None)   # as CompiledPlan.run
"""

from .compile import OPS, ShmPlan, compile_shm
from .engine import KEYVAL, NodeEngine, ShmEngine, adopt_engine, node_engine, release_engine, shm_engine
from .execute import ShmRunner
from .hier import HierPlan, HierRunner, compile_hier
from .oneshot import OneShotRunner, one_shot

__all__ = ["KEYVAL", "OPS", "ShmEngine", "ShmPlan", "ShmRunner", "adopt_engine", "compile_shm", "release_engine",
           "shm_engine", "NodeEngine", "node_engine", "HierPlan", "HierRunner", "compile_hier",
           "OneShotRunner", "one_shot"]
