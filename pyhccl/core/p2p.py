"""HCCL's point-to-point ops as one call: BatchSendRecv's item lists; a Send/Recv pair and SendRecv are cases of it.

HCCL (``HcclBatchSendRecv``, ``HcclSendRecvItem{sendRecvType, buf, count, dataType, remoteRank}``)
takes on every rank a list of items, each a send to or a receive from one peer (itself
included), the same pair possibly several times. pyhccl packs a rank's send items one after the
other in its input buffer and its receive items in its output buffer, in list order. The k-th
send of rank p to rank r meets the k-th receive of r from p: their counts must agree.
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["KINDS", "Items", "sendrecv_items", "pair_items", "check_items", "layout"]

KINDS = ("send", "recv")
#: Per rank, a tuple of ``(kind, peer, count)``.
Items = tuple[tuple[tuple[str, int, int], ...], ...]


def sendrecv_items(n: int, count: int, shift: int = 1) -> Items:
    """SendRecv on every rank: send ``count`` to rank r+shift, receive ``count`` from rank r-shift (mod n)."""
    return tuple((("send", (r + shift) % n, count), ("recv", (r - shift) % n, count)) for r in range(n))


def pair_items(n: int, src: int, dst: int, count: int) -> Items:
    """One Send on ``src`` and its Recv on ``dst``; the other ranks have no items."""
    return tuple(((("send", dst, count),) if r == src else ()) + ((("recv", src, count),) if r == dst else ())
                 for r in range(n))


def check_items(items, n: int) -> Items:
    """``items`` as tuples, checked: n lists of (send|recv, peer in range(n), count >= 0), every send met.

    Raises:
        ValueError: naming the rank and item, or the pair whose sends and receives differ.
    """
    if items is None or len(items) != n:
        raise ValueError(f"batch_send_recv needs items: {n} lists of (kind, peer, count), got "
                         f"{None if items is None else len(items)} lists")
    out = []
    for r, row in enumerate(items):
        got = []
        for i, it in enumerate(row):
            try:
                kind, peer, count = it
            except (TypeError, ValueError):
                raise ValueError(f"expecting items[{r}][{i}] as (kind, peer, count), got {it!r}") from None
            kind = str(kind).lower()
            if kind not in KINDS or not 0 <= int(peer) < n or int(count) < 0:
                raise ValueError(f"expecting items[{r}][{i}] as ('send' or 'recv', peer in range({n}), count >= 0), "
                                 f"got {it!r}")
            got.append((kind, int(peer), int(count)))
        out.append(tuple(got))
    items = tuple(out)
    layout(items)           # raises where sends and receives differ
    return items


@lru_cache(maxsize=64)
def layout(items: Items) -> tuple:
    """Per rank ``(sends, recvs)``: sends as ``(offset, count, peer)`` in the input, receives as
    ``(offset, count, peer, offset of the matching send in the peer's input)`` in the output.

    Items of count 0 move nothing (HCCL drops them). Between one pair of ranks HCCL orders the
    items by count, largest first, list order among equals (SortSendItems / SortRecvItems, and
    SortSelfItems for a rank's items to itself, ins_v2_batch_send_recv_executor.cc): the k-th send
    of p to r in that order meets the k-th receive of r from p, and their counts must agree.

    Raises:
        ValueError: rank p sends to r other counts than r receives from p.
    """
    n = len(items)
    sends, recvs = [], []
    for row in items:
        s, rv, at_in, at_out = [], [], 0, 0
        for kind, peer, count in row:
            if kind == "send":
                s.append((at_in, count, peer))
                at_in += count
            else:
                rv.append((at_out, count, peer))
                at_out += count
        sends.append(s)
        recvs.append(rv)
    queue: dict[tuple[int, int], list] = {}
    for p in range(n):
        for off, count, r in sends[p]:
            if count:
                queue.setdefault((p, r), []).append((off, count))
    for q in queue.values():
        q.sort(key=lambda x: -x[1])
    out = []
    for r in range(n):
        done = {}
        mine = sorted((i for i, x in enumerate(recvs[r]) if x[1]), key=lambda i: -recvs[r][i][1])
        for i in mine:
            off, count, p = recvs[r][i]
            q = queue.get((p, r))
            if not q or q[0][1] != count:
                what = f"its largest send left is {q[0][1]}" if q else "it sends nothing more to it"
                raise ValueError(f"rank {r} receives {count} elements from rank {p}, but {what} (between two ranks "
                                 f"the sends and the receives must have the same counts)")
            done[i] = (off, count, p, q.pop(0)[0])
        out.append((tuple(sends[r]), tuple(done[i] if i in done else (*recvs[r][i], 0) for i in range(len(recvs[r])))))
    left = [(p, r) for (p, r), q in queue.items() if q]
    if left:
        p, r = left[0]
        raise ValueError(f"rank {p} sends {len(queue[(p, r)])} more item(s) to rank {r} than rank {r} receives")
    return tuple(out)
