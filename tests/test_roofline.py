"""The one-host roofline of the benchmark (pyhccl.bench.roofline): the bytes each op must move, the bound."""

import pytest
from mpi4py import MPI

from pyhccl.bench.roofline import Roofline, bound_bytes, bound_seconds, measure
from pyhccl.core.call import OPS

MIB = 1 << 20


def test_allreduce_bytes_are_a_reduce_scatter_and_an_allgather():
    # 2 ranks, 16 MiB: reduce 2 halves (read 16 MiB) into one (write 8 MiB); read and write the other half
    assert bound_bytes("allreduce", 2, 16 * MIB) == (24 * MIB, 16 * MIB)
    # 4 ranks: read 4 quarters, write one; copy 3 quarters in
    assert bound_bytes("allreduce", 4, 16 * MIB) == (20 * MIB, 24 * MIB)


def test_other_ops():
    assert bound_bytes("reduce_scatter", 4, 16 * MIB) == (20 * MIB, 0)
    assert bound_bytes("all_gather", 8, 16 * MIB) == (0, 32 * MIB)
    assert bound_bytes("alltoall", 8, 16 * MIB) == (0, 32 * MIB)
    assert bound_bytes("broadcast", 3, MIB) == (0, 2 * MIB)
    assert bound_bytes("reduce", 2, MIB) == (3 * MIB, 0)
    assert bound_bytes("scatter", 4, 4 * MIB) == (0, 2 * MIB)
    assert bound_bytes("allreduce", 1, MIB) == (0, 0)


def test_every_op_has_a_bound():
    for op in set(OPS) - {"barrier"}:
        red, cp = bound_bytes(op, 4, MIB)
        assert red + cp > 0, op
    with pytest.raises(ValueError, match="expecting a collective"):
        bound_bytes("allscatter", 2, 8)


def test_bound_seconds_prices_reduce_and_copy_bytes_at_their_rates():
    roof = Roofline(copy=10e9, reduce=6e9, nranks=2)
    assert bound_seconds("allreduce", 2, 16 * MIB, roof) == pytest.approx(24 * MIB / 6e9 + 16 * MIB / 10e9)


def test_measure_on_one_rank():
    roof = measure(MPI.COMM_SELF, 1 * MIB)
    assert roof.copy > 0 and roof.reduce > 0 and roof.nranks == 1 and "GB/s" in roof.describe()
