"""Per-template cost coefficients {A, B, C, D} (each template's static ``CalcCostCoeff``).

HCCL source: the templates under src/ops/<op>/algorithm/template/ (hccl-selection.md §6.7,
generation N3). Templates the newer sheet does not list take the older snapshot's coefficients
(§6.9, "older" in ``SOURCES``) with the newer bandwidths; any other template is uncalibrated.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import floor, log2
from typing import Callable

from ...algo.names import CostEngine
from ...topo.info import CommTopo
from .params import US, Coeff, copy_b, latency_c, launch_d, mesh_a, nhr_a, reduce_b, sync_tasks, trans_tasks

__all__ = ["Seg", "TEMPLATES", "SOURCES", "template_coeff", "MESH_TEMPLATE_MAX_RANKS"]

MESH_TEMPLATE_MAX_RANKS = 8      # the AllReduce mesh templates' "R > 8 -> none" guard


@dataclass(frozen=True)
class Seg:
    """``CalcCostCoeffParam`` for one template invocation (a segment)."""

    template: str
    rank_size: int
    data_ratio: float
    net: CommTopo = CommTopo.MESH_1D
    ports: tuple[int, ...] = (1,)
    is_pod: bool = False
    engine: CostEngine = CostEngine.AICPU
    alg_name: str = ""
    in_ne_scratch: bool = True
    out_ne_scratch: bool = True
    in_ne_out: bool = True
    single_channel: bool = False

    @property
    def p0(self) -> int:
        return self.ports[0]

    @property
    def pod_ports(self) -> int:
        """p0 + p1 on pods with >= 2 port groups, else p0."""
        return self.ports[0] + self.ports[1] if self.is_pod and self.net == CommTopo.CLOS and len(self.ports) >= 2 \
            else self.ports[0]


def _M(s: Seg, x: float, ports: float | None = None) -> float:
    return mesh_a(x, s.net, s.p0 if ports is None else ports, s.rank_size, s.is_pod)


def _H(s: Seg, x: float, net: CommTopo | None = None, ports: float | None = None, is_pod: bool | None = None) -> float:
    return nhr_a(x, s.net if net is None else net, s.p0 if ports is None else ports, s.rank_size,
                 s.is_pod if is_pod is None else is_pod)


def _cp(s: Seg, x: float, when: bool = True) -> float:
    return copy_b(x, s.engine) if when else 0.0


def _rd(s: Seg, x: float) -> float:
    return reduce_b(x, s.engine)


def ar_oneshot(s: Seg) -> Coeff | None:
    R, n = s.rank_size, s.data_ratio
    if R > MESH_TEMPLATE_MAX_RANKS:
        return None
    return Coeff(_M(s, n * R), _cp(s, n * R, s.in_ne_scratch) + (R - 1) * _rd(s, n * R), latency_c(1, s.engine),
                 launch_d(trans_tasks(R) + 2 * sync_tasks(R) + (R - 1), s.engine))


def ar_twoshot(s: Seg) -> Coeff | None:
    R, n = s.rank_size, s.data_ratio
    if R > MESH_TEMPLATE_MAX_RANKS:
        return None
    return Coeff(_M(s, 2 * n), _cp(s, n, s.in_ne_scratch) + (R - 1) * _rd(s, n), latency_c(20, s.engine),
                 launch_d(2 * trans_tasks(R) + 3 * sync_tasks(R) + 10, s.engine))


def ar_chunk(s: Seg) -> Coeff | None:
    R, n = s.rank_size, s.data_ratio
    if R > MESH_TEMPLATE_MAX_RANKS:
        return None
    return Coeff(_M(s, 2 * n), _cp(s, n, s.in_ne_scratch), latency_c(5 * R, s.engine),
                 launch_d(trans_tasks(R) * (R - 1) + sync_tasks(R) * R + trans_tasks(R), s.engine))


def ar_nhr(s: Seg) -> Coeff:
    R, n = s.rank_size, s.data_ratio
    return Coeff(_H(s, 2 * n), _cp(s, 2 * n * R, s.in_ne_scratch), latency_c(10, s.engine), 1 * US * 8 * (R - 1))


def rs_mesh(s: Seg) -> Coeff:
    R, n = s.rank_size, s.data_ratio
    return Coeff(_M(s, n), _cp(s, n, s.in_ne_scratch) + _cp(s, n, s.out_ne_scratch) + (R - 1) * _rd(s, n),
                 latency_c(11, s.engine), launch_d(trans_tasks(R) + 2 * sync_tasks(R) + 1, s.engine))


def rs_nhr(s: Seg) -> Coeff:
    R, n = s.rank_size, s.data_ratio
    ports = s.p0 if not s.is_pod or s.alg_name == "AicpuReduceScatterSoleNHR" else s.ports[0] + s.ports[-1]
    k = floor(log2(R)) + 1 if R > 0 else 1
    tasks = floor(1.5 * trans_tasks(k) + 2 * sync_tasks(k))
    if s.is_pod and not s.single_channel:
        tasks *= 2
    return Coeff(_H(s, n, net=CommTopo.CLOS, ports=ports), _cp(s, n, s.in_ne_scratch) * (R // 2)
                 + _cp(s, n, s.out_ne_scratch), latency_c(15, s.engine), 1 * US * (tasks + 8))


def ag_mesh(s: Seg) -> Coeff:
    R, n = s.rank_size, s.data_ratio
    return Coeff(_M(s, n), _cp(s, n, s.in_ne_scratch) + _cp(s, n, s.in_ne_out), latency_c(8, s.engine),
                 launch_d(trans_tasks(R) + 2 * sync_tasks(R), s.engine))


def ag_nhr(s: Seg) -> Coeff:
    R, n = s.rank_size, s.data_ratio
    lg = floor(log2(R)) if R > 0 else 0
    ports = s.p0 if s.alg_name == "AicpuAllGatherSoleNHR" or not s.is_pod else s.pod_ports
    e = max(floor(5 * lg / 3), 2)
    tasks = trans_tasks(e) + 2 * sync_tasks(e) + (5 if s.is_pod and not s.single_channel else 0)
    return Coeff(_H(s, n, net=CommTopo.CLOS, ports=ports), _cp(s, n, s.in_ne_scratch),
                 latency_c(max(8 * lg - 7, 1), s.engine), 1 * US * tasks)


def ag_mesh_intra(s: Seg) -> Coeff:
    R, n = s.rank_size, s.data_ratio
    return Coeff(_M(s, n), _cp(s, n * R), latency_c(1, s.engine), launch_d(5 * (R - 1), s.engine))


# Older-snapshot coefficients (§6.9) for the CCU / AIV AllReduce templates the newer sheet does not list.
def _older_port(s: Seg) -> int:
    return 8 if s.net == CommTopo.CLOS else 1


def ccu_ar_mesh(s: Seg) -> Coeff | None:
    if s.rank_size > MESH_TEMPLATE_MAX_RANKS:
        return None
    return Coeff(_M(s, 2 * s.data_ratio, _older_port(s)), 0.0, 40 * US)


def ccu_ar_oneshot(s: Seg) -> Coeff | None:
    if s.rank_size > MESH_TEMPLATE_MAX_RANKS:
        return None
    return Coeff(_M(s, s.data_ratio * s.rank_size, _older_port(s)), 0.0, 2 * US)


def ccu_ar_mesh_m2m(s: Seg) -> Coeff:
    R, n = s.rank_size, s.data_ratio
    small = R <= MESH_TEMPLATE_MAX_RANKS
    a = mesh_a(2 * n, CommTopo.MESH_1D if small else CommTopo.CLOS, 1 if small else 6, R, s.is_pod)
    b = reduce_b(n * (R - 1), CostEngine.CCU if small else CostEngine.CCU_CIR_MODE)
    return Coeff(a, b, 2 * US * R)


def ccu_ar_nhr(s: Seg) -> Coeff:
    R, n = s.rank_size, s.data_ratio
    return Coeff(nhr_a(2 * n, CommTopo.CLOS, 8, R, s.is_pod), copy_b(2 * n * R, CostEngine.CCU), 2 * US * 2 * R)


def ccu_ar_2die_m2m(s: Seg) -> Coeff:
    return Coeff(_M(s, s.data_ratio * s.rank_size, _older_port(s)), copy_b(s.data_ratio * s.rank_size,
                                                                          CostEngine.CCU), 2 * US)


def aiv_ar_oneshot(s: Seg) -> Coeff:
    R = s.rank_size
    return Coeff(_M(s, 1, _older_port(s)), copy_b(1, CostEngine.AICPU) + reduce_b(R - 1, CostEngine.AICPU), 5 * US)


def aiv_ar_twoshot(s: Seg) -> Coeff:
    R, n = s.rank_size, s.data_ratio
    return Coeff(_M(s, 2 * n, _older_port(s)), copy_b(n, CostEngine.AICPU) + reduce_b(n * (R - 1), CostEngine.AICPU),
                 15 * US)


def placeholder(a: float, c: float) -> Callable[[Seg], Coeff]:
    """HCCL's placeholder coefficients that keep a template out of the ranking (older snapshot)."""
    return lambda s: Coeff(a, 0.0, c)


TEMPLATES: dict[str, Callable[[Seg], Coeff | None]] = {
    "InsTempAllReduceMesh1DOneShot": ar_oneshot, "InsTempAllReduceMesh1DTwoShot": ar_twoshot,
    "InsTempAllReduceMesh1DTwoShotMeshChunk": ar_chunk, "InsTempAllReduceNHR": ar_nhr,
    "InsTempReduceScatterMesh1D": rs_mesh, "InsTempReduceScatterNHR": rs_nhr, "InsTempAllGatherMesh1D": ag_mesh,
    "InsTempAllGatherNHR": ag_nhr, "InsTempAllGatherMesh1dIntra": ag_mesh_intra,
    "CcuTempAllReduceMesh1D": ccu_ar_mesh, "CcuTempAllReduceMesh1DOneShot": ccu_ar_oneshot,
    "CcuTempAllReduceMeshMem2Mem1D": ccu_ar_mesh_m2m, "CcuTempAllReduceNHRMem2Mem1D": ccu_ar_nhr,
    "CcuTempAllReduceMesh1DMem2Mem2DieOneShot": ccu_ar_2die_m2m,
    "AivTempAllReduceMesh1DOneShot": aiv_ar_oneshot, "AivTempAllReduceMesh1DTwoShot": aiv_ar_twoshot,
    "CcuTempAllreduceMesh1D2DieOneShot": placeholder(10.0, 1000.0),
    "CcuTempAllReduceNhrMem2Mem1DMultiJetty": placeholder(1000.0, 1000.0),
}
#: Where each template's coefficients come from: "newer" (§6.7) or "older" (§6.9).
SOURCES = {name: ("newer" if name.startswith("InsTemp") else "older") for name in TEMPLATES}


def template_coeff(seg: Seg) -> Coeff | None:
    """The template's {A, B, C, D}, or None when it has none (uncalibrated) or its guard fires."""
    fn = TEMPLATES.get(seg.template)
    return fn(seg) if fn else None


