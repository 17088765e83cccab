"""What a finished simulation's output holds against the postcondition: the wrong output ranges, described.

The simulator (:mod:`pyhccl.verify.sim`) calls :func:`wrong_ranges` after the last step and raises
a ``SimulationError`` listing them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .atoms import batches, ranges

__all__ = ["Mismatch", "wrong_ranges", "ranks_text"]

_POST_BATCH = 1 << 23      # output atoms checked at a time


@dataclass(frozen=True, slots=True)
class Mismatch:
    """One output range that does not hold what it must."""

    rank: int
    buf: str
    lo: int
    hi: int
    expected: str
    got: str
    step: int | None

    def __str__(self) -> str:
        at = f" (last written at step {self.step})" if self.step is not None and self.step >= 0 else ""
        return f"rank {self.rank} {self.buf}[{self.lo}:{self.hi}]: expected {self.expected}, got {self.got}{at}"


def wrong_ranges(sim) -> list[Mismatch]:
    """The output ranges of ``sim`` (a finished ``_Sim``) that do not hold what the postcondition demands, in
    (rank, offset) order: at most 8 per contribution, and past 32 only the rest of that rank's."""
    g, v, post = sim.g.keys, sim.g, sim.post
    bad: list[Mismatch] = []
    per: dict[tuple[int, int], int] = {}
    stop_rank = None
    for idx, c, i, lo in _wrong_atoms(sim):
        for a, ci, ii, start in zip(idx.tolist(), c.tolist(), i.tolist(), lo.tolist()):
            r = int(post.rank[ci])
            if stop_rank is not None and r != stop_rank:
                break
            if per.get((ci, ii), 0) >= 8:
                continue
            per[ci, ii] = per.get((ci, ii), 0) + 1
            card, key, mask = (int(x) for x in post.expect[post.sid[ci] + ii * post.sid_step[ci]])
            base = int(sim.base(r, 1))
            end = min(int(g[a + 1]), int(sim.post_lo[ci] + (ii + 1) * post.cnt[ci])) - base
            got = _describe(sim, int(v.card[a]), int(v.mask[a]) if sim.use_mask else 0,
                            int(v.origin[a]) - int(g[a] - base), key_ok=bool(v.key[a] == key))
            shift = int(post.shift[ci] + ii * post.shift_step[ci])
            bad.append(Mismatch(r, "out", start - base, end, _describe(sim, card, mask, shift), got,
                                int(v.writer[a])))
            if len(bad) >= 32:
                stop_rank = r
        else:
            continue
        break
    return bad


def _wrong_atoms(sim):
    """The output atoms that do not hold what the postcondition demands, in (rank, offset) order, a batch
    of rows (about ``_POST_BATCH`` atoms) at a time: ``(atom, row, its contribution in the row, the key
    the atom's check starts at)``. An atom that runs over the end of its contribution is wrong: the
    next contribution in a row is another set."""
    post, g, v = sim.post, sim.g.keys, sim.g
    lo = sim.post_lo
    first, past = np.searchsorted(g, lo), np.searchsorted(g, lo + post.cnt * post.rep)
    for a, b in batches(past - first, _POST_BATCH):
        idx, c = ranges(first[a:b], past[a:b])
        c += a
        u = g[idx] - lo[c]                     # the atom's offset in its row
        cnt = post.cnt[c]
        i = u // cnt
        e = post.sid[c] + i * post.sid_step[c]
        out = u + post.off[c]                  # its output index
        ok = ((v.card[idx] == post.expect[e, 0]) & (v.key[idx] == post.expect[e, 1])
              & (v.origin[idx] == out + post.shift[c] + i * post.shift_step[c]))
        if sim.use_mask:
            ok &= v.mask[idx] == post.expect[e, 2]
        over = ok & (g[idx + 1] - lo[c] > (i + 1) * cnt)      # right up to the next contribution: wrong there
        wrong = np.flatnonzero(~ok | over)
        if len(wrong):
            i = i[wrong] + over[wrong]
            c = c[wrong]
            yield idx[wrong], c, i, np.maximum(g[idx[wrong]], lo[c] + i * post.cnt[c])


def _describe(sim, card: int, mask: int, shift: int, key_ok: bool | None = None) -> str:
    if card == 0:
        return "no data"
    who = f"ranks {ranks_text(mask)}" if sim.use_mask else f"{card} contributions"
    if sim.use_mask is False and key_ok is False:
        who += " (not the right ranks)"
    return f"{who} of input index +{shift}" if shift >= 0 else f"{who} of input index {shift}"


def ranks_text(mask: int) -> str:
    """A bit set of ranks as ``{0,3,5}``."""
    mask = int(mask) & (1 << 64) - 1
    rs = [i for i in range(mask.bit_length()) if mask >> i & 1]
    return "{" + ",".join(map(str, rs)) + "}"

