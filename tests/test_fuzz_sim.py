"""Hypothesis fuzz of the plans through the simulator, on emulated machines of up to 256 virtual ranks.

Each example draws an op, a machine (``1x1xN``, ``1xAxB``, ``PxSxD``, uneven TopoMeta lists, link
options), a count (0, 1, primes, ten billion and nineteen), a root, the in-place form, V counts
with zeros, gaps and blocks out of rank order, an AlltoAllV matrix, an HCCL dtype and reduce op,
and an algorithm: one of pyhccl's templates, an HCCL name whose attributes admit the call, any
HCCL name of the op, or HCCL's selection. :func:`pyhccl.verify.check` builds every rank's plan
and simulates them; the simulator checks that sends meet receives and that every output element
holds exactly its contributions.

An example passes when nothing is "failed"; a template is "ok"; HCCL's selection is "ok" or,
where it picks nothing pyhccl runs, the op's first template (what the Communicator then runs)
is "ok"; and a forced HCCL name is "not-eligible" exactly when the selector's forced-name check
(the Communicator's path, :func:`pyhccl.select.select_for`) refuses it.

``PYHCCL_FUZZ_EXAMPLES`` sets the examples of the test up to 32 ranks (default 100); the test on
33 to 256 ranks runs a tenth of it (at least 3). ``PYHCCL_FUZZ_REPORT=FILE`` appends one JSON
line per test with the cases run (benchmarks/fuzz.py).
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from pyhccl.algo import registry
from pyhccl.algo.dtypes import DATATYPE_SIZE, HcclDataType
from pyhccl.core.call import OPS, Call
from pyhccl.plan.api import flat_names, hccl_names
from pyhccl.select import select_for
from pyhccl.verify import check, machine
from pyhccl.verify.api import hccl_op_name
from pyhccl.verify.cases import LARGE_COUNT

from fuzz_common import draw_layout, run_reported  # tests/fuzz_common.py

EXAMPLES = int(os.environ.get("PYHCCL_FUZZ_EXAMPLES") or 100)
REPORT = os.environ.get("PYHCCL_FUZZ_REPORT")
#: Every HCCL dtype the attribute checks know (only the element size and the checks matter here).
DTYPES = [d.name for d in HcclDataType]
PRIMES = [2, 3, 5, 7, 13, 31, 127, 257, 7919, 1_000_003]
COUNT = st.one_of(st.sampled_from([0, 1, *PRIMES, LARGE_COUNT]), st.integers(0, 5000))
OPTIONS = ["", "", "", ";level0=clos", ";level0=mesh+clos", ";dies=2", ";pcie=true", ";level1=roce", ";dpu=true",
           ";pod=true", ";level0=mesh+clos;mesh_size=4", ";level1=uboe;level2=ub_rtp", ";clos_ports=8"]


def draw_topo(draw, n: int) -> str:
    """A machine of ``n`` ranks; the options may make it one HCCL rejects (then it is drawn again plain)."""
    text = draw_layout(draw, n, max_cuts=6)
    full = text + draw(st.sampled_from(OPTIONS))
    try:
        machine(full)
    except ValueError:
        return text
    return full


def vector(rng: random.Random, n: int, top: int) -> list[int]:
    """``n`` counts: about a quarter 0, the rest 1, a prime or up to ``top``."""
    return [0 if rng.random() < 0.25 else rng.choice([1, 2, 3, 7, 13, rng.randint(1, top)]) for _ in range(n)]


def placed(rng: random.Random, counts: list[int]) -> tuple[int, ...]:
    """Displacements placing the blocks in a random order with random gaps (no overlap)."""
    order = list(range(len(counts)))
    rng.shuffle(order)
    displs, at = [0] * len(counts), 0
    for j in order:
        gap = rng.choice([0, 0, 1, 3])
        displs[j], at = at + gap, at + gap + counts[j]
    return tuple(displs)


def draw_call(draw, op: str, n: int) -> Call:
    spec = OPS[op]
    if op == "barrier":
        return Call(op, n)
    rng = random.Random(draw(st.integers(0, 2**32)))
    if spec.vector == "counts":
        counts = [draw(COUNT)] * n if draw(st.booleans()) else vector(rng, n, 2 * n + 3)
        if draw(st.integers(0, 4)) == 0:
            counts[rng.randrange(n)] = LARGE_COUNT       # one rank's block of ten billion
        return Call(op, n, counts=tuple(counts), displs=placed(rng, counts) if draw(st.booleans()) else None)
    if spec.vector == "matrix":                          # no huge entries: the simulator's atoms cascade on them
        m = [vector(rng, n, n + 3) for _ in range(n)]
        gaps = draw(st.booleans())
        sd = tuple(placed(rng, row) for row in m) if gaps else None
        rd = tuple(placed(rng, [m[i][j] for i in range(n)]) for j in range(n)) if gaps else None
        return Call(op, n, matrix=tuple(map(tuple, m)), sdispls=sd, rdispls=rd)
    root = draw(st.integers(0, n - 1)) if spec.rooted else 0
    in_place = spec.in_place_ok and op != "broadcast" and draw(st.booleans())
    return Call(op, n, draw(COUNT), root=root, in_place=in_place)


def admitted(op: str, name: str, m, call: Call, dtype: str, rop: str) -> bool:
    """The selector's forced-name check (the Communicator's path) on every rank's view of the machine."""
    hccl = registry.get(name).op                        # an AllToAllVC name forces AlltoAllv too
    nbytes = call.hccl_nbytes(DATATYPE_SIZE[HcclDataType[dtype]])
    inplace = call.in_place and op != "broadcast"       # HCCL's flag (a Reduce root's too); Broadcast: one buffer
    for info in m.infos:
        try:
            select_for(hccl, info, nbytes, dtype, rop, root=call.root, inplace=inplace, algo=name)
        except ValueError:
            return False
    return True


@st.composite
def cases(draw, lo: int, hi: int) -> tuple:
    op = draw(st.sampled_from(list(OPS)))
    n = draw(st.integers(lo, hi))
    topo = draw_topo(draw, n)
    call = draw_call(draw, op, n)
    dtype = draw(st.sampled_from(DTYPES))
    rop = draw(st.sampled_from(["sum", "prod", "max", "min"]))
    kind = draw(st.sampled_from(["auto", "template", "template", "hccl", "hccl", "hccl", "any"]))
    names = hccl_names(op)
    if kind == "hccl":
        m = machine(topo)
        names = [a for a in names if admitted(op, a, m, call, dtype, rop)]
    if kind in ("hccl", "any") and names:
        return call, topo, draw(st.sampled_from(names)), dtype, rop
    algo = None if kind == "auto" else draw(st.sampled_from(flat_names(op)))
    return call, topo, algo, dtype, rop


def one_example(call: Call, topo: str, algo: str | None, dtype: str, rop: str, stats: Counter) -> None:
    stats["cases"] += 1
    m = machine(topo)
    op = call.op
    res = check(call, algo, m, dtype=dtype, reduce_op=rop, hccl_op=hccl_op_name(op))
    stats[res.status] += 1
    where = f"{op} {res.algorithm} on {topo} ({m.nranks} ranks), {brief(call)}, {dtype} {rop}"
    assert res.status != "failed", f"{where}: {res.error}"
    if algo is None:
        if not res.ok:                      # the Communicator then runs the op's first template
            first = check(call, flat_names(op)[0], m, dtype=dtype, reduce_op=rop)
            assert first.ok, f"{where}: {res.status}, and its fallback {first.algorithm}: {first.error}"
    elif algo in flat_names(op):
        assert res.ok, f"{where}: {res.status}: {res.error}"
    else:
        refused = not admitted(op, algo, m, call, dtype, rop)
        assert (res.status == "not-eligible") == refused, \
            f"{where}: the verifier says {res.status} ({res.error}), the selector {'refuses' if refused else 'admits'} it"


def brief(call: Call) -> str:
    """The call in a line (hypothesis prints it whole with the falsifying example)."""
    if call.counts is not None:
        what = f"counts {list(call.counts[:8])}{' ...' if call.nranks > 8 else ''}" + \
            (" gapped" if call.displs != Call(call.op, call.nranks, counts=call.counts).displs else "")
    elif call.matrix is not None:
        what = f"matrix row 0 {list(call.matrix[0][:8])}{' ...' if call.nranks > 8 else ''}" + \
            (" gapped" if call.sdispls != Call(call.op, call.nranks, matrix=call.matrix).sdispls else "")
    else:
        what = f"count {call.count} root {call.root}" + (" in place" if call.in_place else "")
    return what


def report(test: str, stats: Counter, failure: str | None) -> None:
    if REPORT:
        with open(REPORT, "a") as f:
            f.write(json.dumps({"part": "sim", "test": test, **stats, "failure": failure}) + "\n")


def fuzz(test: str, lo: int, hi: int, examples: int) -> None:
    stats: Counter = Counter()

    @settings(max_examples=examples, derandomize=True, database=None, deadline=None,
              phases=(Phase.explicit, Phase.generate), suppress_health_check=list(HealthCheck), print_blob=False)
    @given(case=cases(lo, hi))
    def run(case):
        one_example(*case, stats)

    run_reported(run, lambda failure: report(test, stats, failure))


def test_fuzz_simulator():
    fuzz("sim up to 32 ranks", 1, 32, EXAMPLES)


def test_fuzz_simulator_large():
    fuzz("sim 33-256 ranks", 33, 256, max(3, EXAMPLES // 10))
