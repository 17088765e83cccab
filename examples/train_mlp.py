"""Data-parallel training of a small MLP, gradients all-reduced by bucket while the next ones are computed.

    mpiexec -n 4 python examples/train_mlp.py --comm pyhccl
    mpiexec -n 4 python examples/train_mlp.py --comm mpi4py     # the same loss curve, bit for bit

Every rank holds the whole model and a shard of each global batch. Back-propagation produces the
gradients layer by layer from the last; each layer's gradients form one bucket, handed to
``Iallreduce`` at once, while the previous layer's gradients are computed (as PyTorch DDP and
Horovod do). pyhccl's requests progress when they are tested or waited on, so the loop tests the
outstanding ones after each layer (``MPI.Request.Testall``) and waits for each before the update.

Bitwise equal curves on either communicator: a float sum depends on its order, and MPICH's
algorithms and HCCL's add the ranks' gradients in different orders, so float all-reduces would
agree only to rounding. The buckets are therefore reduced in fixed point: gradients are rounded
to multiples of 2**-32 and summed as int64, which is exact in any order (a deterministic
all-reduce). Equal curves then say that both communicators computed the exact sum, every step.

Printed at the end (rank 0): time per epoch, the fraction of the all-reduce time hidden behind
back-propagation, and the per-call cost of a persistent ``Allreduce_init`` replay against a blocking
``Allreduce`` at 8 B to 4 KiB. ``--torch`` keeps the buckets as PyTorch CPU tensors (when torch is
installed), handed to the communicator through DLPack.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from mpi4py import MPI

#: Fixed point: gradients are summed as int64 multiples of 2**-SHIFT (exact in any order).
SHIFT = 32


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--comm", choices=("pyhccl", "mpi4py"), default="pyhccl", help="the communicator")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--samples", type=int, default=8192, help="synthetic training samples")
    p.add_argument("--batch", type=int, default=256, help="global batch (split over the ranks)")
    p.add_argument("--hidden", type=int, default=256, help="width of the two hidden layers")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--torch", action="store_true", help="buckets as PyTorch CPU tensors (needs torch)")
    p.add_argument("--reps", type=int, default=300, help="calls per size in the per-call cost table (0: skip)")
    p.add_argument("--log", help="rank 0 writes the loss curve and the figures here (JSON)")
    return p.parse_args()


def make_comm(kind: str) -> MPI.Intracomm:
    if kind == "mpi4py":
        return MPI.COMM_WORLD
    import pyhccl
    return pyhccl.Communicator(MPI.COMM_WORLD)


def synthetic(samples: int, features: int, classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A teacher MLP's labels for Gaussian inputs: learnable, the same on every rank."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((samples, features)).astype(np.float32)
    w1 = rng.standard_normal((features, 32)).astype(np.float32)
    w2 = rng.standard_normal((32, classes)).astype(np.float32)
    return x, np.argmax(np.tanh(x @ w1) @ w2, axis=1)


class MLP:
    """Linear -> ReLU -> Linear -> ReLU -> Linear, softmax cross-entropy; numpy float32."""

    def __init__(self, sizes: list[int], seed: int) -> None:
        rng = np.random.default_rng(seed + 1)
        self.params = []
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
            w = (rng.standard_normal((fan_in, fan_out)) * np.sqrt(2.0 / fan_in)).astype(np.float32)
            self.params.append((w, np.zeros(fan_out, np.float32)))

    def forward(self, x: np.ndarray) -> list[np.ndarray]:
        acts = [x]
        for i, (w, b) in enumerate(self.params):
            z = acts[-1] @ w + b
            acts.append(np.maximum(z, 0) if i < len(self.params) - 1 else z)
        return acts

    @staticmethod
    def loss_and_delta(logits: np.ndarray, y: np.ndarray, scale: float) -> tuple[float, np.ndarray]:
        """Summed cross-entropy of the shard and d(loss)/d(logits), both times ``scale`` (1 / global batch)."""
        z = logits - logits.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        rows = np.arange(len(y))
        loss = -np.log(p[rows, y] + 1e-12).sum() * scale
        p[rows, y] -= 1
        return float(loss), p * np.float32(scale)

    def layer_grads(self, acts: list[np.ndarray], delta: np.ndarray):
        """Yield ``(layer, dW, db)`` from the last layer to the first; the caller runs between yields."""
        for i in range(len(self.params) - 1, -1, -1):
            dw, db = acts[i].T @ delta, delta.sum(axis=0)
            if i:
                delta = (delta @ self.params[i][0].T) * (acts[i] > 0)
            yield i, dw, db


class Buckets:
    """One int64 bucket per layer (its dW and db in fixed point), reduced with Iallreduce."""

    def __init__(self, model: MLP, use_torch: bool) -> None:
        self.send = [np.empty(w.size + b.size, np.int64) for w, b in model.params]
        self.recv = [np.empty_like(s) for s in self.send]
        if use_torch:
            import torch                    # the buckets as torch tensors over the same memory (DLPack)
            self.args = [(torch.from_numpy(s), torch.from_numpy(r)) for s, r in zip(self.send, self.recv)]
        else:
            self.args = list(zip(self.send, self.recv))

    def fill(self, i: int, dw: np.ndarray, db: np.ndarray) -> None:
        s, k = self.send[i], dw.size
        np.rint(dw.ravel() * 2.0 ** SHIFT, out=s[:k], casting="unsafe")
        np.rint(db * 2.0 ** SHIFT, out=s[k:], casting="unsafe")

    def apply(self, model: MLP, lr: float) -> None:
        for (w, b), r in zip(model.params, self.recv):
            g = r.astype(np.float64) * 2.0 ** -SHIFT
            w -= (lr * g[:w.size]).reshape(w.shape).astype(np.float32)
            b -= (lr * g[w.size:]).astype(np.float32)


def train_step(comm, model: MLP, buckets: Buckets, x: np.ndarray, y: np.ndarray, scale: float,
               lr: float) -> tuple[float, float]:
    """One step; returns (this shard's loss, seconds spent waiting for the all-reduces after back-propagation)."""
    acts = model.forward(x)
    loss, delta = model.loss_and_delta(acts[-1], y, scale)
    reqs = []
    for i, dw, db in model.layer_grads(acts, delta):
        buckets.fill(i, dw, db)
        reqs.append(comm.Iallreduce(*buckets.args[i]))
        MPI.Request.Testall(reqs)           # progress the buckets in flight while the next layer is computed
    t = time.perf_counter()
    for req in reqs:                        # in the order they were started
        req.Wait()
    exposed = time.perf_counter() - t
    buckets.apply(model, lr)
    return loss, exposed


def comm_alone(comm, buckets: Buckets, reps: int = 5) -> float:
    """Seconds the step's all-reduces take with nothing to overlap (median of ``reps``)."""
    times = []
    for _ in range(reps):
        comm.Barrier()
        t = time.perf_counter()
        for req in [comm.Iallreduce(*a) for a in reversed(buckets.args)]:
            req.Wait()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def per_call_costs(comm, reps: int) -> list[tuple[int, float, float]]:
    """``(bytes, blocking us, persistent us)`` per call of a float64 Allreduce at 8 B .. 4 KiB."""
    rows = []
    for nbytes in (8, 64, 512, 4096):
        x = np.ones(nbytes // 8)
        y = np.empty_like(x)
        comm.Allreduce(x, y)                # agreed and warm
        comm.Barrier()
        t = time.perf_counter()
        for _ in range(reps):
            comm.Allreduce(x, y)
        blocking = (time.perf_counter() - t) / reps
        req = comm.Allreduce_init(x, y)
        req.Start()
        req.Wait()
        comm.Barrier()
        t = time.perf_counter()
        for _ in range(reps):
            req.Start()
            req.Wait()
        persistent = (time.perf_counter() - t) / reps
        req.Free()
        rows.append((nbytes, blocking * 1e6, persistent * 1e6))
    return rows


def main() -> None:
    args = parse_args()
    comm = make_comm(args.comm)
    rank, size = comm.Get_rank(), comm.Get_size()
    if args.batch % size:
        raise SystemExit(f"--batch {args.batch}: expecting a multiple of the rank count {size}")
    features, classes = 32, 8
    x, y = synthetic(args.samples, features, classes, args.seed)
    model = MLP([features, args.hidden, args.hidden, classes], args.seed)
    buckets = Buckets(model, args.torch)
    shard, scale = args.batch // size, 1.0 / args.batch
    steps = args.samples // args.batch
    order_rng = np.random.default_rng(args.seed + 2)
    losses, epoch_times, exposed_per_step = [], [], []
    total = np.zeros(1, np.int64)
    for epoch in range(args.epochs):
        order = order_rng.permutation(args.samples)          # the same on every rank
        comm.Barrier()
        t0 = time.perf_counter()
        epoch_loss = 0
        for s in range(steps):
            rows = order[s * args.batch + rank * shard:s * args.batch + (rank + 1) * shard]
            loss, exposed = train_step(comm, model, buckets, x[rows], y[rows], scale, args.lr)
            epoch_loss += int(np.rint(loss * 2.0 ** SHIFT))
            exposed_per_step.append(exposed)
        epoch_times.append(time.perf_counter() - t0)
        comm.Allreduce(np.array([epoch_loss], np.int64), total)   # fixed point: exact, order-free
        losses.append(float(total[0]) * 2.0 ** -SHIFT / steps)
        if rank == 0:
            print(f"epoch {epoch}: loss {losses[-1]!r}  {epoch_times[-1]:.3f} s", flush=True)
    alone = comm_alone(comm, buckets)
    exposed = float(np.median(exposed_per_step))
    hidden = min(1.0, max(0.0, 1.0 - exposed / alone)) if alone > 0 else 0.0
    costs = per_call_costs(comm, args.reps) if args.reps else []
    if rank == 0:
        print(f"{args.comm} on {size} ranks: {np.mean(epoch_times):.3f} s per epoch; all-reduce of the "
              f"{len(buckets.send)} buckets alone {alone * 1e3:.2f} ms, exposed after back-propagation "
              f"{exposed * 1e3:.2f} ms per step: {hidden:.0%} of the communication hidden behind compute")
        for nbytes, blocking, persistent in costs:
            print(f"Allreduce {nbytes:5d} B: blocking {blocking:8.1f} us/call, persistent (Start+Wait) "
                  f"{persistent:8.1f} us/call")
        if args.log:
            with open(args.log, "w") as f:
                json.dump({"comm": args.comm, "ranks": size, "losses": losses, "epoch_s": epoch_times,
                           "hidden": hidden, "comm_alone_s": alone, "exposed_s": exposed,
                           "per_call_us": costs}, f)
    if args.comm == "pyhccl":
        comm.release()


if __name__ == "__main__":
    main()
