"""Build any collective's plan by algorithm name: HCCL's registered names or pyhccl's templates.

``build_plan(call, algo, rank, groups)`` is the one entry point the communicator, the
benchmark and the verifier use. ``algo`` is either a name in HCCL's registry (run through
its executor over the topology's level groups, :mod:`pyhccl.plan.hccl`) or the short name
of one of pyhccl's templates for the op's role (run by the Sole executor over all ranks).
"""

from __future__ import annotations

import difflib
from functools import lru_cache
from typing import Sequence

from ..algo import registry
from ..core.call import HCCL_OPS, Call, canonical_op
from .hccl import NotRunnableError, build_registered, not_runnable_reason
from .ir import Plan
from .sole import ROLE_OF_OP, TABLES, op_steps

__all__ = ["NotRunnableError", "build_plan", "flat_names", "hccl_names", "algorithms", "resolve_name",
           "not_runnable_reason"]


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


@lru_cache(maxsize=4096)
def _build(call: Call, algo: str, rank: int, groups: tuple[tuple[int, ...], ...] | None, uniform: bool) -> Plan:
    name = resolve_name(call.op, algo)
    if name in TABLES[ROLE_OF_OP[call.op]]:
        group = tuple(range(call.nranks))
        steps = op_steps(call, TABLES[ROLE_OF_OP[call.op]][name], rank, group)
    else:
        if groups is None:
            groups = (tuple(range(call.nranks)),)
        steps = build_registered(call, registry.get(name), rank, groups, uniform)
    meta = (("op", call.op), ("algo", name), ("nranks", call.nranks), ("count", call.count),
            ("in_place", call.in_place), ("root", call.root))
    return Plan(rank, tuple(steps), meta)


def build_plan(call: Call, algo: str, rank: int, groups: Sequence[Sequence[int]] | None = None, *,
               uniform: bool = True) -> Plan:
    """Rank ``rank``'s plan for ``call`` with algorithm ``algo``.

    Args:
        call: the collective call (op, ranks, counts, root, in place).
        algo: a pyhccl template name for the op (:func:`flat_names`) or an HCCL registered name
            (:func:`hccl_names`), any case.
        groups: this rank's group per algorithm level, level 0 first (``Layout.algo_groups``);
            default one level of all ranks.
        uniform: every group of a level has the same size (HCCL's symmetric layouts).

    Raises:
        ValueError: unknown name for the op.
        NotRunnableError: a name pyhccl does not run, or a layout its executor cannot take;
            the message says why.
    """
    g = None if groups is None else tuple(tuple(x) for x in groups)
    return _build(call, algo, rank, g, uniform)
