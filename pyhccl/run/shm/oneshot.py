"""The one-shot Mesh schedule on shared slots: small collectives with one flag barrier and no MPI call.

HCCL's one-shot Mesh templates (``AllReduceMeshOneShot``, the one-step Mesh of AllGather,
ReduceScatter, Broadcast, AlltoAll and Reduce; templates.md) are one step: every rank loads the blocks
it needs straight from every peer and reduces them locally. On one node that step is: copy this
rank's input into its slot of a shared window, one node barrier on sequence flags
(:mod:`.flags`), then read the peers' slots. Slots are double-buffered by the barrier's parity,
so no barrier is needed after the reads: a rank writes the same slot again two barriers later,
when every peer has entered the barrier after the one whose slots it read, i.e. is done
reading. Every rank (Reduce: the root) reduces the ranks' blocks in rank order, as the templates' plans
do, so all ranks get the same bits; a ReduceScatter rank starts from its own block, as HCCL's Mesh
ReduceScatter does.

:class:`OneShotRunner` is a :class:`~pyhccl.run.base.Runner`; :func:`one_shot` says which
calls it runs. The slots live in the engine (:meth:`Slots.reserve`, collective, grown when a
call needs more).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from mpi4py import MPI

from ...algo.names import AlgoRef, Runtime
from ...core.call import Call
from ..timeout import CollectiveTimeoutError

__all__ = ["OneShotRunner", "Slots", "ONE_SHOT", "ONE_SHOT_MAX_BYTES", "one_shot"]

#: The one-step Mesh template of each op this runner runs (pyhccl's names; templates.md).
ONE_SHOT = {"allreduce": "MeshOneShot", "all_gather": "Mesh", "reduce_scatter": "Mesh", "broadcast": "Mesh",
            "alltoall": "Mesh", "reduce": "Mesh"}
#: The largest input (bytes per rank) run on the slots; larger calls run the plan's program on the window
#: (every rank's two slots of that size would otherwise stay allocated).
ONE_SHOT_MAX_BYTES = 1 << 20
#: AlltoAll blocks from this size (bytes) are not posted for the rank's own use but copied straight to its output:
#: a copy fewer, for a few more numpy calls (smaller blocks post the whole input in one copy)
SPLIT_MIN_BYTES = 1 << 16
#: Ops whose in-place form the runner takes (the input is the output, read before any write).
_IN_PLACE_OK = frozenset({"allreduce", "broadcast", "reduce"})


def one_shot(call: Call, name: str, itemsize: int, most: int | None = None) -> bool:
    """Whether :class:`OneShotRunner` runs ``call`` for template ``name``: the op's one-step Mesh, inputs of at
    most ``most`` bytes (None: ONE_SHOT_MAX_BYTES, also the most it takes; a machine profile may measure a lower
    crossover), not in place except where the input is read once before the output is written."""
    most = ONE_SHOT_MAX_BYTES if most is None else min(most, ONE_SHOT_MAX_BYTES)
    return ONE_SHOT.get(call.op) == name and (not call.in_place or call.op in _IN_PLACE_OK) \
        and call.counts is None and call.input_count(0) * itemsize <= most


def _whole(every: np.ndarray) -> np.ndarray:
    return every


def _fold(ufunc: Callable, rows, out: np.ndarray) -> None:
    """``out = rows[0] op rows[1] op ...``, left to right, as the templates' plans reduce."""
    np.copyto(out, rows[0])
    for row in rows[1:]:
        ufunc(out, row, out=out)


class Slots:
    """Every rank's two slots (barrier parity x rank x bytes) in one shared window of a node communicator."""

    def __init__(self) -> None:
        self.win: MPI.Win | None = None
        self.nbytes = 0
        self.array: np.ndarray | None = None
        self.generation = 0

    def reserve(self, node: MPI.Intracomm, nbytes: int) -> None:
        """Make every slot at least ``nbytes`` (collective over ``node``: every rank asks for the same)."""
        if nbytes <= self.nbytes:
            return
        nbytes = max(-(-nbytes // 64) * 64, 2 * self.nbytes, 4096)
        self.free()
        size = node.Get_size()
        total = 2 * size * nbytes
        self.win = MPI.Win.Allocate_shared(total if node.Get_rank() == 0 else 0, 1, comm=node)
        self.win.Lock_all(MPI.MODE_NOCHECK)
        buf, _ = self.win.Shared_query(0)
        self.array = np.frombuffer(buf, np.uint8, total).reshape(2, size, nbytes)
        self.nbytes = nbytes
        self.generation += 1

    def free(self) -> None:
        """Free the window (collective over the node communicator it was made on)."""
        if self.win is not None:
            self.win.Unlock_all()
            self.win.Free()
        self.win, self.array, self.nbytes = None, None, 0


class OneShotRunner:
    """One rank's one-shot Mesh collective on an engine's slots and flags (a :class:`~pyhccl.run.base.Runner`).

    Args:
        call: the call (:func:`one_shot` holds).
        rank: this rank.
        itemsize: bytes per element.
        engine: the node's :class:`~.engine.ShmEngine` (its node communicator, flags and slots).
    """

    scratch_count = 0

    def __init__(self, call: Call, rank: int, itemsize: int, engine: Any) -> None:
        if not one_shot(call, ONE_SHOT.get(call.op, ""), itemsize):
            raise ValueError(f"expecting a call the one-shot runner takes ({', '.join(ONE_SHOT)}, not in place "
                             f"except allreduce and broadcast, inputs up to {ONE_SHOT_MAX_BYTES} bytes), got "
                             f"{call.op} of {call.input_count(0) * itemsize} bytes (in_place={call.in_place})")
        self.call, self.rank, self.itemsize, self.engine = call, rank, itemsize, engine
        n = call.nranks
        self.block = call.count                                                   # elements per block
        self.slot_count = call.input_count(rank)                                  # same on every rank
        self.nbytes = max(call.input_count(r) for r in range(n)) * itemsize
        self.split = call.op == "alltoall" and self.block * itemsize >= SPLIT_MIN_BYTES    # (:meth:`_post`)
        self.order = [rank] + [q for q in range(n) if q != rank]           # ReduceScatter's (:meth:`_reader`)
        self._views: tuple | None = None

    def run(self, comm: Any, bufs: tuple, ufunc: Callable | None, timeout: float | None = None) -> None:
        """Execute with ``(input, output, scratch)`` arrays of one dtype (``input`` is ``output`` in place).

        Raises:
            CollectiveTimeoutError: with ``timeout`` (seconds), some rank of the node did not reach the barrier.
        """
        eng = self.engine
        slots = eng.slots
        if slots.nbytes < self.nbytes:
            slots.reserve(eng.comm, self.nbytes)
        v = self._views
        dtype = bufs[1].dtype
        if v is None or v[0] != slots.generation or v[1] is not dtype:
            v = self._views = self._bind(slots, dtype)
        parity = (eng.flags.seq + 1) & 1
        if self.call.op != "broadcast" or self.rank == self.call.root:
            self._post(v[2][parity], bufs[0], bufs[1])
        self._wait(timeout)
        view, act = self._reader(bufs[0], bufs[1], ufunc)
        if act is not None:
            act(view(v[3][parity]))

    def bind(self, inp: np.ndarray, out: np.ndarray, ufunc: Callable | None) -> Callable[[], None]:
        """:meth:`run` on these arrays with no timeout, as a function of no arguments with everything looked up
        once (the warm path's call: a loop calling with the same arrays). Until the slots are made, and after
        they grow, it runs :meth:`run` and looks up again."""
        slots, flags = self.engine.slots, self.engine.flags
        wait, split, post = flags.wait, self.split, self._post
        sends = self.call.op != "broadcast" or self.rank == self.call.root
        view, act = self._reader(inp, out, ufunc)
        gen, by_parity = -1, ()

        def go() -> None:
            nonlocal gen, by_parity
            if slots.generation != gen:
                self.run(None, (inp, out, None), ufunc)
                gen, _, mine, every = self._bind(slots, out.dtype)
                by_parity = ((mine[1], view(every[1])), (mine[0], view(every[0])))    # by this rank's barriers so far
                return
            mine, src = by_parity[flags.seq & 1]
            if split:
                post(mine, inp, out)
            elif sends:
                mine[...] = inp
            wait()
            if act is not None:
                act(src)
        return go

    def _reader(self, inp: np.ndarray, out: np.ndarray, ufunc: Callable | None) -> tuple[Callable, Callable | None]:
        """This rank's part once the barrier is passed (``out``: flat and contiguous, as every job's output is):
        ``view``, what it reads of one parity's slots (the bound call makes it once per parity), and ``act``, what
        it does with that (None: nothing). Reductions run in rank order, as the templates' plans do."""
        op, n, me, c, root = self.call.op, self.call.nranks, self.rank, self.block, self.call.root
        if op == "broadcast" and me == root or op == "reduce" and me != root:      # nothing to read
            return _whole, None
        if op == "reduce_scatter":          # its own block first, then the others in rank order (the Mesh template)
            order = self.order

            def view(every):
                return [every[q, me * c:(me + 1) * c] for q in order]
            if n == 2:
                return view, lambda rows: ufunc(rows[0], rows[1], out=out)
            return view, lambda rows: _fold(ufunc, rows, out)
        if op in ("allreduce", "reduce"):
            if n == 1:
                return lambda every: every[0], lambda row: np.copyto(out, row)
            if n == 2:          # two ranks: one add beats the general reduce (the same order: row 0, then row 1)
                return lambda every: (every[0], every[1]), lambda rows: ufunc(rows[0], rows[1], out=out)
            if self.slot_count == 1:    # numpy's reduce adds a column of one element in pairs from 8 rows on
                return _whole, lambda rows: _fold(ufunc, rows, out)
            reduce = ufunc.reduce
            return _whole, lambda rows: reduce(rows, axis=0, out=out)
        if op == "broadcast":
            return lambda every: every[root], lambda row: np.copyto(out, row)
        blocks = out.reshape(n, -1)
        if op == "all_gather":
            return _whole, lambda every: np.copyto(blocks, every)
        if not self.split:      # alltoall: every rank's block for this rank
            return lambda every: every[:, me * c:(me + 1) * c], lambda mine: np.copyto(blocks, mine)
        head, tail = blocks[:me], blocks[me + 1:]       # split: its own block is in place already (:meth:`_post`)
        return (lambda every: (every[:me, me * c:(me + 1) * c], every[me + 1:, me * c:(me + 1) * c]),
                lambda parts: (np.copyto(head, parts[0]), np.copyto(tail, parts[1])))

    def run_device(self, comm: Any, bufs: tuple, dev: Any, ufunc: Callable | None,
                   timeout: float | None = None) -> None:
        """The slots are host memory: device arrays go through host copies (``dev.run_on_host``)."""
        dev.run_on_host(self, comm, bufs, ufunc, timeout)

    def _bind(self, slots: Slots, dtype: np.dtype) -> tuple:
        k = self.slot_count
        typed = [slots.array[p, :, :k * dtype.itemsize].view(dtype) for p in (0, 1)]       # (ranks, k) each
        return slots.generation, dtype, [t[self.rank] for t in typed], typed

    def _wait(self, timeout: float | None) -> None:
        if not self.engine.sync(timeout):
            algo = str(AlgoRef(ONE_SHOT[self.call.op], Runtime.SHM))
            pending = "the node barrier of step 0: some rank of the node has not reached it"
            raise CollectiveTimeoutError(
                f"rank {self.rank} waited {timeout:g} s (PYHCCL_TIMEOUT) in the node barrier of step 0 (of steps "
                f"0..0) of {self.call.op} algorithm {algo} (count {self.call.count}, {self.itemsize}-byte "
                f"elements); still pending: {pending}", algorithm=algo, step=0, pending=[pending])

    def _post(self, mine, inp, out) -> None:
        """This rank's part before the barrier: its input into its slot (AlltoAll of large blocks: the blocks its
        peers read; its own block goes straight to the output, a copy fewer)."""
        if not self.split:
            np.copyto(mine, inp)
            return
        lo, hi = self.rank * self.block, (self.rank + 1) * self.block
        mine[:lo], mine[hi:] = inp[:lo], inp[hi:]
        out[lo:hi] = inp[lo:hi]
