# train.py: a small training program in the style of PyTorch's "Datasets &
# DataLoaders" and "Optimizing Model Parameters" tutorials (CPU): a
# synthetic regression Dataset, a DataLoader with worker processes, a
# two-layer model, SGD.  Launched directly:
#
#   /usr/bin/python3 train.py --protocol legacy
#
# --protocol:
#   legacy  what users write: DataLoader(num_workers=8,
#           persistent_workers=True) and torch's default intra-op threads
#           (one per CPU).  On a host that allows few threads the workers
#           cannot all start and the DataLoader raises.
#   fixed   torch.set_num_threads(1) (a DataLoader worker does the same
#           for itself); num_workers chosen from what the host allows (its
#           pids cgroup's pids.max minus what already runs there, with a
#           margin per worker), and if starting the workers still fails with
#           EAGAIN, the same epoch again with num_workers=0.
#
# Events (scenarios/frameworks/faultline_events.py): data.ready samples=N
# as a sync point once the data and model are built (before any DataLoader),
# loader.start workers=N when a DataLoader is built, train.done loss=X at
# the end.
import argparse
import gc
import os
import sys

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

import faultline_events as fe

LOSS_TARGET = 0.05


class Synthetic(Dataset):
    """y = x @ w_true + 0.5, fixed by a seed: 512 samples of 8 features."""

    def __init__(self, n=512):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 8, generator=g)
        w_true = torch.randn(8, 1, generator=g)
        self.y = self.x @ w_true + 0.5

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def log(msg):
    print(msg, flush=True)


def pids_room():
    """How many more tasks (threads and processes) this host's pids cgroup
    allows now, or None when there is no limit to read."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, ctrl, path = line.split(":", 2)
        if ctrl == "" or "pids" in ctrl.split(","):
            base = "/sys/fs/cgroup" if ctrl == "" else "/sys/fs/cgroup/pids"
            try:
                with open(base + path + "/pids.max") as f:
                    mx = f.read().strip()
                with open(base + path + "/pids.current") as f:
                    cur = int(f.read())
            except OSError:
                continue
            if mx == "max":
                return None
            return int(mx) - cur
    return None


def epochs(dataset, model, opt, n_epochs, workers):
    loader = DataLoader(dataset, batch_size=32, shuffle=True, num_workers=workers,
                        persistent_workers=workers > 0,
                        generator=torch.Generator().manual_seed(1))
    fe.event("loader.start", workers=workers)
    loss_fn = nn.MSELoss()
    loss = None
    for epoch in range(n_epochs):
        for x, y in loader:
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
        log("epoch %d: last batch loss %.4f (num_workers=%d, threads=%d)"
            % (epoch, loss.item(), workers, torch.get_num_threads()))
    with torch.no_grad():
        return loss_fn(model(dataset.x), dataset.y).item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--protocol", choices=["legacy", "fixed"], required=True)
    ap.add_argument("--epochs", type=int, default=8)
    args = ap.parse_args()
    torch.manual_seed(0)
    dataset = Synthetic()
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    # a sync point: a fault can make the host scarce before any worker starts
    fe.sync("data.ready", samples=len(dataset))
    if args.protocol == "legacy":
        loss = epochs(dataset, model, opt, args.epochs, 8)
    else:
        torch.set_num_threads(1)
        room = pids_room()
        # a worker is a process with a few threads of its own; keep a margin
        workers = 8 if room is None else max(0, min(8, (room - 4) // 4))
        log("pids room %s: num_workers=%d" % (room, workers))
        failed = None
        try:
            loss = epochs(dataset, model, opt, args.epochs, workers)
        except (RuntimeError, OSError) as e:
            if workers == 0:
                raise
            failed = str(e).splitlines()[0]
        if failed is not None:
            # Out of the except block: its traceback held the failed
            # DataLoader's half-made iterator.  Collect it now: its __del__
            # stops the workers it started and takes their pids off
            # PyTorch's SIGCHLD handler, which would otherwise raise
            # "DataLoader worker (pid N) exited unexpectedly" in the middle
            # of the run without workers when they die.
            gc.collect()
            log("DataLoader with %d workers failed (%s): again with num_workers=0"
                % (workers, failed))
            loss = epochs(dataset, model, opt, args.epochs, 0)
    log("final loss %.4f over the whole dataset (target < %.2f)" % (loss, LOSS_TARGET))
    fe.event("train.done", loss="%.4f" % loss)
    sys.exit(0 if loss < LOSS_TARGET else 1)


if __name__ == "__main__":
    main()
