# check.py: the final check of sharded-save.yaml, run on n0 (rank 0's host)
# after the job, on that host's own disk, as an offline tool would: it takes
# the newest checkpoint there (ckpt/step-N/index.json), merges the shard
# files the index lists (torch.load of each) into the whole model, and
# compares it with model.pt (the merge train.py wrote) and with an
# uninterrupted run of N steps replayed here shard by shard with train.py's
# own functions (bit for bit: the same operations on the same shapes).
# Passes (exit 0, "consistent: ...") when all agree; else exit 1 with
# "missing: ..." or "DIFFERS: ...", or dies with the error torch.load raised.
import hashlib
import json
import os
import sys


def main():
    world = int(sys.argv[1])
    steps = []
    if os.path.isdir("ckpt"):
        for name in os.listdir("ckpt"):
            if name.startswith("step-") and name[5:].isdigit() and \
                    os.path.exists(os.path.join("ckpt", name, "index.json")):
                steps.append(int(name[5:]))
    if not steps:
        print("missing: no checkpoint (ckpt/step-N/index.json) on this host's disk")
        return 1
    path = "ckpt/step-%d" % max(steps)
    with open(os.path.join(path, "index.json")) as f:
        index = json.load(f)
    print("%s: index of step %d, shards %s" %
          (path, index["step"], " ".join(s["file"] for s in index["shards"])))

    import torch  # only now: a run with nothing to merge needs no torch
    import train
    torch.set_num_threads(1)
    shards = []
    for s in index["shards"]:
        shards.append(torch.load(os.path.join(path, s["file"])))  # the merge
        with open(os.path.join(path, s["file"]), "rb") as f:
            if hashlib.sha256(f.read()).hexdigest() != s["sha256"]:
                print("DIFFERS: %s does not match the sha256 in the index" % s["file"])
                return 1
    merged = train.merge(shards)
    got = train.digest(merged)

    # an uninterrupted run of the same steps, shard by shard
    wt = train.w_true(world)
    replay = []
    for r in range(world):
        params, opt = train.make_shard(r, world)
        for step in range(1, index["step"] + 1):
            train.train_step(step, r, world, params, opt, wt)
        replay.append(train.shard_state(params, opt))
    want = train.digest(train.merge(replay))

    bad = []
    if os.path.exists(os.path.join(path, "model.pt")):
        if train.digest(torch.load(os.path.join(path, "model.pt"))) != got:
            bad.append("model.pt differs from the merged shards")
    else:
        bad.append("no model.pt")
    if got != want:
        bad.append("the merged shards (digest %s) differ from an uninterrupted run of %d steps "
                   "(digest %s)" % (got, index["step"], want))
    if bad:
        print("DIFFERS: " + "; ".join(bad))
        return 1
    print("consistent: %s merges %d shards into model.pt, equal to an uninterrupted run of "
          "%d steps, digest %s" % (path, len(shards), index["step"], got))
    return 0


if __name__ == "__main__":
    sys.exit(main())
