"""PYHCCL_ALGO: HCCL_ALGO's two grammars and a plain algorithm name, parsed strictly.

HCCL source: src/common/alg_parse.cc (``HcclAlgoParser``, ``UpdateCostModelWithAlgo``) for the
cost-model grammar, src/common/alg_env_config.cc (``SetHcclAlgoConfig``) for the legacy one;
hccl-selection.md §4.6 (older-snapshot text, not re-audited there).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..algo.names import ENGINE_PREFIXES, EXECUTOR_TYPES, OP_TYPES, TEMPLATE_TYPES, OpExecuteConfig, close_matches
from ..algo.names import parse_name
from ..algo.registry import names

__all__ = ["Item", "Segment", "Override", "parse_override", "LEGACY_ALGOS", "LEGACY_OPS"]

#: Legacy level tokens -> HcclAlgoType (src/common/alg_type.h), case-sensitive.
LEGACY_ALGOS = ("null", "ring", "pipeline", "fullmesh", "H-D_R", "pairwise", "NHR", "NHR_V1", "AHC", "AHC_BROKE",
                "NB", "NA")
#: Legacy per-op keys (alg_env_config.cc); ``others`` is rejected by the second pass.
LEGACY_OPS = ("broadcast", "allreduce", "reduce", "send", "receive", "allgather", "reducescatter", "alltoall",
              "gather", "scatter", "sendrecv")
HCCL_ALGO_LEVEL_NUM = 4                     # alg_env_config.cc
_LEGACY = re.compile(r"(^|[;=/])level\d\s*:", re.IGNORECASE)
_ITEM = re.compile(r"^(?:level(\d+)=)?(not\()?([A-Za-z0-9_\-]+)(\))?$", re.IGNORECASE)


@dataclass(frozen=True)
class Item:
    """One template of a unit, at an optional explicit level, possibly negated."""

    template: str               # lower-case key
    level: int | None = None
    negated: bool = False


@dataclass(frozen=True)
class Segment:
    """``[op:] [not(] executor{items} [)]``; ``op`` is None for every op."""

    op: str | None
    executor: str               # lower-case key
    items: tuple[Item, ...]
    negated: bool = False

    def templates(self) -> list[Item | None]:
        """Items placed by level (explicit levels first, gaps compacted, the rest appended)."""
        placed = sorted((it for it in self.items if it.level is not None), key=lambda it: it.level)
        return placed + [it for it in self.items if it.level is None]

    def matches(self, name: str) -> bool:
        """Whether ``name``'s executor and templates fit this segment (case-insensitive)."""
        p = parse_name(name)
        if p.executor.lower() != EXECUTOR_TYPES[self.executor].lower():
            return False
        tpls = self.templates()
        if not tpls:
            return True
        got = [t.lower() for t in p.templates]
        if len(got) != len(tpls):
            return False
        return all((g != TEMPLATE_TYPES[it.template].lower()) if it.negated else
                   (g == TEMPLATE_TYPES[it.template].lower()) for g, it in zip(got, tpls))


@dataclass(frozen=True)
class Override:
    """A parsed PYHCCL_ALGO: a plain name, cost-model segments, or a legacy table."""

    text: str
    kind: str                                   # "name" | "grammar" | "legacy"
    name: str | None = None
    segments: tuple[Segment, ...] = ()
    legacy: tuple[tuple[str | None, tuple[tuple[int, str], ...]], ...] = ()

    def names_op(self, op: str) -> bool:
        """Whether the override speaks about ``op`` (a segment without op speaks about all)."""
        if self.kind == "name":
            return parse_name(self.name).op == op
        if self.kind == "grammar":
            return any(s.op is None or OP_TYPES[s.op] == op for s in self.segments)
        return False

    def allowed(self, op: str, engines: tuple[OpExecuteConfig, ...]) -> set[str] | None:
        """``UpdateCostModelWithAlgo`` for ``op``: the names left, or None when the override leaves op alone."""
        if self.kind != "grammar" or not self.names_op(op):
            return None
        prefixes = [p for p, e in ENGINE_PREFIXES.items() if e in engines]
        left = {n for n in names(op) if any(n.startswith(p) for p in prefixes) or _p2p(n)}
        for seg in reversed(self.segments):              # later segments have priority
            if seg.op is not None and OP_TYPES[seg.op] != op:
                continue
            hits = {n for n in left if seg.matches(n)}
            if seg.negated:
                left -= hits
                if hits:
                    break
            elif hits:
                left = hits
                break
        return left


    def dead_segments(self, op: str, engines: tuple[OpExecuteConfig, ...]) -> list[str]:
        """Positive segments that name ``op`` explicitly but match none of its algorithms on ``engines``.

        HCCL ignores such a segment silently; pyhccl reports it as an error (never a silent fallback).
        """
        if self.kind != "grammar":
            return []
        prefixes = [p for p, e in ENGINE_PREFIXES.items() if e in engines]
        pool = [n for n in names(op) if any(n.startswith(p) for p in prefixes)]
        return [_show(seg) for seg in self.segments if seg.op is not None and OP_TYPES[seg.op] == op
                and not seg.negated and not any(seg.matches(n) for n in pool)]


def _show(seg: Segment) -> str:
    items = ",".join(f"{'level%d=' % it.level if it.level is not None else ''}"
                     f"{'not(%s)' % it.template if it.negated else it.template}" for it in seg.items)
    return f"{seg.op + ':' if seg.op else ''}{seg.executor}{{{items}}}"


def _p2p(name: str) -> bool:
    low = name.lower()
    return "send" in low or "recv" in low


def _key(word: str, table: dict[str, str], what: str, text: str) -> str:
    key = word.replace("_", "").replace("-", "").lower()
    if key not in table:
        raise ValueError(f"unknown {what} {word!r} in PYHCCL_ALGO {text!r}{close_matches(key, table)}; "
                         f"valid: {', '.join(table)}")
    return key


def parse_override(text: str) -> Override:
    """Parse a PYHCCL_ALGO value.

    Raises:
        ValueError: an unknown token (op, executor, template, legacy level or algorithm) or a
            malformed expression; the message lists the valid choices.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"expecting PYHCCL_ALGO as a non-empty string, got {text!r}")
    s = "".join(text.split())
    if s in set(names()):
        return Override(text, "name", name=s)
    if _LEGACY.search(s):
        return _parse_legacy(text, s)
    if re.fullmatch(r"(Aicpu|Aiv|Dpu|CcuMS|CcuSched|CcuMs)[A-Z]\w*", s):
        raise ValueError(f"unknown algorithm {s!r} in PYHCCL_ALGO{close_matches(s, names())}")
    return Override(text, "grammar", segments=tuple(_parse_segment(seg, text) for seg in _split(s, text)))


def _split(s: str, text: str) -> list[str]:
    depth, out, cur = 0, [], ""
    for ch in s:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == ";" and depth:
            raise ValueError(f"';' inside braces in PYHCCL_ALGO {text!r}")
        if ch == ";" and not depth:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    if depth or any(not part for part in out):
        raise ValueError(f"malformed PYHCCL_ALGO {text!r}: unbalanced braces or an empty segment")
    return out


def _parse_segment(seg: str, text: str) -> Segment:
    op = None
    head, sep, rest = seg.partition(":")
    if sep:
        op, seg = _key(head, OP_TYPES, "op type", text), rest
    negated = seg.lower().startswith("not(") and seg.endswith(")")
    if negated:
        seg = seg[4:-1]
    m = re.fullmatch(r"([A-Za-z0-9_\-]+)(?:\{(.*)\})?", seg)
    if not m:
        raise ValueError(f"malformed segment {seg!r} in PYHCCL_ALGO {text!r}; e.g. allreduce:sequence{{mesh,nhr}}")
    word, body = m.groups()
    if body is None:                                 # bare template = sole{template}
        return Segment(op, "sole", (Item(_key(word, TEMPLATE_TYPES, "template", text)),), negated)
    executor = _key(word, EXECUTOR_TYPES, "executor", text)
    items = []
    for part in filter(None, body.split(",")):
        im = _ITEM.fullmatch(part)
        if not im or bool(im.group(2)) != bool(im.group(4)):
            raise ValueError(f"malformed item {part!r} in PYHCCL_ALGO {text!r}; e.g. level0=mesh or not(nhr)")
        items.append(Item(_key(im.group(3), TEMPLATE_TYPES, "template", text),
                          int(im.group(1)) if im.group(1) else None, bool(im.group(2))))
    return Segment(op, executor, tuple(items), negated)


def _parse_legacy(text: str, s: str) -> Override:
    parts = s.split("/")
    per_op = [p for p in parts if "=" in p.split(":")[0]]
    if per_op and len(per_op) != len(parts):
        raise ValueError(f"PYHCCL_ALGO {text!r} mixes the global and the per-op legacy forms")
    if not per_op and len(parts) > 1:
        raise ValueError(f"PYHCCL_ALGO {text!r} has more than one global legacy entry")
    table = []
    for part in parts:
        op = None
        if per_op:
            op, _, part = part.partition("=")
            if op not in LEGACY_OPS:
                raise ValueError(f"unknown legacy op {op!r} in PYHCCL_ALGO {text!r}{close_matches(op, LEGACY_OPS)}; "
                                 f"valid: {', '.join(LEGACY_OPS)}")
        levels: dict[int, str] = {}
        for entry in part.split(";"):
            lv, sep, algo = entry.partition(":")
            m = re.fullmatch(r"level(\d)", lv)
            if not sep or not m or int(m.group(1)) >= HCCL_ALGO_LEVEL_NUM:
                raise ValueError(f"malformed legacy entry {entry!r} in PYHCCL_ALGO {text!r}; "
                                 f"expecting level0..level{HCCL_ALGO_LEVEL_NUM - 1}:<algo>")
            if algo not in LEGACY_ALGOS:
                raise ValueError(f"unknown legacy algorithm {algo!r} in PYHCCL_ALGO {text!r}"
                                 f"{close_matches(algo, LEGACY_ALGOS)}; valid: {', '.join(LEGACY_ALGOS)}")
            level = int(m.group(1))
            if level in levels:
                raise ValueError(f"level{level} repeated in PYHCCL_ALGO {text!r}")
            if op is not None and level == 0 and algo == "null":
                raise ValueError(f"per-op level0 may not be null in PYHCCL_ALGO {text!r}")
            levels[level] = algo
        table.append((op, tuple(sorted(levels.items()))))
    return Override(text, "legacy", legacy=tuple(table))
