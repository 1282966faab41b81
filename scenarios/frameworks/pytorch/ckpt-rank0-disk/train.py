# train.py: a small DDP training program in the style of PyTorch's "Getting
# Started with Distributed Data Parallel" tutorial (ToyModel, gloo, CPU), one
# rank per host, launched directly (no torchrun):
#
#   MASTER_ADDR=n0 RANK=1 WORLD_SIZE=3 /usr/bin/python3 train.py --protocol legacy
#
# It trains --steps steps and checkpoints every --save-every steps, in one of
# three ways (--protocol):
#   legacy  the tutorial's "Save and Load Checkpoints": rank 0 torch.save()s
#           ckpt/model.pt, dist.barrier(), every rank torch.load()s it.
#   local   the usual workaround once that fails on separate machines: every
#           rank saves to its own disk and, when (re)started, resumes from its
#           own copy if it has one, else from scratch; the ranks keep their
#           step counter in step with rank 0's (dist.broadcast), so no
#           collective ever goes out of step.
#   fixed   every rank saves to its own disk, atomically, with a sha256; when
#           (re)started, the ranks all_gather the newest step each can
#           verify, the lowest rank holding the newest one broadcasts its bytes
#           over the process group, and every rank loads those bytes after
#           checking their sha256 (and saves them again on its own disk).
#
# Events (scenarios/frameworks/faultline_events.py): save.done step=N from
# rank 0 as a sync point (a fault can land right after the N-th save),
# restore.done step=N (or restore.none) when resuming, train.done step=N
# digest=HEX resumed_from=N at the end.  At the end every rank also writes
# report/rank<R>.txt (the scenario's final check compares them): its rank,
# generation, the step it resumed from, its last step and a digest of its
# parameters and optimizer state.
import argparse
import datetime
import hashlib
import io
import os
import sys

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


def state(step, ddp, opt):
    return {"step": step, "model": ddp.state_dict(), "optim": opt.state_dict()}


def load(ck, ddp, opt):
    ddp.load_state_dict(ck["model"])
    opt.load_state_dict(ck["optim"])
    return ck["step"]


# ---- legacy and local: one file, ckpt/model.pt ----------------------------

PATH = "ckpt/model.pt"


def save_legacy(step, ddp, opt):
    # the tutorial: "it is sufficient to save it in only one process", then
    # every process loads it after a barrier
    if RANK == 0:
        os.makedirs("ckpt", exist_ok=True)
        torch.save(state(step, ddp, opt), PATH)
    dist.barrier()
    load(torch.load(PATH), ddp, opt)


def save_local(step, ddp, opt):
    os.makedirs("ckpt", exist_ok=True)
    torch.save(state(step, ddp, opt), PATH)
    dist.barrier()


def resume_local(ddp, opt):
    if os.path.exists(PATH):
        own = load(torch.load(PATH), ddp, opt)
        log("resumed from step %d (%s)" % (own, PATH))
    else:
        own = 0
        log("no checkpoint at %s: starting from scratch" % PATH)
    t = torch.tensor([own])
    dist.broadcast(t, 0)  # keep the step counter in step with rank 0
    return own, int(t.item())


# ---- fixed: verified copies, agreed over the process group -----------------


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
    for old in os.listdir("ckpt"):  # keep the two newest
        if old.startswith("model-") and old.endswith(".pt"):
            s = int(old[6:-3])
            if s < step - 2 * ARGS.save_every:
                for suffix in ("", ".sha256"):
                    try:
                        os.unlink("ckpt/" + old + suffix)
                    except FileNotFoundError:
                        pass


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


def save_fixed(step, ddp, opt):
    buf = io.BytesIO()
    torch.save(state(step, ddp, opt), buf)
    write_verified(step, buf.getvalue())
    dist.barrier()


def resume_fixed(ddp, opt):
    own = newest_verified()
    have = [None] * WORLD
    dist.all_gather_object(have, own)
    best = max(have)
    if best < 0:
        log("no rank has a verified checkpoint: every rank starts from scratch")
        return 0, 0
    src = have.index(best)
    box = [read_verified(best) if RANK == src else None]
    dist.broadcast_object_list(box, src=src)
    data = box[0]
    sha = hashlib.sha256(data).hexdigest()
    step = load(torch.load(io.BytesIO(data)), ddp, opt)
    if step != best:
        raise RuntimeError("rank %d's checkpoint model-%d.pt holds step %d" % (src, best, step))
    if own != best:
        write_verified(best, data)
    log("resumed from step %d (rank %d's copy, sha256 %s; own newest verified: %s)" %
        (best, src, sha[:16], own if own >= 0 else "none"))
    return best, best


# ---------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--protocol", choices=["legacy", "local", "fixed"], required=True)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--save-every", type=int, default=10)
    global ARGS, RANK, WORLD
    ARGS = ap.parse_args()
    RANK = int(os.environ["RANK"])
    WORLD = int(os.environ["WORLD_SIZE"])
    gen = int(os.environ.get("FAULTLINE_GENERATION", "0"))
    # a relaunched job meets afresh: one store port per generation
    os.environ["MASTER_PORT"] = str(int(os.environ.get("MASTER_PORT_BASE", "29500")) + gen)
    torch.set_num_threads(1)
    # the timeout bounds the rendezvous (a relaunched rank waits for rank 0's
    # store, whose import of torch takes seconds on a busy machine) and any
    # collective a lost peer would leave hanging
    dist.init_process_group("gloo", rank=RANK, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=60))
    log("joined %d ranks (master %s:%s, generation %d)" %
        (WORLD, os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"], gen))

    torch.manual_seed(0)
    model = ToyModel()
    ddp = DDP(model)
    opt = optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.MSELoss()

    # own: the step of the state this rank loaded (0: none); start: where the
    # step counter goes on from
    own, start = 0, 0
    if ARGS.protocol == "local":
        own, start = resume_local(ddp, opt)
    elif ARGS.protocol == "fixed":
        own, start = resume_fixed(ddp, opt)
    if own > 0:
        fe.event("restore.done", step=own)
    else:
        fe.event("restore.none", step=start)

    save = {"legacy": save_legacy, "local": save_local, "fixed": save_fixed}[ARGS.protocol]
    loss = None
    for step in range(start + 1, ARGS.steps + 1):
        x, y = batch(step)
        opt.zero_grad()
        loss = loss_fn(ddp(x), y)
        loss.backward()
        opt.step()
        if step % ARGS.save_every == 0:
            save(step, ddp, opt)
            log("step %d loss %.6f saved" % (step, loss.item()))
            if RANK == 0:
                fe.sync("save.done", step=step)

    d = digest(ddp, opt)
    log("done at step %d, resumed from %d, digest %s" % (ARGS.steps, own, d))
    os.makedirs("report", exist_ok=True)
    with open("report/rank%d.txt.tmp" % RANK, "w") as f:
        f.write("rank=%d generation=%d resumed_from=%d step=%d digest=%s\n" %
                (RANK, gen, own, ARGS.steps, d))
    os.rename("report/rank%d.txt.tmp" % RANK, "report/rank%d.txt" % RANK)
    fe.event("train.done", step=ARGS.steps, resumed_from=own, digest=d)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
