"""The template tables remember recent results: equal arguments give equal steps, and a caller that
edits the list it got does not edit what the next caller gets."""

from pyhccl.plan.ir import Buf, Region
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
