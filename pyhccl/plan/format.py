"""Print plans as a step x rank grid, with an optional marker on one cell."""

from __future__ import annotations

from typing import Sequence

from .ir import Plan

__all__ = ["format_plans"]

_WIDTH = 36


def format_plans(plans: Sequence[Plan], mark: tuple[int, int] | None = None, *,
                 max_ranks: int = 8, max_steps: int = 32) -> str:
    """A grid with one row per step and one column per rank.

    ``mark = (step, rank)`` puts ``<-- ERROR HERE`` on that row and shows that rank's column
    even when it lies beyond ``max_ranks``.
    """
    ranks = list(range(min(len(plans), max_ranks)))
    if mark is not None and mark[1] < len(plans) and mark[1] not in ranks:
        ranks.append(mark[1])
    nsteps = max((len(p.steps) for p in plans), default=0)
    rows = list(range(min(nsteps, max_steps)))
    if mark is not None and mark[0] < nsteps and mark[0] not in rows:
        rows.append(mark[0])
    head = "step | " + " | ".join(f"rank {r}".ljust(_WIDTH) for r in ranks)
    lines = [head, "-" * len(head)]
    for t in rows:
        cells = []
        for r in ranks:
            steps = plans[r].steps
            text = str(steps[t]) if t < len(steps) else ""
            if len(text) > _WIDTH:
                text = text[:_WIDTH - 3] + "..."
            cells.append(text.ljust(_WIDTH))
        line = f"{t:4d} | " + " | ".join(cells)
        if mark is not None and mark[0] == t:
            line += f"  <-- ERROR HERE (rank {mark[1]})"
        lines.append(line)
    if len(rows) < nsteps:
        lines.append(f" ... {nsteps - len(rows)} more steps")
    if len(ranks) < len(plans):
        lines.append(f" ... {len(plans) - len(ranks)} more ranks")
    return "\n".join(lines)
