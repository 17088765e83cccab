"""The simulator finds what is wrong: missing, double-counted, unmatched, overlapping, out of bounds."""

from dataclasses import replace

import pytest

from pyhccl.core.call import get_opspec
from pyhccl.core.call import Call
from pyhccl.plan import Buf, Plan, Region, Step, build_plan
from pyhccl.plan.ir import Action, Kind, copy, recv, reduce, send
from pyhccl.verify.sim import SimulationError, simulate

AR = get_opspec("allreduce")


def nhr(n=5, c=13):
    return [build_plan(Call("allreduce", n, c), "NHR", r) for r in range(n)]


def edit(plans, rank, step, transfers=None, local=None):
    p = plans[rank]
    st = p.steps[step]
    steps = list(p.steps)
    steps[step] = Step(st.transfers if transfers is None else tuple(transfers(st.transfers)),
                       st.local if local is None else tuple(local(st.local)))
    out = list(plans)
    out[rank] = replace(p, steps=tuple(steps))
    return out


def test_passes_and_reports():
    rep = simulate(nhr(), AR, 13)
    assert rep.nranks == 5 and rep.rounds == 6 and rep.max_elements_sent > 0


def test_missing_contribution_is_named():
    bad = edit(nhr(), 2, 2, local=lambda ops: ops[1:])
    with pytest.raises(SimulationError, match=r"output ranges wrong.*expected ranks \{0,1,2,3,4\}") as e:
        simulate(bad, AR, 13)
    m = e.value.mismatches[0]
    assert m.expected.startswith("ranks {0,1,2,3,4}") and "ERROR HERE" in str(e.value)


def test_double_count_caught_at_its_step():
    bad = edit(nhr(), 2, 2, local=lambda ops: ops + ops[:1])
    with pytest.raises(SimulationError, match=r"step 2, rank 2: .* counts the contribution of ranks") as e:
        simulate(bad, AR, 13)
    assert (e.value.step, e.value.rank) == (2, 2)


def test_unmatched_send_and_size_mismatch():
    bad = edit(nhr(), 2, 2, transfers=lambda xs: xs[1:])
    with pytest.raises(SimulationError, match="sends and receives must match in number, order and size"):
        simulate(bad, AR, 13)
    plans = [Plan(0, (Step((send(1, Region(Buf.INPUT, 0, 2)),)),)),
             Plan(1, (Step((recv(0, Region(Buf.OUTPUT, 0, 3)),)),))]
    with pytest.raises(SimulationError, match=r"rank 0 sends \[in\[0:2\]\] to rank 1, which receives \[out\[0:3\]\]"):
        simulate(plans, AR, 4)


def test_structural_errors():
    o = Region(Buf.OUTPUT, 0, 4)
    cases = [
        ([Plan(0, (Step((send(0, o),)),))], "names peer 0"),
        ([Plan(0, (Step((Action(Kind.SEND, None, o),)),))], "names peer None"),       # read one at a time
        ([Plan(0, (Step((), (Action("Z", None, Region(Buf.INPUT, 0, 4), o),)),))], "is not a local operation"),
        ([Plan(0, (Step((), (copy(Region(Buf.OUTPUT, 2, 4), Region(Buf.INPUT, 0, 4)),)),))], "out of bounds"),
        ([Plan(0, (Step((), (copy(o, Region(Buf.SCRATCH, 0, 4)),)),))], "holds no data yet"),
        ([Plan(0, (Step((), (reduce(o, Region(Buf.INPUT, 0, 4)),)),))], "holds no data yet"),
        ([Plan(0, (Step((), (copy(o, Region(Buf.INPUT, 0, 3)),)),))], "3 source and 4 destination"),
    ]
    for plans, match in cases:
        with pytest.raises(SimulationError, match=match):
            simulate(plans, AR, 4)


def test_receive_into_what_is_sent_in_the_same_step():
    i, o = Region(Buf.INPUT, 0, 4), Region(Buf.OUTPUT, 0, 4)
    first = Step(local=(copy(o, i),))
    plans = [Plan(r, (first, Step((send(1 - r, o), recv(1 - r, o))))) for r in range(2)]
    with pytest.raises(SimulationError, match="which it sends in the same step"):
        simulate(plans, AR, 4)
    plans = [Plan(0, (first, Step((recv(1, o), recv(1, o))))), Plan(1, (first, Step((send(0, o), send(0, o)))))]
    with pytest.raises(SimulationError, match="another receive of this step also writes"):
        simulate(plans, AR, 4)


def test_wrong_origin_index():
    """Reducing element i of one rank with element j of another is caught."""
    plans = []
    for r in range(2):
        steps = (Step(local=(copy(Region(Buf.OUTPUT, 0, 4), Region(Buf.INPUT, 0, 4)),)),
                 Step((send(1 - r, Region(Buf.OUTPUT, 0, 2)), recv(1 - r, Region(Buf.SCRATCH, 0, 2))),
                      (reduce(Region(Buf.OUTPUT, 2 * r, 2), Region(Buf.SCRATCH, 0, 2)),)))
        plans.append(Plan(r, steps))
    with pytest.raises(SimulationError, match="different origin indices"):
        simulate(plans, AR, 4)


def test_misaligned_regions_are_split_not_rejected():
    """Sender and receiver may cut the same data differently; the atoms are refined."""
    i, o = Region(Buf.INPUT, 0, 6), Region(Buf.OUTPUT, 0, 6)
    s0 = Step(local=(copy(o, i),))
    plans = [Plan(0, (s0, Step((send(1, Region(Buf.OUTPUT, 0, 6)), recv(1, Region(Buf.SCRATCH, 0, 6))),
                               (reduce(o, Region(Buf.SCRATCH, 0, 6)),)))),
             Plan(1, (s0, Step((send(0, Region(Buf.OUTPUT, 0, 6)), recv(0, Region(Buf.SCRATCH, 0, 2, 3, 3))),
                               (reduce(o, Region(Buf.SCRATCH, 0, 6)),))))]
    with pytest.raises(SimulationError, match="holds no data yet"):   # rank 1 receives with gaps, reads a gap
        simulate(plans, AR, 6)
    plans[1] = Plan(1, (s0, Step((send(0, Region(Buf.OUTPUT, 0, 6)), recv(0, Region(Buf.SCRATCH, 0, 6))),
                                 (reduce(Region(Buf.OUTPUT, 0, 3), Region(Buf.SCRATCH, 0, 3)),
                                  reduce(Region(Buf.OUTPUT, 3, 3), Region(Buf.SCRATCH, 3, 3))))))
    simulate(plans, AR, 6)


def test_keys_cover_the_sum_of_a_ranks_buffers_not_three_times_its_largest():
    """A ReduceScatter whose input, output and scratch (N c, c and 2 N c elements) sum to less than 2^62 / N keys
    a rank is simulated (its largest buffer three times over would not fit); one step larger is refused."""
    c = 5 * 10**16
    call = Call("reduce_scatter", 4, c)
    rep = simulate([build_plan(call, "Mesh", r) for r in range(4)], call)
    assert rep.max_elements_sent == 3 * c
    big = Call("reduce_scatter", 4, 2 * c)
    with pytest.raises(ValueError, match=r"ranks x \(input \+ output \+ scratch elements\) < 2\^62 .* use a "
                                         r"smaller count"):
        simulate([build_plan(big, "Mesh", r) for r in range(4)], big)


def test_large_rank_count_is_region_based():
    n, c = 1024, 10**10
    rep = simulate([build_plan(Call("allreduce", n, c), "NHR", r) for r in range(n)], AR, c)
    assert rep.rounds == 20 and rep.atoms <= 3 * n * n      # per rank: one atom per slice and buffer


def test_an_output_atom_right_up_to_the_next_block_is_wrong_there():
    # AlltoAll of 1 element per block on 2 ranks: rank 0 copies its whole input to its output, so its
    # block 1 holds its own input[1], not rank 1's input[0]; one atom covers both blocks (nothing cuts
    # rank 0's input or output at 1)
    call = Call("alltoall", 2, 1)
    inp, out = (lambda o, c=1: Region(Buf.INPUT, o, c)), (lambda o, c=1: Region(Buf.OUTPUT, o, c))
    scr = lambda o, c=1: Region(Buf.SCRATCH, o, c)                    # noqa: E731
    plans = [Plan(0, (Step((send(1, inp(0, 2)),), (copy(out(0, 2), inp(0, 2)),)),)),
             Plan(1, (Step((recv(0, scr(0, 2)),), (copy(out(0), scr(1)), copy(out(1), inp(1)))),))]
    with pytest.raises(SimulationError, match=r"1 output ranges wrong; first: rank 0 out\[1:2\]: expected ranks "
                                              r"\{1\} of input index -1, got ranks \{0\} of input index \+0"):
        simulate(plans, call)
