"""The warm path: a call made again with the very same argument objects skips parsing and every lookup.

A training loop calls ``Allreduce(grad, out)`` with the same arrays every step. Anything else (new
objects, a changed shape, the check on, device buffers) takes the full path.
"""

from __future__ import annotations

from collections import OrderedDict
from functools import lru_cache
from types import MappingProxyType
from typing import Any, Callable, Mapping

import numpy as np
from mpi4py import MPI

from .job import Job

__all__ = ["WarmCall", "WarmCache"]

#: Calls remembered for the warm path (each entry holds its arguments alive).
RECENT = 8


class WarmCall:
    """A remembered call: its argument objects (held alive, so their ids cannot be reused), a test
    of whether a call is this one again (``same``), the parsed job, the plan (None: native MPI, then
    ``native`` is the wrapped communicator's bound method) and the selection. An array the call writes
    (its output's memory) made read-only since fails ``same``: the full path refuses it."""

    __slots__ = ("method", "args", "job", "plan", "selection", "native", "key", "go", "same")

    def __init__(self, method: str, args: tuple, job: Job, plan: Any, selection: Any,
                 native: Callable | None, bound: bool = False) -> None:
        self.method, self.args, self.job, self.plan, self.selection = method, args, job, plan, selection
        #: the plan bound to these arrays, a call of no arguments (runners that offer ``bind``), else None
        self.go = plan.bind(job.inp, job.out, job.ufunc) if bound and hasattr(plan, "bind") else None
        writable = tuple(i for i, a in enumerate(args) if type(a) is np.ndarray and job.out.size
                         and np.may_share_memory(a, job.out))
        self.native = native
        self.key = (method, *map(id, args))
        #: ``same(method, args)``: whether a call is this one again (:func:`_matcher`)
        self.same = _matcher(method, args, writable)


def _matcher(method: str, args: tuple, writable: tuple[int, ...]) -> Callable[[str, tuple], bool]:
    """A test of whether a call ``(method, args)`` is this one again: the very same argument objects, each
    array among them with the shape and dtype it has now, the arrays the call writes still writable.

    It is the warm path's only check, made before every repeated call: one expression (as :mod:`dataclasses`
    generates its methods), which costs about half a loop over the arguments. The code is generated once per
    form of call (:func:`_matcher_factory`); each call remembered closes it over its own objects.
    """
    kinds = tuple(2 if i in writable else 1 if type(a) is np.ndarray else 0 for i, a in enumerate(args))
    values: list[Any] = [method]
    for a, kind in zip(args, kinds):
        values += [a, a.shape, a.dtype] if kind else [a]
    return _matcher_factory(kinds)(*values)


@lru_cache(maxsize=256)
def _matcher_factory(kinds: tuple[int, ...]) -> Callable[..., Callable[[str, tuple], bool]]:
    """The generated maker of :func:`_matcher`'s test for calls whose arguments are of ``kinds`` (0: another
    object, 1: an array, 2: an array the call writes): ``make(M, A0, [S0, D0,] A1, ...)``."""
    params, test = ["M"], ["m == M", f"len(t) == {len(kinds)}"]
    for i, kind in enumerate(kinds):
        params.append(f"A{i}")
        test.append(f"t[{i}] is A{i}")
        if kind:
            params += [f"S{i}", f"D{i}"]
    for i, kind in enumerate(kinds):
        if kind:
            test += [f"A{i}.shape == S{i}", f"A{i}.dtype is D{i}"] + ([f"A{i}.flags.writeable"] if kind == 2 else [])
    env: dict[str, Any] = {}
    exec(f"def make({', '.join(params)}):\n    def same(m, t):\n        return " + " and ".join(test)  # noqa: S102
         + "\n    return same\n", env)                # built from names only
    return env["make"]


class WarmCache:
    """The calls remembered for the warm path, least recently used first, and the one made last."""

    def __init__(self) -> None:
        self.recent: OrderedDict[tuple, WarmCall] = OrderedDict()
        self.last: WarmCall | None = None   # the warm call made last, if no call took the full path since

    @property
    def entries(self) -> Mapping[tuple, WarmCall]:
        """The remembered calls, read-only, keyed by ``(method, id(arg), ...)``."""
        return MappingProxyType(self.recent)

    def lookup(self, method: str, args: tuple) -> WarmCall | None:
        """The remembered call made again with the very same argument objects, or None.

        The call used last is tried first, by identity, before the lookup by ids. The same objects with
        the same shapes, dtypes and writability pass every argument check the call passed before, on
        every rank, so the warm path needs none.
        """
        hit = self.last
        if hit is not None and hit.same(method, args):
            return hit
        return self.find(method, args)

    def find(self, method: str, args: tuple) -> WarmCall | None:
        """:meth:`lookup` by ids alone, for a caller that tried the call used last already; the one found
        becomes the last."""
        hit = self.recent.get((method, *map(id, args)))
        if hit is None or not hit.same(method, args):
            return None
        self.recent.move_to_end(hit.key)    # least recently used goes first: fresh-array calls keep a loop's
        self.last = hit
        return hit

    def remember(self, method: str, args: tuple, job: Job, plan: Any, selection: Any,
                 native: Callable | None, bound: bool = False) -> None:
        """Remember a call whose arguments are arrays, IN_PLACE, None, ints or ops, and whose job works on them
        (a non-root's Reduce: its input; its output is the templates' work space).

        ``bound``: bind the plan to the arrays where it can (no timeout: a bound call waits without one).
        Calls whose parser copies into staging space (in-place forms of AlltoAll(V), Allgatherv,
        ReduceScatter(V)), or runs on a staged output, always take the full path.
        """
        arrays = [a for a in args if type(a) is np.ndarray]
        mine = (job.inp,) if job.work_out else (job.inp, job.out)     # a non-root Reduce's output is work space
        if any(b.size and not any(np.may_share_memory(b, a) for a in arrays) for b in mine):
            return
        if all(type(a) is np.ndarray or a is MPI.IN_PLACE or a is None or isinstance(a, (int, MPI.Op)) for a in args):
            warm = WarmCall(method, args, job, plan, selection, native, bound)
            self.recent[warm.key] = warm
            if len(self.recent) > RECENT:
                self.recent.popitem(last=False)
