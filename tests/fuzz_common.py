"""What both fuzzers share (tests/mpi/test_fuzz.py, tests/test_fuzz_sim.py): the emulated layouts, the report."""

from __future__ import annotations

import json
from collections.abc import Callable

from hypothesis import strategies as st


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def draw_layout(draw, n: int, max_cuts: int) -> str:
    """A topology spec of ``n`` ranks without link options: ``1x1xN``, ``1xAxB``, ``PxSxD`` or an
    uneven TopoMeta list (up to ``max_cuts`` server boundaries, grouped into up to three super pods)."""
    kind = draw(st.sampled_from(["flat", "servers", "pods", "meta"]))
    if kind == "flat":
        return f"1x1x{n}"
    if kind == "servers":
        a = draw(st.sampled_from(divisors(n)))
        return f"1x{a}x{n // a}"
    if kind == "pods":
        p = draw(st.sampled_from(divisors(n)))
        s = draw(st.sampled_from(divisors(n // p)))
        return f"{p}x{s}x{n // p // s}"
    cuts = sorted(draw(st.sets(st.integers(1, n - 1), max_size=max_cuts))) if n > 1 else []
    sizes = [b - a for a, b in zip([0] + cuts, cuts + [n])]
    pcuts = sorted(draw(st.sets(st.integers(1, len(sizes) - 1), max_size=2))) if len(sizes) > 1 else []
    pods = [sizes[a:b] for a, b in zip([0] + pcuts, pcuts + [len(sizes)])]
    return json.dumps([[list(range(s)) for s in pod] for pod in pods]).replace(" ", "")


def run_reported(run: Callable[[], None], report: Callable[[str | None], None]) -> None:
    """``run()``, then ``report(failure)`` with the failure's text (hypothesis's falsifying example
    included) or None; the failure is raised again."""
    failure = None
    try:
        run()
    except BaseException as e:
        failure = "\n".join([f"{type(e).__name__}: {str(e)[:2000]}", *getattr(e, "__notes__", [])])
        raise
    finally:
        report(failure)
