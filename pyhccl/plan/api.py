"""Build any collective's plan by algorithm name: HCCL's registered names or pyhccl's templates.

``build_plan(call, algo, rank, machine)`` is the one entry point the communicator, the
benchmark and the verifier use. ``algo`` is either a name in HCCL's registry (run through
its executor over the machine's level groups, :mod:`pyhccl.plan.hccl`) or the short name
of one of pyhccl's templates for the op's role (run by the Sole executor over all ranks).
"""

from __future__ import annotations

import difflib
from functools import lru_cache
from ..algo import registry
from ..core.call import HCCL_OPS, Call, canonical_op
from . import hccl
from .hccl import NotRunnableError, build_registered, not_runnable_reason
from ..topo.machine import Machine, machine
from .ir import Plan
from .sole import ROLE_OF_OP, TABLES, clear_caches as clear_sole_caches, op_steps, rotates
from .templates import clear_memos, positions

__all__ = ["NotRunnableError", "build_plan", "flat_names", "hccl_names", "algorithms", "resolve_name",
           "not_runnable_reason", "clear_caches", "rotation_built"]


def flat_names(op: str) -> list[str]:
    """pyhccl's one-level templates for ``op`` (pyhccl's names), in listing order."""
    return list(TABLES[ROLE_OF_OP[canonical_op(op)]])


def hccl_names(op: str) -> list[str]:
    """HCCL's registered algorithm names for ``op``, in registration order."""
    name = canonical_op(op)
    return [r.name for r in registry.registrations() if HCCL_OPS.get(r.op) == name]


def algorithms(op: str) -> list[str]:
    """Every name ``build_plan`` accepts for ``op``: pyhccl's templates, then HCCL's names."""
    return flat_names(op) + hccl_names(op)


@lru_cache(maxsize=1024)
def resolve_name(op: str, name: str) -> str:
    """The exact spelling of ``name`` (any case) among :func:`algorithms`.

    Raises:
        ValueError: unknown name; the message lists close matches and the valid names.
    """
    names = algorithms(op)
    for n in names:
        if n.lower() == name.lower():
            return n
    lower = {n.lower(): n for n in names}
    close = [lower[m] for m in difflib.get_close_matches(name.lower(), lower, n=3, cutoff=0.6)]
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise ValueError(f"unknown algorithm {name!r} for {op}{hint}; valid: {', '.join(names)}")


def clear_caches() -> None:
    """Forget the plans built so far and the templates' memoised results (:func:`~.templates.clear_memos`)."""
    _build.cache_clear()
    clear_memos()
    clear_sole_caches()


def _named(call: Call, algo: str) -> tuple[dict, str]:
    """The op's template table, and ``algo``'s name: one of the table's, or HCCL's registered one."""
    table = TABLES[ROLE_OF_OP[call.op]]
    return table, algo if algo in table else resolve_name(call.op, algo)       # cached: no listing per rank


@lru_cache(maxsize=4096)
def _build(call: Call, algo: str, rank: int, topo: str | None) -> Plan:
    table, name = _named(call, algo)
    if name in table:
        steps = op_steps(call, table[name], rank, positions(call.nranks))
    else:
        reg = registry.get(name)
        if topo is None:
            steps = build_registered(call, reg, rank, (positions(call.nranks),), True)
        else:
            m = machine(topo)
            steps = build_registered(call, reg, rank, m.groups(rank, len(reg.levels)), m.uniform)
    meta = (("op", call.op), ("algo", name), ("nranks", call.nranks), ("count", call.count),
            ("in_place", call.in_place), ("root", call.root))
    return Plan(rank, tuple(steps), meta)


def rotation_built(call: Call, algo: str) -> bool:
    """Whether :func:`build_plan` makes every rank's plan for ``call`` with ``algo`` as rank 0's moved on by its
    rank (its peers and its blocks: :func:`~.templates.alltoall.moved_on`), on any machine: then rank 0's plan
    stands for every rank's, rotated, by construction (the simulator's rank-0 run past a few hundred ranks)."""
    table, name = _named(call, algo)
    if name in table:
        return rotates(call, table[name], positions(call.nranks))
    return hccl.rotation_built(call, registry.get(name))


def build_plan(call: Call, algo: str, rank: int, machine: Machine | None = None) -> Plan:
    """Rank ``rank``'s plan for ``call`` with algorithm ``algo``.

    Args:
        call: the collective call (op, ranks, counts, root, in place).
        algo: a pyhccl template name for the op (:func:`flat_names`) or an HCCL registered name
            (:func:`hccl_names`), any case.
        rank: the rank whose plan to build.
        machine: the machine ``call`` runs on (:func:`pyhccl.topo.machine`): an HCCL name runs
            over ``rank``'s group per level of it (``Machine.groups``); None: one flat level of
            all ranks. pyhccl's templates run over all ranks either way.

    Raises:
        ValueError: unknown name for the op.
        NotRunnableError: a name pyhccl does not run, or a layout its executor cannot take;
            the message says why.
    """
    return _build(call, algo, rank, None if machine is None else machine.text)
