"""The machine profile: pyhccl's fast candidates per op, priced from times measured once per layout.

Where no tuning file is given and ``PYHCCL_PROFILE`` is ``auto`` (the default), a Communicator whose
ranks share one node hands selection this profile (:class:`pyhccl.select.profile.Profile`): per op a
short list of pyhccl's own paths on the shared-memory engine (``MeshOneShot@shm``, ``MeshTwoShot@shm``,
...), each usable up to a size, and for ops with more than one candidate their times measured at a
few sizes on this machine, with this MPI and this layout (:mod:`pyhccl.comm.probe` measures them,
in about a second, the first time the layout is seen). The profile is cached as JSON in the
user's cache directory (:func:`profile_path`), keyed by host, MPI library, layout and cores, and
is only data: it is parsed with :mod:`json` and checked field by field. ``PYHCCL_PROFILE=hccl``
keeps HCCL's own selection and pricing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..algo.names import OpExecuteConfig
from ..algo.predicates import OpCall
from ..core.call import HCCL_OPS
from ..select.cost.model import CostResult, CostRow, select_min_cost
from ..topo.info import TopoInfo
from .file import NATIVE
from .profile import NATIVE_ENGINE

__all__ = ["SCHEMA", "Candidate", "AutoProfile", "profile_key", "profile_path", "load_profile", "save_profile",
           "ProfileError"]

SCHEMA = "pyhccl-machine-profile"
#: 3: the one-shot AlltoAll copies less (its crossover moved); 4: the one-step crossover is also timed at 512 KiB
#: (it was put half-way between 256 KiB and 1 MiB, where in-place reads won by 1.4x at 2 ranks), sizes smallest
#: first; 5: the one-step crossover without a margin for the slots, reads by 256 KiB: profiles measured before are
#: measured again
VERSION = 5
ENGINE = "SHM"


#: A fast path listed after another that also runs the size is priced this much dearer per place: it must
#: measure that much faster to be chosen. One measurement on a shared machine moves by 10-30 % (a rank's vCPU,
#: a neighbour's burst), and the first-listed path is the one that is best on most machines.
PREFERENCE = 0.15


class ProfileError(ValueError):
    """A cached machine profile that cannot be used (malformed, another schema or version)."""


@dataclass(frozen=True)
class Candidate:
    """One of an op's fast paths: ``name`` (``Name@shm``), used for HCCL data sizes up to ``max_bytes`` (0: any),
    and its measured ``(nbytes, seconds)`` points (none where it is the op's only candidate)."""

    op: str
    name: str
    max_bytes: int = 0
    points: tuple[tuple[int, float], ...] = ()

    def fits(self, nbytes: int) -> bool:
        return not self.max_bytes or nbytes <= self.max_bytes

    def price(self, nbytes: int) -> tuple[float, str] | None:
        """Seconds at ``nbytes`` and how: measured, interpolated (log-log), or held at the nearest end."""
        pts = self.points
        if not pts:
            return None
        sizes = [p[0] for p in pts]
        i = bisect_left(sizes, nbytes)
        if i < len(pts) and sizes[i] == nbytes:
            return pts[i][1], f"measured at {_b(nbytes)}"
        if i == 0:
            return pts[0][1], f"measured at {_b(sizes[0])} (the smallest size measured)"
        if i == len(pts):                   # beyond the last point: time grows in proportion to the bytes
            return pts[-1][1] * nbytes / sizes[-1], f"scaled from {_b(sizes[-1])} by size"
        (n0, t0), (n1, t1) = pts[i - 1], pts[i]
        f = math.log(nbytes / n0) / math.log(n1 / n0)
        return math.exp(math.log(t0) + f * math.log(t1 / t0)), f"interpolated {_b(n0)}-{_b(n1)}"


@dataclass(frozen=True)
class AutoProfile:
    """The machine profile as selection takes it (:class:`pyhccl.select.profile.Profile`).

    Attributes:
        key: what it was measured for (:func:`profile_key`); ``layout``: that, for people.
        candidates: every op's fast paths (HCCL op names), measured where an op has several.
        measure_s: seconds the measurement took; ``path``: the cache file ("" in memory).
        one_shot: per HCCL op, the largest input (bytes) its one-step Mesh runs on the shared slots, where
            that was measured against reading the peers' arrays in place (:mod:`pyhccl.comm.probe`).
    """

    key: str
    layout: str
    candidates: tuple[Candidate, ...]
    measure_s: float = 0.0
    created: str = ""
    path: str = ""
    one_shot: tuple[tuple[str, int], ...] = ()
    kind: ClassVar[str] = "machine profile"
    _by_op: dict = field(default_factory=dict, init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        for c in self.candidates:
            self._by_op.setdefault(c.op, []).append(c)

    @property
    def label(self) -> str:
        return f"machine profile {self.path or '(in memory)'}"

    def has_fast_path(self, op: str) -> bool:
        """Whether HCCL op ``op`` has one of pyhccl's fast paths here (else the wrapped MPI's own runs it)."""
        return op in self._by_op

    def ops(self) -> set[str]:
        """Every HCCL op: those without a fast path here run the wrapped MPI's own collective (:meth:`costs`)."""
        return set(HCCL_OPS)

    def one_shot_max(self, op: str) -> int | None:
        """The measured crossover of HCCL op ``op``'s one-step Mesh (bytes of input run on the slots), or None."""
        return dict(self.one_shot).get(op)

    def check(self, topo: TopoInfo) -> None:
        """Nothing to check: the profile is looked up by the layout it was measured on (:func:`profile_key`)."""

    def costs(self, op: str, topo: TopoInfo, call: OpCall) -> tuple[CostResult, dict[str, str]]:
        """The op's candidates priced at ``call.nbytes``: a lone candidate that fits wins unpriced; the k-th that
        fits (from 0) is priced its measured time x (1 + k x PREFERENCE)."""
        rows, source = [], {}
        cands = self._by_op.get(op, [])
        if not cands:       # pyhccl's plans for it are MPI point-to-point steps, slower on one node than MPI's own
            row = CostRow(NATIVE, NATIVE_ENGINE)
            row.cost = row.model_cost = 0.0
            row.priced_by = source[NATIVE] = f"no fast path for {op} on one node: the wrapped MPI's own collective"
            result = CostResult([row], None, OpExecuteConfig.HOSTCPU, ())
            result.winner, result.ties = select_min_cost([row])
            return result, source
        place = 0
        for c in cands:
            row = CostRow(c.name, ENGINE)
            rows.append(row)
            if not c.fits(call.nbytes):
                row.filtered = f"runs calls of up to {_b(c.max_bytes)}"
                continue
            got = c.price(call.nbytes)
            if got is None:
                row.cost = row.model_cost = 0.0
                source[c.name] = "the op's only fast path (not measured)"
            else:
                factor = 1 + place * PREFERENCE
                row.body = got[0]
                row.cost = row.model_cost = got[0] * factor
                source[c.name] = got[1] + (f", x {factor:.2f} (listed after {place} that run the size: "
                                           f"it must measure {place * PREFERENCE:.0%} faster)" if place else "")
            place += 1
            row.priced_by = source[c.name]
        result = CostResult(rows, None, OpExecuteConfig.HOSTCPU, ())
        result.winner, result.ties = select_min_cost(rows)
        return result, source

    def describe(self, op: str) -> list[str]:
        cands = self._by_op.get(op, [])
        meas = sum(len(c.points) for c in cands)
        if not cands:
            return [f"machine profile: {self.path or '(in memory)'} ({self.layout}; no {op} fast path: the wrapped "
                    f"MPI's own collective; PYHCCL_PROFILE=hccl for HCCL's own selection)"]
        lines = [f"machine profile: {self.path or '(in memory)'} ({self.layout}; {len(cands)} {op} fast path"
                 f"{'s' * (len(cands) != 1)}, {meas} measured points, measured in {self.measure_s:.2f} s; "
                 f"PYHCCL_PROFILE=hccl for HCCL's own selection)"]
        most = self.one_shot_max(op)
        if most is not None:
            lines.append(f"  one-step Mesh on shared slots for inputs up to {_b(most)}, above: peers' arrays read "
                         f"in place (measured)")
        return lines

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "version": VERSION, "key": self.key, "layout": self.layout,
                "measure_s": self.measure_s, "created": self.created,
                "candidates": [{"op": c.op, "name": c.name, "max_bytes": c.max_bytes,
                                "points": [[n, t] for n, t in c.points]} for c in self.candidates],
                "one_shot": dict(self.one_shot)}


def profile_key(what: str) -> str:
    """The cache key of ``what`` a profile is measured for (host, MPI library, ranks, topology, cores, ...)."""
    text = json.dumps([what, VERSION])
    return hashlib.blake2b(text.encode(), digest_size=10).hexdigest()


def profile_path(cache_dir: str, key: str) -> str:
    """The cache file of ``key`` in ``cache_dir`` (:func:`pyhccl.core.settings.cache_dir`)."""
    return os.path.join(cache_dir, "profiles", f"{key}.json")


def load_profile(path: str, key: str) -> AutoProfile | None:
    """The cached profile at ``path`` if it is there and measured for ``key``; None otherwise.

    Raises:
        ProfileError: the file is not a machine profile (naming the field; delete it or refresh).
    """
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise ProfileError(f"{path}: not a readable machine profile ({e}); delete it or run "
                           f"'mpiexec -n N python -m pyhccl.tune --refresh'") from None
    try:
        if data.get("schema") != SCHEMA or data.get("version") != VERSION:
            raise ValueError(f"schema/version {data.get('schema')!r}/{data.get('version')!r}")
        if data["key"] != key:
            return None
        cands = tuple(Candidate(str(c["op"]), str(c["name"]), int(c["max_bytes"]),
                                tuple((int(n), float(t)) for n, t in c["points"])) for c in data["candidates"])
        for c in cands:
            if any(t <= 0 or not math.isfinite(t) or n <= 0 for n, t in c.points) or c.max_bytes < 0:
                raise ValueError(f"candidate {c.name}: a size or time that is not positive")
        caps = tuple((str(op), int(n)) for op, n in data["one_shot"].items())
        if any(n < 0 for _, n in caps):
            raise ValueError("one_shot: a size that is negative")
        return AutoProfile(key, str(data["layout"]), cands, float(data.get("measure_s", 0.0)),
                           str(data.get("created", "")), path, caps)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ProfileError(f"{path}: malformed machine profile ({type(e).__name__}: {e}); delete it or run "
                           f"'mpiexec -n N python -m pyhccl.tune --refresh'") from None


def save_profile(profile: AutoProfile, path: str) -> AutoProfile:
    """Write ``profile`` to ``path`` (atomically: a temporary file renamed); the profile with its path set."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(profile.to_json(), f, indent=1)
    os.replace(tmp, path)
    return dataclasses.replace(profile, path=path)


def _b(n: int) -> str:
    for unit, k in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k and n % k == 0:
            return f"{n // k} {unit}"
    return f"{n} B"
