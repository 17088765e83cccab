"""Plan IR: buffers, regions, actions, steps and per-rank plans.

A plan is data: a template returns steps, the MPI runtime and the simulator both run them.
A step is a set of transfers that run concurrently (send a region to a peer, receive from a
peer into a region), followed by local operations run in order (reduce ``dst <- dst op src``,
copy ``dst <- src``).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Any, Iterator

__all__ = ["Buf", "Kind", "Region", "Action", "Step", "Plan", "scratch_ends"]


class Buf(enum.Enum):
    """The three buffers a plan addresses: the user's input and output, and pooled scratch."""

    INPUT = "in"
    OUTPUT = "out"
    SCRATCH = "scr"

    __hash__ = object.__hash__      # members are singletons; Enum's hash is slow Python code


class Kind(enum.Enum):
    """What an action does: the value is its short code in the printed form."""

    SEND = "S"
    RECV = "R"
    REDUCE = "+"
    COPY = "="

    __hash__ = object.__hash__


_BUF_BY_CODE = {b.value: b for b in Buf}


@dataclass(frozen=True, slots=True)
class Region:
    """Elements of one buffer: ``repeat`` pieces of ``count`` elements, ``stride`` apart.

    The simple form (``repeat == 1``) is ``(buf, offset, count)``. The strided form carries
    a set of equally spaced slices in one value, as HCCL's TemplateDataParams does with
    sliceSize / stride / repeatNum (src/ops/op_common/template/template_utils.h).
    """

    buf: Buf
    offset: int
    count: int
    repeat: int = 1
    stride: int | None = None

    def __post_init__(self) -> None:
        if self.offset < 0 or self.count < 0:
            raise ValueError(f"expecting offset >= 0 and count >= 0, got {self.offset}, {self.count}")
        if self.repeat < 1:
            raise ValueError(f"expecting repeat >= 1, got {self.repeat}")
        if (self.repeat > 1) != (self.stride is not None):
            raise ValueError("expecting stride exactly when repeat > 1")
        if self.stride is not None and self.stride < self.count:
            raise ValueError(f"expecting stride >= count, got stride {self.stride} < count {self.count}")

    @property
    def size(self) -> int:
        """Total elements over all pieces."""
        return self.count * self.repeat

    @property
    def end(self) -> int:
        """One past the last element touched."""
        if self.repeat == 1:
            return self.offset + self.count
        return self.offset + self.stride * (self.repeat - 1) + self.count

    def pieces(self) -> Iterator[tuple[int, int]]:
        """Yield ``(offset, count)`` of each piece, in order."""
        step = self.stride or 0
        for i in range(self.repeat):
            yield self.offset + i * step, self.count

    def moved(self, buf: Buf, delta: int = 0) -> Region:
        """The same shape in ``buf``, shifted by ``delta`` elements."""
        return Region(buf, self.offset + delta, self.count, self.repeat, self.stride)

    def __str__(self) -> str:
        s = f"{self.buf.value}[{self.offset}:{self.offset + self.count}"
        if self.repeat > 1:
            s += f"|{self.repeat}x{self.stride}"
        return s + "]"

    @classmethod
    def parse(cls, text: str) -> Region:
        """Read back the form printed by ``str``: ``out[0:128]`` or ``scr[0:8|4x32]``."""
        m = _REGION_RE.fullmatch(text.strip())
        if not m:
            raise ValueError(f"expecting a region like 'out[0:128]' or 'scr[0:8|4x32]', got {text!r}")
        code, lo, hi, rep, stride = m.groups()
        lo, hi = int(lo), int(hi)
        if rep is None:
            return cls(_BUF_BY_CODE[code], lo, hi - lo)
        return cls(_BUF_BY_CODE[code], lo, hi - lo, int(rep), int(stride))

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"buf": self.buf.value, "offset": self.offset, "count": self.count}
        if self.repeat > 1:
            d.update(repeat=self.repeat, stride=self.stride)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Region:
        return cls(_BUF_BY_CODE[d["buf"]], d["offset"], d["count"], d.get("repeat", 1), d.get("stride"))


_new = object.__new__
_SET_BUF, _SET_OFFSET, _SET_COUNT, _SET_REPEAT, _SET_STRIDE = (
    Region.__dict__[f].__set__ for f in ("buf", "offset", "count", "repeat", "stride"))


def region_unchecked(buf: Buf, offset: int, count: int, repeat: int = 1, stride: int | None = None) -> Region:
    """``Region(buf, offset, count, repeat, stride)`` without its checks, for the plan builders'
    hot paths whose arguments hold Region's invariants by construction (slices of a valid
    region); anything a user passes goes through ``Region(...)``."""
    r = _new(Region)
    _SET_BUF(r, buf)
    _SET_OFFSET(r, offset)
    _SET_COUNT(r, count)
    _SET_REPEAT(r, repeat)
    _SET_STRIDE(r, stride)
    return r


_REGION_RE = re.compile(r"(in|out|scr)\[(\d+):(\d+)(?:\|(\d+)x(\d+))?\]")


@dataclass(frozen=True, slots=True)
class Action:
    """One send, receive, reduce or copy.

    SEND: ``src`` to ``peer``. RECV: from ``peer`` into ``dst``.
    REDUCE: ``dst <- dst op src``. COPY: ``dst <- src``. Sizes of ``src`` and ``dst`` agree.
    """

    kind: Kind
    peer: int | None = None
    src: Region | None = None
    dst: Region | None = None

    def __str__(self) -> str:
        k = self.kind
        if k is Kind.SEND:
            return f"S>{self.peer} {self.src}"
        if k is Kind.RECV:
            return f"R<{self.peer} {self.dst}"
        return f"{self.dst} {'+=' if k is Kind.REDUCE else '='} {self.src}"

    @classmethod
    def parse(cls, text: str) -> Action:
        """Read back the form printed by ``str``."""
        t = text.strip()
        m = re.fullmatch(r"([SR])([<>])(\d+) (\S+)", t)
        if m:
            code, arrow, peer, reg = m.groups()
            if (code, arrow) == ("S", ">"):
                return send(int(peer), Region.parse(reg))
            if (code, arrow) == ("R", "<"):
                return recv(int(peer), Region.parse(reg))
        m = re.fullmatch(r"(\S+) (\+?=) (\S+)", t)
        if m:
            dst, op, src = m.groups()
            make = reduce if op == "+=" else copy
            return make(Region.parse(dst), Region.parse(src))
        raise ValueError(f"expecting an action like 'S>3 out[0:8]', 'R<1 scr[0:8]', "
                         f"'out[0:8] += scr[0:8]' or 'out[0:8] = in[0:8]', got {text!r}")

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind.value}
        if self.peer is not None:
            d["peer"] = self.peer
        if self.src is not None:
            d["src"] = self.src.to_dict()
        if self.dst is not None:
            d["dst"] = self.dst.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Action:
        src = Region.from_dict(d["src"]) if "src" in d else None
        dst = Region.from_dict(d["dst"]) if "dst" in d else None
        return cls(Kind(d["kind"]), d.get("peer"), src, dst)


_SET_KIND, _SET_PEER, _SET_SRC, _SET_DST = (Action.__dict__[f].__set__ for f in ("kind", "peer", "src", "dst"))


def _action(kind: Kind, peer: int | None, src: Region | None, dst: Region | None) -> Action:
    """``Action(kind, peer, src, dst)`` in half the time of the frozen dataclass's __init__ (which
    validates nothing either): plan builders make hundreds of actions per rank."""
    a = _new(Action)
    _SET_KIND(a, kind)
    _SET_PEER(a, peer)
    _SET_SRC(a, src)
    _SET_DST(a, dst)
    return a


def send(peer: int, src: Region) -> Action:
    """Send ``src`` to ``peer``."""
    return _action(Kind.SEND, peer, src, None)


def recv(peer: int, dst: Region) -> Action:
    """Receive from ``peer`` into ``dst``."""
    return _action(Kind.RECV, peer, None, dst)


def reduce(dst: Region, src: Region) -> Action:
    """``dst <- dst op src``."""
    return _action(Kind.REDUCE, None, src, dst)


def copy(dst: Region, src: Region) -> Action:
    """``dst <- src``."""
    return _action(Kind.COPY, None, src, dst)


def with_peer(a: Action, peer: int) -> Action:
    """``a`` with its peer renamed ``peer``."""
    return _action(a.kind, peer, a.src, a.dst)


def with_regions(a: Action, peer: int | None, src: Region | None, dst: Region | None) -> Action:
    """``a``'s kind with ``peer``, ``src`` and ``dst`` (a step moved elsewhere)."""
    return _action(a.kind, peer, src, dst)


@dataclass(frozen=True, slots=True)
class Step:
    """Concurrent transfers, then local operations in order."""

    transfers: tuple[Action, ...] = ()
    local: tuple[Action, ...] = ()

    def __str__(self) -> str:
        return "; ".join(str(a) for a in self.transfers + self.local)

    @classmethod
    def parse(cls, text: str) -> Step:
        """Read back the form printed by ``str``."""
        acts = [Action.parse(p) for p in text.split(";") if p.strip()]
        xfer = tuple(a for a in acts if a.kind in (Kind.SEND, Kind.RECV))
        local = tuple(a for a in acts if a.kind not in (Kind.SEND, Kind.RECV))
        return cls(xfer, local)

    def to_dict(self) -> dict[str, Any]:
        return {"transfers": [a.to_dict() for a in self.transfers],
                "local": [a.to_dict() for a in self.local]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Step:
        return cls(tuple(Action.from_dict(a) for a in d["transfers"]),
                   tuple(Action.from_dict(a) for a in d["local"]))


@dataclass(frozen=True, slots=True)
class Plan:
    """One rank's schedule for one collective call, with its metadata.

    ``meta`` holds at least ``op``, ``algo``, ``nranks``, ``count`` and ``in_place``.
    """

    rank: int
    steps: tuple[Step, ...]
    meta: tuple[tuple[str, Any], ...] = field(default=())

    def info(self, key: str, default: Any = None) -> Any:
        """Look up one metadata entry."""
        return dict(self.meta).get(key, default)

    @property
    def step_count(self) -> int:
        """Communication rounds: steps that transfer data."""
        return sum(1 for s in self.steps if s.transfers)

    def count_sent(self) -> int:
        """Elements this rank sends over the whole plan."""
        return sum(a.src.size for s in self.steps for a in s.transfers if a.kind is Kind.SEND)

    def bytes_sent(self, itemsize: int) -> int:
        """Bytes this rank sends, for elements of ``itemsize`` bytes."""
        return self.count_sent() * itemsize

    def scratch_count(self) -> int:
        """Scratch elements the plan needs: one past the highest scratch element it touches."""
        return max(scratch_ends(self.steps))

    def describe(self) -> str:
        """Readable text: a header, then one line per step."""
        head = " ".join(f"{k}={v}" for k, v in self.meta)
        lines = [f"rank {self.rank}: {head}",
                 f"  {self.step_count} rounds, {self.count_sent()} elements sent, "
                 f"{self.scratch_count()} scratch elements"]
        lines += [f"  step {i}: {s}" for i, s in enumerate(self.steps)]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "meta": dict(self.meta), "steps": [s.to_dict() for s in self.steps]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Plan:
        return cls(d["rank"], tuple(Step.from_dict(s) for s in d["steps"]), tuple(d["meta"].items()))


def scratch_ends(steps, below: int | None = None) -> tuple[int, int]:
    """One past the highest scratch element that ``steps`` touch with regions starting below ``below``, and with
    the others (``below`` None: all of them, the second)."""
    low = high = 0
    scr = Buf.SCRATCH
    for s in steps:
        for acts in (s.transfers, s.local):
            for a in acts:
                for r in (a.src, a.dst):
                    if r is not None and r.buf is scr and r.count:
                        if below is not None and r.offset < below:
                            low = max(low, r.end)
                        else:
                            high = max(high, r.end)
    return low, high
