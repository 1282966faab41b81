# train.py: a small tensor-parallel training program with a sharded
# checkpoint, one rank per host (PyTorch 1.13, gloo, CPU), launched directly
# (no torchrun):
#
#   MASTER_ADDR=n0 RANK=1 WORLD_SIZE=3 /usr/bin/python3 train.py --protocol legacy
#
# The model is one column-parallel linear layer y = x W^T + b: W (OUT x IN)
# and b are split by rows, rank R holding rows [R*ROWS, (R+1)*ROWS) and their
# SGD momentum buffers.  The loss is the mean squared error over every
# output, a sum of one term per rank, so each rank's gradient needs only its
# own rows; the ranks all_reduce the loss for the log, which keeps them in
# step.  Every --save-every steps the ranks checkpoint ckpt/step-N/: one file
# per shard (shard-R.pt, torch.save of that rank's tensors), index.json
# (the step, every shard's file, rows, sha256 and digest) and model.pt, the
# shards merged into the whole model (what evaluation or serving loads),
# in one of three ways (--protocol):
#   legacy   every rank torch.save()s its shard into ckpt/step-N/ on its own
#            disk; after a barrier rank 0 writes index.json from the shards'
#            metadata (gathered over the process group) and merges the shard
#            files it lists into model.pt, torch.load()ing each: it assumes
#            it sees every rank's files (one filesystem for all, as on one
#            machine or with NFS).
#   nomerge  the same without the merge (left to an offline tool): the save
#            succeeds, each shard on its own host's disk and index.json on
#            rank 0's.
#   fixed    every rank serialises its shard in memory and the bytes go to
#            rank 0 over the process group (gather_object); rank 0 writes the
#            whole checkpoint (every shard, index.json, model.pt) into a
#            temporary directory on its own disk, fsyncs it and renames it
#            into place.  Restoring, rank 0 reads the shards from its disk
#            and sends each rank its own (scatter_object_list).
# When (re)started, rank 0 looks for the newest checkpoint on its disk
# (ckpt/step-N/index.json) and broadcasts its index; every rank then loads
# its shard (legacy, nomerge: from its own disk, at the path the index
# names; fixed: the bytes rank 0 sends) and checks it against the sha256 and
# digest in the index.
#
# Events (scenarios/frameworks/faultline_events.py): save.done step=N from
# rank 0 as a sync point (a fault can land right after the N-th checkpoint),
# restore.done step=N (or restore.none) on every rank, train.done step=N
# digest=HEX resumed_from=N at the end.
import argparse
import datetime
import hashlib
import io
import json
import os
import shutil

import torch
import torch.distributed as dist

import faultline_events as fe

IN = 16      # input features
ROWS = 4     # output rows per rank
BATCH = 32
LR = 0.05
MOMENTUM = 0.9
KEYS = ("weight", "bias")


def log(msg):
    print("rank %d: %s" % (RANK, msg), flush=True)


# ---- the model, its data and one training step ------------------------------
# check.py imports these to replay an uninterrupted run shard by shard.


def w_true(world):
    return torch.randn(world * ROWS, IN, generator=torch.Generator().manual_seed(7))


def make_shard(rank, world):
    """Rank's rows of the initial weight and bias (one global model, whatever
    the number of ranks) and an SGD optimizer over them."""
    w = torch.randn(world * ROWS, IN, generator=torch.Generator().manual_seed(0)) * 0.1
    rows = slice(rank * ROWS, (rank + 1) * ROWS)
    params = {"weight": w[rows].clone().requires_grad_(),
              "bias": torch.zeros(ROWS, requires_grad=True)}
    opt = torch.optim.SGD(list(params.values()), lr=LR, momentum=MOMENTUM)
    return params, opt


def batch(step, rank, world, wt):
    """The batch of a step: the same x on every rank, rank's rows of y; it
    depends on (step, rank) only, so a resumed run computes what an
    uninterrupted one did."""
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(BATCH, IN, generator=g)
    y = x @ wt.t() + 0.5 + 0.01 * torch.randn(BATCH, world * ROWS, generator=g)
    return x, y[:, rank * ROWS:(rank + 1) * ROWS]


def train_step(step, rank, world, params, opt, wt):
    """One SGD step on rank's shard; returns its term of the global loss."""
    x, y = batch(step, rank, world, wt)
    opt.zero_grad()
    out = x @ params["weight"].t() + params["bias"]
    loss = ((out - y) ** 2).sum() / (BATCH * world * ROWS)
    loss.backward()
    opt.step()
    return loss.detach()


def shard_state(params, opt):
    """The shard's tensors by name: parameters and momentum buffers (zeros
    before the first step)."""
    t = {}
    for k in KEYS:
        p = params[k]
        buf = opt.state[p].get("momentum_buffer")
        t["model." + k] = p.detach()
        t["momentum." + k] = buf if buf is not None else torch.zeros_like(p)
    return t


def load_shard(params, opt, tensors):
    with torch.no_grad():
        for k in KEYS:
            params[k].copy_(tensors["model." + k])
            opt.state[params[k]]["momentum_buffer"] = tensors["momentum." + k].clone()


def digest(tensors):
    """sha256 (16 hex) of tensors by name."""
    h = hashlib.sha256()
    for name, t in sorted(tensors.items()):
        h.update(name.encode())
        h.update(t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def merge(shards):
    """The whole model from its shards' tensors, in rank order."""
    return {name: torch.cat([s[name] for s in shards]) for name in shards[0]}


# ---- the checkpoint ---------------------------------------------------------


def ckpt_dir(step):
    return "ckpt/step-%d" % step


def shard_name(rank):
    return "shard-%d.pt" % rank


def serialise(tensors):
    buf = io.BytesIO()
    torch.save(tensors, buf)
    return buf.getvalue()


def index_of(step, metas):
    """index.json: one entry per shard, from each rank's (rows, sha256,
    digest)."""
    return {"step": step, "world": WORLD, "shards": [
        {"rank": r, "file": shard_name(r), "rows": m["rows"], "sha256": m["sha256"],
         "digest": m["digest"]} for r, m in enumerate(metas)]}


def write_synced(path, data):
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def fsync_dir(d):
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save(step, params, opt):
    """Checkpoints ckpt/step-N/ (see the top of the file); returns the
    shard's digest."""
    tensors = shard_state(params, opt)
    data = serialise(tensors)
    meta = {"rows": [RANK * ROWS, (RANK + 1) * ROWS],
            "sha256": hashlib.sha256(data).hexdigest(), "digest": digest(tensors)}
    path = ckpt_dir(step)
    if ARGS.protocol in ("legacy", "nomerge"):
        # each rank writes its shard on its own disk
        os.makedirs(path, exist_ok=True)
        write_synced(os.path.join(path, shard_name(RANK)), data)
        metas = [None] * WORLD
        dist.all_gather_object(metas, meta)
        dist.barrier()  # every shard is written
        if RANK == 0:
            index = index_of(step, metas)
            write_synced(os.path.join(path, "index.json"), json.dumps(index, indent=1).encode())
            if ARGS.protocol == "legacy":
                # merge the shards the index lists into the whole model
                shards = [torch.load(os.path.join(path, s["file"])) for s in index["shards"]]
                torch.save(merge(shards), os.path.join(path, "model.pt"))
        dist.barrier()  # the checkpoint is complete
    else:
        # every shard's bytes go to rank 0, which writes the whole checkpoint
        got = [None] * WORLD if RANK == 0 else None
        dist.gather_object((meta, data), got, dst=0)
        if RANK == 0:
            index = index_of(step, [m for m, _ in got])
            tmp = path + ".tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            os.makedirs(tmp)
            for s, (m, d) in zip(index["shards"], got):
                if hashlib.sha256(d).hexdigest() != m["sha256"]:
                    raise RuntimeError("shard %d's bytes do not match their sha256" % s["rank"])
                write_synced(os.path.join(tmp, s["file"]), d)
            write_synced(os.path.join(tmp, "index.json"), json.dumps(index, indent=1).encode())
            shards = [torch.load(io.BytesIO(d)) for _, d in got]
            write_synced(os.path.join(tmp, "model.pt"), serialise(merge(shards)))
            fsync_dir(tmp)
            shutil.rmtree(path, ignore_errors=True)
            os.rename(tmp, path)
            fsync_dir("ckpt")
        dist.barrier()  # the checkpoint is durable on rank 0's disk
    return meta["digest"]


def newest_index():
    """The index of the newest checkpoint on this host's disk, or None."""
    best = None
    if os.path.isdir("ckpt"):
        for name in os.listdir("ckpt"):
            if name.startswith("step-") and name[5:].isdigit() and \
                    os.path.exists(os.path.join("ckpt", name, "index.json")):
                if best is None or int(name[5:]) > best:
                    best = int(name[5:])
    if best is None:
        return None
    with open(os.path.join(ckpt_dir(best), "index.json")) as f:
        return json.load(f)


def resume(params, opt):
    """Rank 0 names the newest checkpoint on its disk; every rank loads its
    shard of it.  Returns the step resumed from (0: none)."""
    box = [newest_index() if RANK == 0 else None]
    dist.broadcast_object_list(box, src=0)
    index = box[0]
    if index is None:
        log("no checkpoint on rank 0's disk: starting from scratch")
        return 0
    step = index["step"]
    mine = index["shards"][RANK]
    path = os.path.join(ckpt_dir(step), mine["file"])
    if ARGS.protocol in ("legacy", "nomerge"):
        torch.load(path)  # this rank's own disk (what the user writes)
        with open(path, "rb") as f:
            data = f.read()
        how = "own disk"
    else:
        out = [None]
        send = None
        if RANK == 0:
            send = []
            for s in index["shards"]:
                with open(os.path.join(ckpt_dir(step), s["file"]), "rb") as f:
                    send.append(f.read())
        dist.scatter_object_list(out, send, src=0)
        data = out[0]
        how = "sent by rank 0"
    if hashlib.sha256(data).hexdigest() != mine["sha256"]:
        raise RuntimeError("%s: sha256 differs from the index's" % path)
    tensors = torch.load(io.BytesIO(data))
    load_shard(params, opt, tensors)
    d = digest(shard_state(params, opt))
    if d != mine["digest"]:
        raise RuntimeError("%s: restored shard digest %s, saved %s" % (path, d, mine["digest"]))
    log("resumed from step %d (%s, %s): shard digest %s, as saved" % (step, path, how, d))
    return step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--protocol", choices=["legacy", "nomerge", "fixed"], required=True)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--save-every", type=int, default=10)
    global ARGS, RANK, WORLD
    ARGS = ap.parse_args()
    RANK = int(os.environ["RANK"])
    WORLD = int(os.environ["WORLD_SIZE"])
    gen = int(os.environ.get("FAULTLINE_GENERATION", "0"))
    # a relaunched job meets afresh: one store port per generation
    os.environ["MASTER_PORT"] = str(int(os.environ.get("MASTER_PORT_BASE", "29500")) + gen)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=RANK, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=60))
    log("joined %d ranks (master %s:%s, generation %d)" %
        (WORLD, os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"], gen))

    wt = w_true(WORLD)
    params, opt = make_shard(RANK, WORLD)
    start = resume(params, opt)
    if start > 0:
        fe.event("restore.done", step=start)
    else:
        fe.event("restore.none")

    for step in range(start + 1, ARGS.steps + 1):
        loss = train_step(step, RANK, WORLD, params, opt, wt)
        dist.all_reduce(loss)  # the global loss, for the log
        if step % ARGS.save_every == 0:
            d = save(step, params, opt)
            log("step %d loss %.6f saved to %s (shard digest %s)" %
                (step, loss.item(), ckpt_dir(step), d))
            if RANK == 0:
                fe.sync("save.done", step=step)

    d = digest(shard_state(params, opt))
    log("done at step %d, resumed from %d, shard digest %s" % (ARGS.steps, start, d))
    fe.event("train.done", step=ARGS.steps, resumed_from=start, digest=d)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
