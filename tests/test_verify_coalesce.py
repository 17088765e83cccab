"""How the grid is cut changes nothing the simulator reports: atoms merged between steps (coalescing) and a grid
cut step by step where each step moves data, not all up front.

Long plans (NHRAicpuReduce's N passes, uneven counts) with faults injected at late steps run with the atoms
merged before every step, cut step by step, or both, and with the grid cut up front and never merged; the
outcome, the step, the rank, the message and the first wrong range must be the same.
"""

from dataclasses import replace

import numpy as np
import pytest

from pyhccl.core.call import Call
from pyhccl.plan import build_plan
from pyhccl.plan.ir import Kind, Region
from pyhccl.verify import atoms, quotient, sim, verify
from pyhccl.verify.api import forget_plans
from pyhccl.verify.cases import LARGE_COUNT
from pyhccl.verify.atoms import Grid
from pyhccl.verify.sim import SimulationError, simulate
from test_verify_sim import edit          # one plan's step rewritten (tests/test_verify_sim.py)


def _values(g: Grid, lo: int, hi: int) -> list[tuple[int, ...]]:
    """(card, key, origin, writer) of every key in [lo, hi)."""
    out = []
    for x in range(lo, hi):
        a = int(np.searchsorted(g.keys, x, side="right")) - 1
        out.append((int(g.card[a]), int(g.key[a]), int(g.origin[a] + x - g.keys[a]), int(g.writer[a])))
    return out


@pytest.fixture(autouse=True)
def _any_grid(monkeypatch):
    """Merge grids of any size (the simulator leaves those under 2^16 atoms alone)."""
    monkeypatch.setattr(atoms, "_COALESCE_ABOVE", 0)


def test_coalesce_merges_only_what_continues():
    g = Grid(np.array([0, 2, 4, 6, 8, 10, 12, 14]), use_mask=False)
    g.card[:] = [1, 1, 1, 1, 0, 2, 2, 2]
    g.key[:] = [5, 5, 5, 7, 0, 9, 9, 9]
    g.origin[:] = [0, 2, 9, 11, 0, 1, 3, 5]    # 2 does not continue 1's origins; 3 holds other ranks; 4 no data
    g.writer[:] = [0, 0, 0, 0, -1, 1, 1, 1]       # (-1: written by no step: a rank's input, or no data)
    before = _values(g, 0, 16)
    assert g.coalesce(np.array([0, 12])) == 2       # 1 into 0, 7 into 6; not 6 into 5 (12 is a bound)
    assert g.keys.tolist() == [0, 4, 6, 8, 10, 12] and g.loose
    assert _values(g, 0, 16) == before


def test_coalesce_merges_data_that_other_steps_wrote():
    """The last writer is only reported: atoms holding one run of data merge whoever wrote them, keeping the
    first's writer (a wrong output is reported from a run that merged nothing: :func:`sim.simulate`)."""
    g = Grid(np.array([0, 2, 4, 6]), use_mask=False)
    g.card[:3], g.key[:3], g.origin[:3], g.writer[:3] = 1, 5, [0, 2, 4], [3, 7, 9]
    assert g.coalesce(np.array([0, 6])) == 2 and g.keys.tolist() == [0, 6]
    assert _values(g, 0, 6) == [(1, 5, x, 3) for x in range(6)]


def test_a_coalesced_grid_cuts_again_where_a_move_needs_it():
    g = Grid(np.array([0, 4, 8, 12]), use_mask=False)
    g.card[:3] = 1
    g.key[:3] = 5
    g.origin[:3] = [0, 4, 8]
    g.writer[:3] = 2
    assert g.coalesce(np.array([0, 12])) == 2 and g.keys.tolist() == [0, 12]
    s, d, m, shift = g.pair(atoms.Moves(np.array([2]), np.array([3]), np.array([1]), np.array([0])),
                            atoms.Moves(np.array([6]), np.array([3]), np.array([1]), np.array([0])))
    assert g.keys.tolist() == [0, 2, 5, 6, 9, 12]
    assert g.keys[s].tolist() == [2] and g.keys[d].tolist() == [6] and shift is None


def _calls():
    n = 6
    counts = (3, 0, 5, 1, 4, 2)
    return [(Call("reduce_scatter", n, 3), "NHRAicpuReduce"),
            (Call("reduce_scatter_v", n, counts=counts), "NHRAicpuReduce"),
            (Call("reduce_scatter_v", n, counts=(2, 7, 1, 0, 3, 5)), "NHRAicpuReduce"),
            (Call("allreduce", n, 7), "Ring")]


def _faults(plans):
    """(name, plans) with one fault each, at steps past the first coalesce."""
    n, steps = len(plans), len(plans[0].steps)
    for t in range(steps // 2, steps, max(1, steps // 8)):
        r = t % n
        st = plans[r].steps[t]
        if st.local:
            yield f"drop locals r{r} s{t}", edit(plans, r, t, local=lambda ops: ())
            yield f"double locals r{r} s{t}", edit(plans, r, t, local=lambda ops: ops + ops)
            yield f"swap local sides r{r} s{t}", edit(plans, r, t, local=lambda ops: [replace(a, src=a.dst, dst=a.src)
                                                                                   for a in ops])
        if st.transfers:
            yield f"drop transfers r{r} s{t}", edit(plans, r, t, transfers=lambda xs: ())
            yield f"shift receives r{r} s{t}", edit(plans, r, t, transfers=lambda xs: [
                replace(a, dst=Region(a.dst.buf, a.dst.offset + 1, a.dst.count)) if a.kind is Kind.RECV else a
                for a in xs])


def _outcome(plans, call, monkeypatch, every=1 << 30, by_step=False, rest=1):
    monkeypatch.setattr(sim, "_COALESCE_EVERY", every)
    monkeypatch.setattr(atoms, "_WORTH", 0.0)
    monkeypatch.setattr(sim, "_CUT_BY_STEP", 0 if by_step else 1 << 40)
    monkeypatch.setattr(sim, "_CUT_WIDTH", 0)
    monkeypatch.setattr(sim, "_CUT_REST", rest)
    try:
        simulate(plans, call)
    except SimulationError as e:
        first = e.mismatches[0] if e.mismatches else None
        return "error", e.step, e.rank, str(e).splitlines()[0], first and (first.rank, first.lo, first.expected,
                                                                          first.got)
    except (ValueError, AssertionError) as e:
        return type(e).__name__, str(e)
    return ("ok",)


#: How the grid may be cut and merged; each must report what the grid cut once up front and never merged does.
_MODES = {"merged before every step": dict(every=1),
          "cut by step": dict(by_step=True),
          "cut by step, merged before every step": dict(by_step=True, every=1),
          "cut by step, the rest at once past an eighth": dict(by_step=True, every=1, rest=8)}


@pytest.mark.parametrize("mode", _MODES)
@pytest.mark.parametrize("call, algo", _calls(), ids=lambda x: getattr(x, "op", x))
def test_faults_are_reported_alike_however_the_grid_is_cut(call, algo, mode, monkeypatch):
    plans = [build_plan(call, algo, r) for r in range(call.nranks)]
    assert len(plans[0].steps) > 8
    gone, sizes = [], []
    real, cut = Grid.coalesce, sim._Sim.cut
    monkeypatch.setattr(Grid, "coalesce", lambda g, keep: gone.append(real(g, keep)) or gone[-1])
    monkeypatch.setattr(sim._Sim, "cut", lambda s, t: sizes.append(len(s.g.keys)) or cut(s, t))
    assert _outcome(plans, call, monkeypatch, **_MODES[mode]) == ("ok",)
    if _MODES[mode].get("every") == 1:
        assert sum(gone) > 0            # atoms were merged
    if _MODES[mode].get("by_step"):
        assert len(set(sizes)) >= 2     # the grid grew step by step
    seen = set()
    for name, bad in _faults(plans):
        plain = _outcome(bad, call, monkeypatch)
        assert _outcome(bad, call, monkeypatch, **_MODES[mode]) == plain, name
        seen.add(plain[0])
    assert "error" in seen          # (some faults are harmless: a copy done twice, a receive nobody reads)


@pytest.mark.parametrize("op, topo, count, algo, by_step", [
    ("allreduce", "1x32x32", LARGE_COUNT, None, True),      # the level-0 reduce-scatter's blocks, split by the NHR after
    ("allgather", "1x32x32", LARGE_COUNT, None, False),
    ("reduce_scatter", "1x32x32", 1000, None, False),
    ("allreduce", "1x1x1024", LARGE_COUNT, "NHR", False),   # every NHR step cuts every slice: nothing to wait for
])
def test_the_grid_is_cut_by_step_where_pieces_would_hold_several_atoms(op, topo, count, algo, by_step, monkeypatch):
    monkeypatch.setattr(sim, "_CUT_BY_STEP", 0)         # (the plans' size alone would leave these cut up front)
    monkeypatch.setattr(quotient, "QUOTIENT_MIN_RANKS", 1 << 40)     # (the grid's policy: no rank-0 shortcut)
    chose = []
    real = sim._Sim.cut_finer
    monkeypatch.setattr(sim._Sim, "cut_finer", lambda s, r, e: chose.append(real(s, r, e)) or chose[-1])
    forget_plans()
    assert verify(op, topo, count=count, algo=algo).ok
    assert chose == [by_step]
