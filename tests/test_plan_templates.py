"""Every template through the simulator, and the reference's step and byte counts."""

import os
from pathlib import Path

import pytest

from pyhccl.core.call import Call, get_opspec
from pyhccl.plan import ALLREDUCE_ALGOS, build_plan, format_plans
from pyhccl.plan.ir import Kind
from pyhccl.plan.templates import nhr_step_count
from pyhccl.verify.sim import simulate

GOLDEN = Path(__file__).parent / "golden"
RANKS = sorted(set(range(1, 18)) | {24, 31, 32, 33, 48, 63, 64})   # all small N, powers of two and neighbours


def counts(n):
    """0, 1, N-1, N, two primes (one above ten billion)."""
    return sorted({0, 1, max(n - 1, 0), n, 7919, 10_000_000_019})


def _sim_allreduce(algo, n, c, in_place=False):
    plans = [build_plan(Call("allreduce", n, c, in_place=in_place), algo, r) for r in range(n)]
    return simulate(plans, get_opspec("allreduce"), c, in_place=in_place)


@pytest.mark.parametrize("algo", ALLREDUCE_ALGOS)
def test_allreduce_simulates(algo):
    # MeshChunk has N-1 rounds of N-1 chunks per rank (N^3 actions): HCCL picks it for few ranks
    for n in RANKS if algo not in ("MeshChunkTwoShot", "NHRAicpuReduce") else [n for n in RANKS if n <= 24]:
        for c in counts(n):
            _sim_allreduce(algo, n, c)
        _sim_allreduce(algo, n, 2 * n + 1, in_place=True)


@pytest.mark.parametrize("form", ["Mesh", "NHR", "Ring"])
def test_reduce_scatter_and_all_gather_simulate(form):
    for n in RANKS:
        for c in (0, 1, 3, 7919):
            simulate([build_plan(Call("reduce_scatter", n, c), form, r) for r in range(n)], get_opspec("reduce_scatter"), c)
            simulate([build_plan(Call("all_gather", n, c), form, r) for r in range(n)], get_opspec("all_gather"), c)


def _slice_sets(plan, kind):
    """Per communication step: (peer, sorted slice indices), one element per slice."""
    out = []
    for st in plan.steps:
        acts = [a for a in st.transfers if a.kind is kind]
        if not st.transfers:
            continue
        peers = {a.peer for a in acts}
        idx = sorted(o for a in acts for o, _ in (a.src if kind is Kind.SEND else a.dst).pieces())
        out.append((peers.pop() if len(peers) == 1 else None, idx))
    return out


def test_nhr_worked_example_n5():
    """hccl-templates.md 1.2, N = 5 from rank 0: the RS table then the AG table."""
    p = build_plan(Call("allreduce", 5, 5), "NHR", 0)          # one element per slice: offset = slice index
    assert _slice_sets(p, Kind.SEND) == [(4, [2, 4]), (3, [3]), (1, [1]),     # RS: 0->4 {4,2}, 0->3 {3}, 0->1 {1}
                                         (4, [0]), (2, [0]), (1, [0, 3])]     # AG: {r} to r+4, r+2; {r, r-2} to r+1
    assert _slice_sets(p, Kind.RECV) == [(1, [0, 3]), (2, [0]), (4, [0]),     # RS: 1->0 {0,3}, 2->0 {0}, 4->0 {0}
                                         (1, [1]), (3, [3]), (4, [2, 4])]     # AG: gets {1}, {3}, {4,2}


@pytest.mark.parametrize("n", [2, 3, 4, 5, 7, 8, 12, 16, 33])
def test_step_and_byte_counts(n):
    c = n * 24 * (1 << n.bit_length())            # divisible by n and by its power-of-two floor
    s = nhr_step_count(n)
    assert s == (n - 1).bit_length()
    expect = {
        "MeshOneShot": (1, (n - 1) * c),
        "MeshTwoShot": (2, 2 * (n - 1) * c // n),
        "NHR": (2 * s, 2 * (n - 1) * c // n),
        "Ring": (2 * (n - 1), 2 * (n - 1) * c // n),
    }
    for algo, (rounds, sent) in expect.items():
        for r in range(n):
            p = build_plan(Call("allreduce", n, c), algo, r)
            assert (p.step_count, p.count_sent()) == (rounds, sent), (algo, r)
    p2 = 1 << (n.bit_length() - 1)
    k = p2.bit_length() - 1
    extra = n - p2
    for r in range(n):
        p = build_plan(Call("allreduce", n, c), "RHD", r)
        if r < 2 * extra and r % 2:             # folded: sends once, receives once
            assert (p.step_count, p.count_sent()) == (2, c)
        else:
            halving = 2 * (p2 - 1) * (c // p2)
            assert p.step_count == 2 * k + (2 if r < 2 * extra else 0)
            assert p.count_sent() == halving + (c if r < 2 * extra else 0)


def test_nhr_first_step_goes_to_nearest_neighbour():
    for n in (5, 8, 13):
        p = build_plan(Call("allreduce", n, n), "NHR", 3)
        first = next(s for s in p.steps if s.transfers)
        sends = [a for a in first.transfers if a.kind is Kind.SEND]
        assert {a.peer for a in sends} == {2}
        assert sum(a.src.size for a in sends) == n // 2


def _golden_text(algo):
    plans = [build_plan(Call("allreduce", 4, 10), algo, r) for r in range(4)]
    return "\n\n".join(p.describe() for p in plans) + "\n\n" + format_plans(plans) + "\n"


@pytest.mark.parametrize("algo", ALLREDUCE_ALGOS)
def test_golden_plans(algo):
    path = GOLDEN / f"allreduce_{algo}_n4_c10.txt"
    text = _golden_text(algo)
    if os.environ.get("PYHCCL_REGEN_GOLDEN"):
        path.write_text(text)
    assert path.read_text() == text, f"plan changed: rerun with PYHCCL_REGEN_GOLDEN=1 and review {path}"
