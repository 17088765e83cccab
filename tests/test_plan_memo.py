"""The template tables remember recent results: equal arguments give equal steps, and a caller that
edits the list it got does not edit what the next caller gets."""

import pytest

from pyhccl.plan import templates
from pyhccl.plan.ir import Buf, Region
from pyhccl.plan.slices import Slices
from pyhccl.plan.templates import AR, allreduce_nhr


def test_equal_arguments_equal_steps_fresh_lists():
    group, data = tuple(range(6)), Region(Buf.OUTPUT, 0, 1001)
    first = AR["NHR"](group, 3, data, scratch=0)
    assert first == allreduce_nhr(group, 3, data, scratch=0)      # the table's function is the template's
    first.clear()
    again = AR["NHR"](group, 3, data, scratch=0)
    assert again == allreduce_nhr(group, 3, data, scratch=0) and again


def test_other_arguments_other_steps():
    group, data = tuple(range(6)), Region(Buf.OUTPUT, 0, 1001)
    assert AR["NHR"](group, 3, data, scratch=0) != AR["NHR"](group, 4, data, scratch=0)
    assert AR["NHR"](group, 3, data, scratch=0) != AR["NHR"](group, 3, data, scratch=2000)


def test_unhashable_arguments_still_build():
    data = Region(Buf.OUTPUT, 0, 1001)
    assert AR["NHR"](list(range(6)), 3, data, scratch=0) == allreduce_nhr(tuple(range(6)), 3, data, scratch=0)


@pytest.mark.parametrize("role, name", [("AR", "NHR"), ("AR", "MeshTwoShot"), ("RS", "Mesh"), ("AG", "NHR"),
                                        ("SCATTER", "Mesh")])
def test_a_group_of_ranks_gets_the_positions_run_with_its_peers(role, name):
    """The memo runs a template on positions 0..n-1 and renames the peers: equal to running it on the ranks."""
    table = getattr(templates, role)
    raw = table[name].__wrapped__
    data = Region(Buf.OUTPUT, 7, 1001)
    for group in [(5, 6, 7, 8, 9), (3, 67, 131, 195, 259), (4, 0, 2, 1, 3)]:
        for pos in range(len(group)):
            if role == "AR":
                args, kw = (group, pos, data), {"scratch": 64}
            elif role == "SCATTER":
                args, kw = (group, pos, 2, Slices.floor_tail(7, 1001, 5)), {"buf": Buf.OUTPUT, "scratch": 64}
            else:
                args, kw = (group, pos, Slices.floor_tail(7, 1001, 5)), {"buf": Buf.OUTPUT, "scratch": 64}
            assert table[name](*args, **kw) == raw(*args, **kw), (group, pos)


def test_the_plans_kept_are_of_one_op_on_one_machine():
    """verify keeps one (op, machine)'s plans for the next calls, and drops them when either changes: a sweep's
    worker (or a caller's loop over machines) holds one group's plans, not every group's."""
    import pyhccl.plan.api as plan_api
    import pyhccl.verify.api as verify_api
    from pyhccl.verify.sweep import Task, run_tasks

    def kept():
        return (plan_api._build.cache_info().currsize, len(verify_api._PASSED),
                sum(m.cache_info().currsize for m in templates._MEMOS))

    verify_api.forget_plans()                    # whatever earlier tests kept
    first = [Task("allreduce", a, "1x1x6", counts=(1001,)) for a in ("NHR", "Ring", "AicpuAllReduceSoleMeshTwoShot")]
    assert [o.statuses["ok"] for o in run_tasks(first)] == [2, 2, 2]
    plans, passed, memos = kept()
    assert plans == 6 * 2 * 3 and passed and memos                  # kept for the same op and machine
    [o] = run_tasks([Task("allreduce", "NHR", "1x1x5", counts=(7,))])  # another machine: the first group's go
    assert o.statuses["ok"] == 2
    assert kept()[0] == 5 * 2
    assert len(templates._MEMOS) > 10            # every memoised table's caches are known
