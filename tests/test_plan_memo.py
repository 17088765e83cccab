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


def _roles():
    for role in ("AR", "RS", "AG", "SCATTER", "GATHER", "BCAST", "REDUCE"):
        for name in getattr(templates, role):
            yield role, name


@pytest.mark.parametrize("role, name", list(_roles()))
def test_a_template_run_from_offset_0_and_moved_is_the_template_run_where_its_data_are(role, name):
    """The memo runs a template on data from offset 0 and moves the data's regions where they are (every
    level-1 group of a super pod shares one run per position): equal, region for region, to running it there.
    Data in scratch is moved where it lies below the template's own scratch (and only its regions there), slices
    of unequal sizes at scattered offsets (VSlices) too."""
    from pyhccl.plan.slices import VSlices
    table = getattr(templates, role)
    raw = table[name].__wrapped__
    rooted = role in ("SCATTER", "GATHER", "BCAST", "REDUCE")
    n = 5
    datas = [Region(Buf.OUTPUT, off, count) for off in (0, 13, 4096) for count in (1, 7, 1001)]
    datas += [Region(Buf.INPUT, 29, 1001), Region(Buf.SCRATCH, 13, 7), Region(Buf.SCRATCH, 29, 35),
              Region(Buf.SCRATCH, 40, 1001)]
    slices = [Slices.floor_tail(off, count, n) for off in (0, 13, 4096) for count in (1, 7, 1001)]
    slices += [Slices.ceil(31, 1001, n), VSlices((40, 9, 100, 77, 60), (3, 0, 11, 5, 2)),
               VSlices((24, 28, 32, 36, 40), (2, 2, 2, 2, 2), 3, 20)]
    group = (3, 67, 131, 195, 259)
    checked = 0
    for pos in range(n):
        for root in ((0, 3) if rooted else (None,)):
            lead = (group, pos) if root is None else (group, pos, root)
            if role in ("AR", "BCAST", "REDUCE"):
                calls = [(lead + (d,), {"scratch": 64}) for d in datas]
            else:
                calls = [(lead + (s,), {"buf": buf, "scratch": 2000}) for s in slices
                         for buf in (Buf.OUTPUT, Buf.SCRATCH, Buf.INPUT)]
            for args, kw in calls:
                try:
                    want = raw(*args, **kw)
                except (ValueError, NotImplementedError):
                    continue
                assert table[name](*args, **kw) == want, (args, kw)
                checked += 1
    assert checked
