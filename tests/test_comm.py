"""The Communicator in one process: settings, every method on one rank, argument errors, fallbacks, the bench."""

import gc
import weakref

import numpy as np
import pytest
from mpi4py import MPI

import pyhccl
import pyhccl.comm.agree
from pyhccl.bench import main as bench_main
from pyhccl.plan.api import NotRunnableError, flat_names


class DLPackOnly:
    """An object that offers its memory only through DLPack."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_algo_from_argument_env_and_rule(monkeypatch):
    monkeypatch.delenv("PYHCCL_ALGO", raising=False)
    assert pyhccl.Communicator(MPI.COMM_SELF).algo is None
    assert pyhccl.Communicator(MPI.COMM_SELF, algo="AicpuAllReduceSoleNHR").algo == "AicpuAllReduceSoleNHR"
    monkeypatch.setenv("PYHCCL_ALGO", "ring")
    assert pyhccl.Communicator(MPI.COMM_SELF).algo == "Ring"
    monkeypatch.setenv("PYHCCL_ALGO", "Rign")
    with pytest.raises(ValueError, match="unknown template 'Rign' in PYHCCL_ALGO.*or one of pyhccl's templates: "
                                         "MeshOneShot"):
        pyhccl.Communicator(MPI.COMM_SELF)


def test_selection_runs_and_explains():
    c = pyhccl.Communicator(MPI.COMM_SELF, topo="1x1x1")
    out = np.zeros(4, np.float32)
    c.Allreduce(np.ones(4, np.float32), out)
    sel = c.last_selection
    assert np.array_equal(out, np.ones(4)) and sel is not None and sel.algorithm != "NOT_MATCH"
    assert "winner:" in str(sel)
    forced = pyhccl.Communicator(MPI.COMM_SELF, algo="AicpuAllReduceSoleNHR")
    forced.Allreduce(np.ones(4, np.float32), out)
    assert forced.last_selection.algorithm == "AicpuAllReduceSoleNHR"
    plain = pyhccl.Communicator(MPI.COMM_SELF, algo="NHR")
    plain.Allreduce(np.ones(4, np.float32), out)
    assert plain.last_selection is None


def test_ub_bytes_from_env(monkeypatch):
    monkeypatch.setenv("PYHCCL_UB_TRANSFER_BYTES", "lots")
    with pytest.raises(ValueError, match="expecting PYHCCL_UB_TRANSFER_BYTES to be a positive number of bytes"):
        pyhccl.Communicator(MPI.COMM_SELF)


def test_dlpack_buffers():
    c = pyhccl.Communicator(MPI.COMM_SELF)
    src, dst = np.arange(5, dtype=np.float32), np.zeros(5, np.float32)
    c.Allreduce(DLPackOnly(src), DLPackOnly(dst))
    assert np.array_equal(dst, src) and c.fallbacks == 0


class LegacyDLPackOnly(DLPackOnly):
    """A DLPack 0.x producer: no max_version, so no read-only flag."""

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__()


@pytest.mark.parametrize("kind", [DLPackOnly, LegacyDLPackOnly])
def test_dlpack_memory_lives_as_long_as_the_view(kind):
    """pyhccl's view of DLPack memory keeps the producer alive, writes its memory, and lets it go after."""
    from pyhccl.comm.dlpack import host_array
    src = np.arange(6, dtype=np.float32)
    alive = weakref.ref(src)
    view = host_array(kind(src))
    del src
    gc.collect()
    assert alive() is not None and view.flags.writeable and np.array_equal(view, np.arange(6))
    view[0] = 7                                             # no copy: the producer's memory
    assert alive()[0] == 7
    del view
    gc.collect()
    assert alive() is None                                  # released once, by the producer's capsule


def test_dlpack_read_only_flag_and_long_double():
    from pyhccl.comm.dlpack import host_array
    ro = np.arange(3.0)
    ro.flags.writeable = False
    assert not host_array(DLPackOnly(ro)).flags.writeable
    c = pyhccl.Communicator(MPI.COMM_SELF)
    with pytest.raises(ValueError, match="rank 0: expecting a writable recvbuf, got a read-only buffer"):
        c.Allreduce(np.zeros(3), DLPackOnly(ro))
    g = np.zeros(3, np.longdouble)                          # numpy does not export long double: MPI gets the object
    with pytest.raises(BufferError, match="DLPack only supports"):
        c.Bcast(DLPackOnly(g), 0)
    assert c.fallbacks == 1


def test_fallback_is_counted_and_logged(caplog):
    c = pyhccl.Communicator(MPI.COMM_SELF)
    out = np.zeros(3, np.int32)
    with caplog.at_level("DEBUG", logger="pyhccl"):
        c.Allreduce(np.ones(3, np.int32), out, MPI.BOR)
    assert c.fallbacks == 1 and np.array_equal(out, [1, 1, 1])
    assert "Allreduce goes to the wrapped communicator: reduce op MPI.BOR is not one of SUM, PROD, MAX, MIN" in caplog.text


def test_bench_exits_nonzero_on_wrong_data(monkeypatch, capsys):
    assert bench_main(["allreduce", "-b", "64", "-e", "64", "-n", "1", "-w", "0"], MPI.COMM_SELF) == 0

    real = pyhccl.Communicator.Allreduce

    def corrupt(self, sendbuf, recvbuf, op=MPI.SUM):
        real(self, sendbuf, recvbuf, op)
        np.asarray(recvbuf).reshape(-1)[0] += 1

    monkeypatch.setattr(pyhccl.Communicator, "Allreduce", corrupt)
    assert bench_main(["allreduce", "-b", "64", "-e", "64", "-n", "1", "-w", "0"], MPI.COMM_SELF) == 1
    assert "# Out of bounds values : 4 FAILED" in capsys.readouterr().out    # HCCL's choice and the fast one, each twice


def test_bench_usage(capsys):
    assert bench_main(["allgatherx"], MPI.COMM_SELF) == 2
    assert "unknown benchmark 'allgatherx'; valid: allreduce" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["all_reduce", "AllReduce", "all-reduce"])
def test_bench_takes_op_names_as_users_spell_them(name, capsys):
    assert bench_main([name, "-b", "64", "-e", "64", "-n", "1", "-w", "0", "-c", "1"], MPI.COMM_SELF) == 0
    assert capsys.readouterr().out.startswith("# pyhccl.bench allreduce: ")


# -- every method on one rank: results, forms, argument errors ---------------------------------

SELF = MPI.COMM_SELF


def comm(**kw):
    return pyhccl.Communicator(SELF, **kw)


def test_every_method_runs_on_one_rank():
    c = comm()
    x = np.arange(6, dtype=np.float32)
    out = np.zeros(6, np.float32)
    for call in (lambda: c.Allreduce(x, out), lambda: c.Reduce(x, out), lambda: c.Allgather(x, out),
                 lambda: c.Gather(x, out), lambda: c.Scatter(x, out), lambda: c.Alltoall(x, out),
                 lambda: c.Reduce_scatter_block(x, out), lambda: c.Reduce_scatter(x, out, [6]),
                 lambda: c.Reduce_scatter(x, out), lambda: c.Allgatherv(x, [out, [6]]),
                 lambda: c.Alltoallv([x, [6]], [out, [6]])):
        out[:] = 0
        call()
        assert np.array_equal(out, x)
    buf = x.copy()
    c.Bcast(buf)
    c.Barrier()
    for call in (lambda: c.Allreduce(None, buf), lambda: c.Reduce(MPI.IN_PLACE, buf), lambda: c.Allgather(None, buf),
                 lambda: c.Gather(None, buf), lambda: c.Scatter(buf, MPI.IN_PLACE),
                 lambda: c.Reduce_scatter_block(None, buf), lambda: c.Reduce_scatter(None, buf, [6]),
                 lambda: c.Allgatherv(None, [buf, [6]]), lambda: c.Alltoall(None, buf),
                 lambda: c.Alltoallv(None, [buf, [6]])):
        call()
        assert np.array_equal(buf, x)
    assert c.fallbacks == 0 and c.last_selection is not None


def test_forced_name_of_another_op_leaves_this_op_to_selection(monkeypatch):
    monkeypatch.setenv("PYHCCL_ALGO", "AicpuAllGatherSoleNHR")
    c = comm(topo="1x1x1")
    out = np.zeros(4, np.float32)
    c.Allgather(np.ones(4, np.float32), out)
    assert c.last_selection.algorithm == "AicpuAllGatherSoleNHR" and c.last_selection.source == "override"
    c.Allreduce(np.ones(4, np.float32), out)
    assert c.last_selection.source != "override" and np.array_equal(out, np.ones(4))
    t = comm(algo="Pairwise")                       # AlltoAll's template: the other ops select
    t.Alltoall(np.ones(4, np.float32), out)
    assert t.last_selection is None
    t.Allreduce(np.ones(4, np.float32), out)
    assert t.last_selection is not None
    g = comm(algo="allgather:sole{nhr}")            # HCCL_ALGO grammar: steers AllGather only
    g.Bcast(out)
    g.Allgather(np.ones(4, np.float32), out)
    assert g.last_selection.source == "cost"


def test_gather_has_no_selector_and_runs_the_first_template():
    c = comm()
    out = np.zeros(3)
    c.Gather(np.ones(3), out)
    assert c.last_selection is None and np.array_equal(out, np.ones(3))


def test_selected_algorithm_that_does_not_run_falls_back_to_a_template(monkeypatch, caplog):
    real = pyhccl.comm.agree.build_plan

    def hccl_unrunnable(call, name, rank, groups=None, **kw):
        if name not in flat_names(call.op):
            raise NotRunnableError(f"{name} is not runnable in this test")
        return real(call, name, rank, groups, **kw)

    monkeypatch.setattr(pyhccl.comm.agree, "build_plan", hccl_unrunnable)
    c = comm()
    out = np.zeros(5, np.int64)
    with caplog.at_level("INFO", logger="pyhccl"):
        c.Allgather(np.arange(5), out)
    assert np.array_equal(out, np.arange(5))
    assert f"runs pyhccl's {flat_names('all_gather')[0]} template" in caplog.text
    assert any("pyhccl runs its" in note for note in c.last_selection.notes)
    forced = comm(algo="AicpuAllGatherSoleNHR")
    with pytest.raises(RuntimeError, match="AllGather of 5 x int64 cannot run: NotRunnableError: "
                                           "AicpuAllGatherSoleNHR is not runnable"):
        forced.Allgather(np.arange(5), out)


class TwoRanks:
    """A private communicator whose allgather reports a second rank with another answer."""

    def __init__(self, other, real=SELF):
        self.other, self.real = other, real

    def allgather(self, mine):
        return [mine, self.other(mine)]

    def __getattr__(self, name):
        return getattr(self.real, name)


@pytest.mark.parametrize("other, match", [
    (lambda o: ("0" * 16, "AllGather of 9 x float64", *o[2:]),
     "ranks disagree on the AllGather call; rank 0: AllGather of 4 x float64; rank 1: AllGather of 9"),
    (lambda o: (*o[:2], "AicpuAllGatherSoleMesh", *o[3:]),
     "cannot run: ranks chose different algorithms: rank 0: .*; rank 1: AicpuAllGatherSoleMesh"),
    (lambda o: (*o[:3], "error", "ValueError: broken"),
     "AllGather of 4 x float64 cannot run: rank 1: ValueError: broken"),
])
def test_ranks_that_disagree_fail_together(other, match):
    c = comm(topo="1x1x1")
    c.dispatcher.agree_comm = TwoRanks(other)
    with pytest.raises((ValueError, RuntimeError), match=match):
        c.Allgather(np.ones(4), np.zeros(4))


def test_a_rank_whose_selection_does_not_run_takes_everyone_to_the_template(caplog):
    c = comm(topo="1x1x1")
    c.dispatcher.agree_comm = TwoRanks(lambda o: (*o[:2], None, "fallback", "SelectionError: nothing matches"))
    out = np.zeros(4)
    with caplog.at_level("INFO", logger="pyhccl"):
        c.Allgather(np.ones(4), out)        # one rank: the plan needs no peer
    first = flat_names("all_gather")[0]
    assert np.array_equal(out, np.ones(4)) and c.last_selection.notes[-1].startswith(f"pyhccl runs its {first}")
    assert "(rank 1: SelectionError: nothing matches)" in caplog.text


def test_barrier_token_and_scan_forward():
    c = comm()
    c.Barrier()
    out = np.zeros(2)
    c.Scan(np.ones(2), out)                        # not pyhccl's: the wrapped communicator's
    assert np.array_equal(out, np.ones(2)) and c.fallbacks == 0


def test_unsupported_forms_fall_back():
    c = comm()
    z = np.ones(3, np.complex128)
    out = np.zeros(3, np.complex128)
    c.Allgather(z, out)
    c.Bcast(z)
    c.Alltoall([z, MPI.C_DOUBLE_COMPLEX], [out, MPI.C_DOUBLE_COMPLEX])
    c.Reduce(np.ones(3, np.int32), np.zeros(3, np.int32), MPI.BAND)
    assert c.fallbacks == 4


RO = np.zeros(8)
RO.flags.writeable = False


@pytest.mark.parametrize("call, exc, match", [
    (lambda c: c.Bcast(np.zeros(2), 1), ValueError, r"expecting root in range\(comm.size\) = range\(1\), got 1"),
    (lambda c: c.Reduce(np.zeros(2), np.zeros(2), root=-1), ValueError, r"expecting root in range\(comm.size\)"),
    (lambda c: c.Gather(np.zeros(2), np.zeros(2), root="0"), TypeError, "expecting root as an int, got str"),
    (lambda c: c.Reduce(np.zeros(2), None), TypeError, "expecting recvbuf as a buffer at the root, got None"),
    (lambda c: c.Gather(np.zeros(2), None), TypeError, "expecting recvbuf as a buffer at the root, got None"),
    (lambda c: c.Scatter(None, np.zeros(2)), TypeError, "expecting sendbuf as a buffer at the root, got None"),
    (lambda c: c.Reduce(np.zeros(8), np.zeros(4)), ValueError, r"expecting recvbuf to hold at least 8 elements "
                                                                r"\(the send count\), got 4"),
    (lambda c: c.Reduce(np.zeros(8), RO), ValueError, "expecting a writable recvbuf, got a read-only buffer"),
    # a reduction's buffers hold one count: mpi4py raises where they differ, and so does pyhccl (not a silent
    # partial write)
    (lambda c: c.Allreduce(np.zeros(3), np.zeros(4)), ValueError, "mismatch in send count 3 and receive count 4"),
    (lambda c: c.Reduce(np.zeros(3), np.zeros(4)), ValueError, "mismatch in send count 3 and receive count 4"),
    (lambda c: c.Allreduce([np.zeros(4), 2, MPI.DOUBLE], [np.zeros(4), 3, MPI.DOUBLE]), ValueError,
     "mismatch in send count 2 and receive count 3"),
    (lambda c: c.Reduce_scatter_block(np.zeros(2), np.zeros(3)), ValueError,
     "mismatch in send count 2 and receive count 3"),
    (lambda c: c.Reduce_scatter(np.zeros(2), np.zeros(3), [2]), ValueError,
     r"mismatch in recvcounts\[0\] 2 and receive count 3"),
    (lambda c: c.Bcast(RO), None, None),
    (lambda c: c.Allgather(np.zeros(3), np.zeros(4)), ValueError,
     r"expecting recvbuf to hold 1 blocks of 3 elements \(the send count\), got 1 blocks of 4"),
    (lambda c: c.Gather(np.zeros(3), np.zeros(2)), ValueError, "expecting recvbuf to hold 1 blocks of 3 elements"),
    (lambda c: c.Allgather(RO[:4], RO[4:]), ValueError, "expecting a writable recvbuf"),
    (lambda c: c.Scatter(np.zeros(4), np.zeros(2)), ValueError, r"expecting recvbuf to hold at least 4 elements "
                                                                 r"\(one block of sendbuf\), got 2"),
    (lambda c: c.Reduce_scatter_block(np.zeros(4), np.zeros(2)), ValueError,
     "expecting recvbuf to hold at least 4 elements"),
    (lambda c: c.Reduce_scatter(MPI.IN_PLACE, np.zeros(4)), ValueError,
     r"expecting recvcounts with MPI.IN_PLACE \(recvbuf then holds the input\), got None"),
    (lambda c: c.Reduce_scatter(np.zeros(3), np.zeros(4), [4]), ValueError,
     r"expecting sendbuf to hold at least sum\(recvcounts\) = 4 elements, got 3"),
    (lambda c: c.Reduce_scatter(np.zeros(4), np.zeros(4), [4, 0]), ValueError,
     r"expecting recvcounts: 1 non-negative ints \(one per rank\), got \[4, 0\]"),
    (lambda c: c.Reduce_scatter(np.zeros(4), np.zeros(4), ["a"]), TypeError,
     "expecting recvcounts as a sequence of 1 ints"),
    (lambda c: c.Allgatherv(np.zeros(2), [np.zeros(4), [3]]), ValueError,
     r"expecting sendbuf to hold counts\[0\] = 3 elements \(recvbuf's count for this rank\), got 2"),
    (lambda c: c.Allgatherv(np.zeros(2), [np.zeros(4), ([2], [3])]), ValueError,
     r"expecting recvbuf to hold counts\[0\] = 2 elements at displs\[0\] = 3, got 4 elements"),
    (lambda c: c.Allgatherv(np.zeros(2), [np.zeros(4), [-1]]), ValueError,
     r"expecting counts of recvbuf: 1 non-negative ints"),
    (lambda c: c.Alltoall(np.zeros(2), np.zeros(3)), ValueError,
     r"expecting recvbuf to hold 1 blocks of 2 elements \(sendbuf's block\), got 1 blocks of 3"),
    (lambda c: c.Alltoallv([np.zeros(2), [2]], [RO, [2]]), ValueError, "expecting a writable recvbuf"),
    (lambda c: c.Allreduce([np.zeros(8, np.float32), (4, 6), MPI.FLOAT], np.zeros(4, np.float32)), ValueError,
     r"expecting count \+ displacement <= 8 elements in sendbuf, got 4 \+ 6"),
    (lambda c: c.Allgather(np.zeros(2), [np.zeros(8), 3, 6, MPI.DOUBLE]), ValueError,
     r"expecting count \+ displacement <= 8 elements in recvbuf, got 3 \+ 6"),
])
def test_argument_errors_name_the_argument(call, exc, match):
    c = comm()
    if exc is None:
        call(c)                                     # a read-only root buffer is only read
        return
    with pytest.raises(exc, match=match):
        call(c)


@pytest.mark.parametrize("method, args", [
    ("Allreduce", lambda b: (b, b)), ("Reduce", lambda b: (b, b)), ("Allgather", lambda b: (b, b)),
    ("Gather", lambda b: (b, b)), ("Scatter", lambda b: (b, b)), ("Reduce_scatter_block", lambda b: (b, b)),
    ("Reduce_scatter", lambda b: (b, b, [8])), ("Allgatherv", lambda b: (b, [b, [8]])),
    ("Alltoall", lambda b: (b, b)), ("Alltoallv", lambda b: ([b, [8]], [b, [8]])),
])
def test_overlapping_buffers_need_in_place(method, args):
    buf = np.zeros(8)
    with pytest.raises(ValueError, match="sendbuf and recvbuf overlap; pass MPI.IN_PLACE as (send|recv)buf"):
        getattr(comm(), method)(*args(buf))


# -- reliability: fallback reasons, the check's settings and message, the timed loop ---------------

@pytest.mark.parametrize("call, reason", [
    (lambda c: c.Allgather(np.ones(3, np.complex128), np.zeros(3, np.complex128)), "sendbuf has dtype complex128"),
    (lambda c: c.Allreduce(np.arange(10.0)[::2], np.zeros(5)), "sendbuf has memory that is not contiguous"),
    (lambda c: c.Bcast([np.zeros(4, np.int8), MPI.BYTE]), "buf has the non-numeric or unsupported datatype MPI_BYTE"),
    (lambda c: c.Allreduce(np.ones(2), [np.zeros(4), MPI.Datatype.Create_struct([1, 1], [0, 8], [MPI.INT, MPI.DOUBLE])
                                        .Commit()]), "recvbuf has a derived datatype whose elements are not all of one"),
    (lambda c: c.Reduce(np.ones(3, np.int32), np.zeros(3, np.int32), MPI.BAND), "reduce op MPI.BAND is not one of"),
])
def test_fallback_reason_names_the_argument(call, reason, caplog):
    with caplog.at_level("DEBUG", logger="pyhccl"):
        try:
            call(comm())
        except Exception:                           # MPI may refuse it too: only the reason matters here
            pass
    assert reason in caplog.text


def test_mpi_error_after_a_fallback_says_what_pyhccl_runs():
    with pytest.raises(MPI.Exception) as info:
        comm().Allreduce(np.ones(3, np.complex64), np.zeros(3, np.complex64), MPI.MAX)
    note = "\n".join(info.value.__notes__)
    assert "pyhccl handed Allreduce to the wrapped MPI communicator" in note
    assert "SUM, PROD, MAX, MIN" in note and "float32" in note and "this error is MPI's" in note


@pytest.mark.parametrize("kw, env, exc, match", [
    ({}, {"PYHCCL_TIMEOUT": "soon"}, ValueError, "expecting PYHCCL_TIMEOUT to be a number of seconds"),
    ({"timeout": -1}, {}, ValueError, "expecting timeout to be a number of seconds .0 or empty: no timeout., got -1"),
    ({}, {"PYHCCL_CHECK": "maybe"}, ValueError, "expecting PYHCCL_CHECK to be 1 or 0"),
    ({"check": "yes"}, {}, TypeError, "expecting check as a bool, got str"),
    ({}, {"PYHCCL_TIMEOUT_ABORT": "x"}, ValueError, "expecting PYHCCL_TIMEOUT_ABORT to be 1 or 0"),
    # the selector's settings: raised when the communicator is made, not at its first call
    ({}, {"PYHCCL_SELECTOR": "rule"}, ValueError, r"unknown mode 'rule' \(PYHCCL_SELECTOR\)"),
    ({}, {"PYHCCL_OP_EXPANSION_MODE": "AICPU"}, ValueError, "unknown expansion mode 'AICPU'"),
    ({}, {"PYHCCL_TUNER_PLUGIN": "no_such_module:Tuner"}, ValueError, "cannot load tuner plugin"),
    ({}, {"PYHCCL_RANK_TABLE": "/no/such/rank_table.json"}, FileNotFoundError,
     "PYHCCL_RANK_TABLE names '/no/such/rank_table.json', which does not exist"),
])
def test_settings_are_checked_when_the_communicator_is_made(monkeypatch, kw, env, exc, match):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(exc, match=match):
        comm(**kw)


def test_reliability_settings_from_env(monkeypatch):
    monkeypatch.setenv("PYHCCL_CHECK", "1")
    monkeypatch.setenv("PYHCCL_TIMEOUT", "2.5")
    monkeypatch.setenv("PYHCCL_TIMEOUT_ABORT", "0")
    c = comm()
    assert (c.check, c.timeout, c.abort_on_timeout) == (True, 2.5, False)
    d = c.Dup()
    assert (d.check, d.timeout, d.abort_on_timeout) == (True, 2.5, False)
    monkeypatch.setenv("PYHCCL_TIMEOUT", "0")
    monkeypatch.delenv("PYHCCL_CHECK")
    monkeypatch.delenv("PYHCCL_TIMEOUT_ABORT")
    c = comm()
    assert (c.check, c.timeout, c.abort_on_timeout) == (False, None, True)


def test_checked_and_timed_calls_run_on_one_rank():
    c = comm(check=True, timeout=30, abort_on_timeout=False)
    x = np.arange(6, dtype=np.float32)
    out = np.zeros(6, np.float32)
    for call in (lambda: c.Allreduce(x, out), lambda: c.Allreduce(x, out), lambda: c.Reduce_scatter(x, out),
                 lambda: c.Alltoallv([x, [6]], [out, [6]]), lambda: c.Gather(x, out)):
        out[:] = 0
        call()
        assert np.array_equal(out, x)
    c.Barrier()
    with pytest.raises(ValueError, match="expecting recvbuf to hold at least 6"):
        c.Allreduce(x, out[:2])                     # every rank raised alike: the rank's own error


def test_check_error_names_ranks_and_values():
    from pyhccl.comm.check import disagreement
    base = {"call number": "3", "method": "Allreduce", "runs": "pyhccl", "dtype": "float32", "count": "8",
            "root": "-", "reduce op": "sum", "algorithm": "Ring", "arguments": "a"}
    rows = [base, {**base, "count": "9", "arguments": "b"}, base]
    assert disagreement(rows).startswith("ranks disagree on a collective call (PYHCCL_CHECK): count: ranks 0, 2: 8; "
                                          "rank 1: 9; every rank must make")
    rows = [base, {**base, "runs": "an argument error (TypeError: x)", "dtype": "-"}]
    assert "runs: rank 0: pyhccl; rank 1: an argument error (TypeError: x)" in disagreement(rows)
    assert "dtype: " not in disagreement(rows)
    rows = [base, {**base, "algorithm": "NHR"}]
    assert "algorithm: rank 0: Ring; rank 1: NHR" in disagreement(rows)
    rows = [base, {**base, "arguments": "b"}]
    assert "arguments: rank 0: a; rank 1: b" in disagreement(rows)


def test_a_step_that_does_not_complete_names_the_step_peer_and_region():
    from pyhccl.plan.ir import Buf, Plan, Region, Step, recv, send
    from pyhccl.run.mpi import compile_plan
    steps = (Step((send(0, Region(Buf.INPUT, 0, 2)), recv(0, Region(Buf.OUTPUT, 0, 2)))),
             Step((recv(0, Region(Buf.OUTPUT, 2, 2)),)))        # nobody sends it
    plan = compile_plan(Plan(0, steps, (("op", "allreduce"), ("algo", "Stuck"), ("count", 4))), 8)
    bufs = (np.arange(4.0), np.zeros(4), np.zeros(0))
    with pytest.raises(pyhccl.CollectiveTimeoutError, match=r"rank 0 waited 0.2 s \(PYHCCL_TIMEOUT\) in step 1 "
                       r"\(of steps 0..1\) of allreduce algorithm Stuck .*still pending: recv from rank 0 into "
                       r"out\[2:4\]") as info:
        plan.run(SELF.Dup(), bufs, np.add, timeout=0.2)
    assert info.value.step == 1 and info.value.algorithm == "Stuck" and isinstance(info.value, TimeoutError)
    assert np.array_equal(bufs[1], [0, 1, 0, 0])


def test_the_warm_paths_test_of_a_repeated_call():
    from pyhccl.comm.warm import _matcher
    x, out = np.ones(4, np.float32), np.empty(8, np.float32)
    same = _matcher("Allgather", (x, out), (1,))
    assert same("Allgather", (x, out))
    assert not same("Allreduce", (x, out))
    assert not same("Allgather", (x,)) and not same("Allgather", (x, out, MPI.SUM))
    assert not same("Allgather", (np.ones(4, np.float32), out))          # an equal array, another object
    out.flags.writeable = False
    assert not same("Allgather", (x, out))                               # the array it writes, read-only
    out.flags.writeable = True
    x.flags.writeable = False
    assert same("Allgather", (x, out))                                   # an input may be read-only
    x.shape = (2, 2)
    assert not same("Allgather", (x, out))
    x.shape = (4,)
    x.dtype = np.int32
    assert not same("Allgather", (x, out))
    with_op = _matcher("Allreduce", (MPI.IN_PLACE, out, MPI.SUM), (1,))
    assert with_op("Allreduce", (MPI.IN_PLACE, out, MPI.SUM)) and not with_op("Allreduce", (MPI.IN_PLACE, out, MPI.MAX))


def test_the_warm_paths_test_is_generated_once_per_form_of_call():
    """A loop that passes new arrays each call remembers each call: generating code per call cost it 3x (2 ranks,
    Allreduce of 16 floats into a new output each call: 40 -> 125 us a call)."""
    from pyhccl.comm.warm import _matcher, _matcher_factory
    x = np.ones(4, np.float32)
    a, b = np.empty(4, np.float32), np.empty(4, np.float32)
    first = _matcher("Allreduce", (x, a, MPI.SUM), (1,))
    made = _matcher_factory.cache_info().misses
    second = _matcher("Allreduce", (x, b, MPI.SUM), (1,))
    assert _matcher_factory.cache_info().misses == made                     # the same form: no code generated
    assert first("Allreduce", (x, a, MPI.SUM)) and not first("Allreduce", (x, b, MPI.SUM))
    assert second("Allreduce", (x, b, MPI.SUM)) and not second("Allreduce", (x, a, MPI.SUM))
