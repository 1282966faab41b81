# train.py: a small DDP training program in the style of PyTorch's "Getting
# Started with Distributed Data Parallel" tutorial (ToyModel, gloo, CPU), one
# rank per host, launched directly (no torchrun):
#
#   MASTER_ADDR=n0 MASTER_PORT=29500 RANK=1 WORLD_SIZE=3 \
#       /usr/bin/python3 train.py --protocol legacy
#
# It trains --steps steps; every --save-every steps every rank saves a
# checkpoint on its own disk (atomically, with a sha256).  --protocol:
#   legacy         the tutorial's init_process_group("gloo", rank=...,
#                  world_size=...): gloo's default timeout, 30 minutes.
#   short-timeout  the same with init_process_group(..., timeout=
#                  timedelta(seconds=--timeout)), as users lower it to notice a
#                  stuck collective sooner: a collective that cannot finish
#                  raises gloo's RuntimeError, and the job dies of it.
#   fixed          the short timeout, and the error caught: every rank
#                  destroys its process group, meets the others again at a
#                  new rendezvous (port MASTER_PORT + attempt, a store of its
#                  own with a rendezvous timeout long enough for the network
#                  to come back), builds the model afresh and resumes from
#                  the newest checkpoint one of them can verify, which the
#                  lowest rank holding it broadcasts (at most --max-restarts
#                  times; then the error goes up as in short-timeout).
#
# Events (scenarios/frameworks/faultline_events.py): step.start step=N from
# every rank before each step, as a sync point (a fault can land once every
# rank is done with step N-1); pg.failed step=N attempt=A when fixed catches a
# collective's error; restore.done step=N (or restore.none) whenever a
# process group is (re)made; train.done step=N resumed_from=N attempt=A
# loss=X digest=HEX at the end.  At the end every rank also writes
# report/rank<R>.txt (the scenario's final check compares them).
import argparse
import datetime
import hashlib
import io
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.optim as optim
from torch.nn.parallel import DistributedDataParallel as DDP

import faultline_events as fe


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1 = nn.Linear(10, 10)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(10, 5)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


def log(msg):
    print("rank %d: %s" % (RANK, msg), flush=True)


def digest(model, opt):
    """sha256 (16 hex) of the parameters and the optimizer's momentum buffers."""
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(t.detach().contiguous().numpy().tobytes())
    for st in opt.state_dict()["state"].values():
        for k, v in sorted(st.items()):
            if torch.is_tensor(v):
                h.update(v.contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def batch(step):
    """The same batch for (step, rank) whatever happened before: a resumed run
    that restores the right state computes what an uninterrupted one did."""
    g = torch.Generator().manual_seed(1000 * step + RANK)
    return torch.randn(20, 10, generator=g), torch.randn(20, 5, generator=g)


# ---- checkpoints: on every rank's own disk, verified -----------------------


def fsync_dir(d):
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_verified(step, data):
    os.makedirs("ckpt", exist_ok=True)
    name = "ckpt/model-%d.pt" % step
    for path, content in ((name, data), (name + ".sha256",
                                         hashlib.sha256(data).hexdigest().encode())):
        with open(path + ".tmp", "wb") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        os.rename(path + ".tmp", path)
    fsync_dir("ckpt")


def read_verified(step):
    """The bytes of ckpt/model-STEP.pt when they match their sha256, else None."""
    try:
        with open("ckpt/model-%d.pt" % step, "rb") as f:
            data = f.read()
        with open("ckpt/model-%d.pt.sha256" % step, "rb") as f:
            want = f.read().decode().strip()
    except OSError:
        return None
    return data if hashlib.sha256(data).hexdigest() == want else None


def newest_verified():
    steps = []
    if os.path.isdir("ckpt"):
        for name in os.listdir("ckpt"):
            if name.startswith("model-") and name.endswith(".pt"):
                try:
                    steps.append(int(name[6:-3]))
                except ValueError:
                    pass
    for s in sorted(steps, reverse=True):
        if read_verified(s) is not None:
            return s
    return -1


def save(step, ddp, opt):
    buf = io.BytesIO()
    torch.save({"step": step, "model": ddp.state_dict(), "optim": opt.state_dict()}, buf)
    write_verified(step, buf.getvalue())
    dist.barrier()


def resume(ddp, opt):
    """The newest checkpoint some rank can verify, from the lowest rank that
    holds it, loaded by every rank: (step, source rank, sha256), or (0, -1,
    None) when no rank has one."""
    have = [None] * WORLD
    dist.all_gather_object(have, newest_verified())
    best = max(have)
    if best < 0:
        return 0, -1, None
    src = have.index(best)
    box = [read_verified(best) if RANK == src else None]
    dist.broadcast_object_list(box, src=src)
    data = box[0]
    ck = torch.load(io.BytesIO(data))
    if ck["step"] != best:
        raise RuntimeError("rank %d's checkpoint model-%d.pt holds step %d" % (src, best, ck["step"]))
    ddp.load_state_dict(ck["model"])
    opt.load_state_dict(ck["optim"])
    if have[RANK] != best:
        write_verified(best, data)
    return best, src, hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------


class CollectiveFailed(Exception):
    """fixed: a collective of step STEP raised ERROR (gloo's RuntimeError)."""

    def __init__(self, step, error):
        super().__init__("step %d: %s" % (step, error))
        self.step, self.error = step, error


def join(attempt):
    """Makes the default process group of this attempt."""
    if ARGS.protocol == "legacy":
        # the tutorial (env://: MASTER_ADDR, MASTER_PORT): gloo's default
        # timeout, 30 minutes
        dist.init_process_group("gloo", rank=RANK, world_size=WORLD)
        return
    timeout = datetime.timedelta(seconds=ARGS.timeout)
    if ARGS.protocol == "short-timeout":
        dist.init_process_group("gloo", rank=RANK, world_size=WORLD, timeout=timeout)
        return
    # fixed: each attempt meets at a rendezvous of its own, whose store waits
    # as long as a peer may take to come back; the collectives keep the short
    # timeout
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]) + attempt,
                          WORLD, RANK == 0,
                          timeout=datetime.timedelta(seconds=ARGS.rendezvous_timeout))
    dist.init_process_group("gloo", store=store, rank=RANK, world_size=WORLD, timeout=timeout)


def train(attempt):
    """One process group's life: join, resume, train to the end.  Returns
    (step resumed from, last loss, digest).  fixed: an error of a collective
    (gloo's RuntimeError, from DDP's allreduce, a barrier or a
    broadcast) becomes CollectiveFailed, with the step it came at."""
    t0 = time.monotonic()
    join(attempt)
    log("joined %d ranks (attempt %d, %.1f s)" % (WORLD, attempt, time.monotonic() - t0))
    at = [0]  # the step in progress
    try:
        return steps(attempt, at)
    except RuntimeError as e:
        if ARGS.protocol != "fixed":
            raise
        raise CollectiveFailed(at[0], e) from e


def steps(attempt, at):
    torch.manual_seed(0)
    model = ToyModel()
    ddp = DDP(model)  # broadcasts rank 0's parameters
    opt = optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.MSELoss()

    start, src, sha = resume(ddp, opt)
    if start > 0:
        log("resumed from step %d (rank %d's copy, sha256 %s)" % (start, src, sha[:16]))
        fe.event("restore.done", step=start, attempt=attempt)
    else:
        fe.event("restore.none", attempt=attempt)

    for step in range(start + 1, ARGS.steps + 1):
        at[0] = step
        fe.sync("step.start", step=step)
        t = time.monotonic()
        x, y = batch(step)
        opt.zero_grad()
        loss = loss_fn(ddp(x), y)
        loss.backward()  # DDP allreduces the gradients here
        opt.step()
        log("step %d loss %.6f (%.2f s)" % (step, loss.item(), time.monotonic() - t))
        if step % ARGS.save_every == 0:
            save(step, ddp, opt)
            log("step %d saved" % step)
    return start, loss.item(), digest(ddp, opt)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--protocol", choices=["legacy", "short-timeout", "fixed"], required=True)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--save-every", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=5, help="gloo's timeout, seconds")
    ap.add_argument("--rendezvous-timeout", type=float, default=60)
    ap.add_argument("--max-restarts", type=int, default=3)
    global ARGS, RANK, WORLD
    ARGS = ap.parse_args()
    RANK = int(os.environ["RANK"])
    WORLD = int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(1)

    attempt = 0
    while True:
        try:
            resumed, loss, d = train(attempt)
            break
        except CollectiveFailed as e:
            if attempt >= ARGS.max_restarts:
                raise e.error
            log("step %d failed: %s" % (e.step, str(e.error).splitlines()[0]))
            log("re-initialising the process group (attempt %d of %d)"
                % (attempt + 1, ARGS.max_restarts))
            fe.event("pg.failed", step=e.step, attempt=attempt)
            dist.destroy_process_group()
            attempt += 1

    log("done at step %d, resumed from %d, attempt %d, loss %.6f, digest %s"
        % (ARGS.steps, resumed, attempt, loss, d))
    os.makedirs("report", exist_ok=True)
    with open("report/rank%d.txt.tmp" % RANK, "w") as f:
        f.write("rank=%d attempt=%d resumed_from=%d step=%d digest=%s\n" %
                (RANK, attempt, resumed, ARGS.steps, d))
    os.rename("report/rank%d.txt.tmp" % RANK, "report/rank%d.txt" % RANK)
    fe.event("train.done", step=ARGS.steps, resumed_from=resumed, attempt=attempt,
             loss="%.6f" % loss, digest=d)
    dist.barrier()
    dist.destroy_process_group()
    # Done: skip the interpreter's teardown, which takes about 2 s with torch
    # loaded (three ranks on two CPUs), for nothing
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
