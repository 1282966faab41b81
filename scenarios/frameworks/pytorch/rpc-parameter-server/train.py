# train.py: a parameter server over torch.distributed.rpc, in the style of
# PyTorch's RPC tutorials ("Implementing a Parameter Server Using
# Distributed RPC Framework", "Implementing Batch RPC Processing Using
# Asynchronous Executions"; TensorPipe backend, CPU): one ps process holds
# the model and its optimizer; each trainer gets an RRef to it
# (rpc.remote), computes gradients on its own batches and sends them with
# ps_rref.rpc_sync(timeout=...).update_and_fetch(...), which applies them
# and returns the new parameters.  Launched directly, one process per
# host, the ps as rank 0 (it hosts the rendezvous store):
#
#   MASTER_ADDR=ps0 MASTER_PORT=29500 python3 train.py --role ps --protocol fixed
#   MASTER_ADDR=ps0 MASTER_PORT=29500 python3 train.py --role trainer --index 0 --protocol fixed
#
# --protocol:
#   legacy  the tutorial: the ps's state lives in its memory only; a
#           trainer's failed call ends the trainer.
#   local   the ps checkpoints every --save-every updates to its own disk
#           and restores from it when started again; a trainer whose call
#           fails starts again (execs itself: a new process, a new RPC
#           agent, nothing left of the dead group), joins the new ps and
#           goes on after the last step whose update the ps acknowledged.
#   fixed   the ps checkpoints atomically (write, fsync, rename, fsync the
#           directory) to storage that outlives its machine (ps_ckpt/, a
#           shared path), with every trainer's last applied step in it; a
#           trainer whose call fails starts again, joins the new ps and goes
#           on after the step the ps's checkpoint holds for it (an update
#           applied whose reply was lost is not sent twice, one lost with
#           the ps is sent again).
#
# Every call to the ps has a timeout (--call-timeout, 2 s; an update takes
# milliseconds); the agent's own (--rpc-timeout) bounds init_rpc, where a
# rejoining trainer waits for the new ps.
#
# Events (scenarios/frameworks/faultline_events.py): ps.updates n=N ckpt=...
# from the ps every --save-every updates, after its save, as a sync point
# (under the ps's lock: no update lands between it and a fault it
# triggers); ps.restored n=N or ps.fresh when the ps starts; trainer.lost
# step=N and trainer.rejoined step=N ps_step=N from trainers; train.done
# from each trainer at its end; ps.done updates=N resumed_from=N loss=L
# from the ps once every trainer has finished, when it writes
# report/final.json (its parameters, how many updates it applied, the
# update it resumed from) for the final check (check.py).
import argparse
import io
import json
import os
import sys
import threading

import torch
import torch.distributed.rpc as rpc
import torch.nn as nn
import torch.optim as optim

import faultline_events as fe
import problem

LR = 0.02
FEATURES = problem.FEATURES


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(FEATURES, 1)

    def forward(self, x):
        return self.fc(x)


def true_weights():
    return torch.tensor(problem.true_weights()).unsqueeze(1)


def batch(trainer, step):
    """Trainer TRAINER's batch at STEP: the same whatever happened before."""
    g = torch.Generator().manual_seed(1000 * step + trainer)
    x = torch.randn(16, FEATURES, generator=g)
    return x, x @ true_weights() + 0.05 * torch.randn(16, 1, generator=g)


def log(msg):
    print("%s: %s" % (NAME, msg), flush=True)


# ---- the parameter server ----------------------------------------------------

CKPT = {"local": "ckpt/ps.pt", "fixed": "ps_ckpt/ps.pt"}


def fsync_dir(d):
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class ParameterServer:
    def __init__(self, protocol, save_every):
        self.lock = threading.Lock()
        self.protocol = protocol
        self.save_every = save_every
        torch.manual_seed(0)
        self.model = Net()
        self.opt = optim.SGD(self.model.parameters(), lr=LR)
        self.updates = 0
        self.done = {}  # trainer name -> its last step applied
        self.finished = set()
        self.resumed_from = 0
        path = CKPT.get(protocol)
        if path and os.path.exists(path):
            ck = torch.load(path)
            self.model.load_state_dict(ck["model"])
            self.opt.load_state_dict(ck["optim"])
            self.updates, self.done = ck["updates"], ck["done"]
            self.resumed_from = self.updates
            log("restored %s: update %d, trainers at %s" % (path, self.updates, self.done))
            fe.event("ps.restored", n=self.updates)
        else:
            if path:
                log("no checkpoint at %s: starting from scratch" % path)
            fe.event("ps.fresh")

    def save(self):
        path = CKPT[self.protocol]
        d = os.path.dirname(path)
        os.makedirs(d, exist_ok=True)
        buf = io.BytesIO()
        torch.save({"model": self.model.state_dict(), "optim": self.opt.state_dict(),
                    "updates": self.updates, "done": dict(self.done)}, buf)
        with open(path + ".tmp", "wb") as f:
            f.write(buf.getvalue())
            if self.protocol == "fixed":
                f.flush()
                os.fsync(f.fileno())
        os.rename(path + ".tmp", path)
        if self.protocol == "fixed":
            fsync_dir(d)

    def weights(self):
        return [p.detach().clone() for p in self.model.parameters()]

    def progress(self, trainer):
        with self.lock:
            return self.done.get(trainer, 0), self.weights()

    def finish(self, trainer):
        """A trainer is done; the last one's call returns once the ps has
        written its report (so the report exists when every trainer ended)."""
        with self.lock:
            self.finished.add(trainer)
            if len(self.finished) == ARGS.trainers:
                self.report()

    def report(self):
        w = self.model.fc.weight.detach()[0].tolist()
        b = self.model.fc.bias.item()
        loss = problem.loss(w, b)
        log("all %d trainers done: applied %d updates (resumed from update %d); "
            "held-out loss %.6f" % (ARGS.trainers, self.updates, self.resumed_from, loss))
        os.makedirs("report", exist_ok=True)
        with open("report/final.json.tmp", "w") as f:
            json.dump({"weights": w, "bias": b, "updates": self.updates,
                       "resumed_from": self.resumed_from}, f)
        os.rename("report/final.json.tmp", "report/final.json")
        fe.event("ps.done", updates=self.updates, resumed_from=self.resumed_from,
                 loss="%.6f" % loss)

    def update_and_fetch(self, trainer, step, grads):
        with self.lock:
            for p, g in zip(self.model.parameters(), grads):
                p.grad = g
            self.opt.step()
            self.updates += 1
            self.done[trainer] = step
            if self.updates % self.save_every == 0:
                if self.protocol in CKPT:
                    self.save()
                # under the lock: no update lands between this point and a
                # fault it triggers
                fe.sync("ps.updates", n=self.updates, ckpt=CKPT.get(self.protocol, "none"))
            return self.weights()


PS = None
PS_LOCK = threading.Lock()


def get_parameter_server():
    """Run on the ps through rpc.remote: its one ParameterServer."""
    with PS_LOCK:
        return PS


def run_ps():
    global PS
    PS = ParameterServer(ARGS.protocol, ARGS.save_every)
    init_rpc("ps", 0)
    log("serving %d trainers (generation %s)" %
        (ARGS.trainers, os.environ.get("FAULTLINE_GENERATION", "0")))
    rpc.shutdown()  # blocks until every trainer has shut down too
    log("shut down")


# ---- trainers ------------------------------------------------------------------


def set_weights(model, ws):
    with torch.no_grad():
        for p, w in zip(model.parameters(), ws):
            p.copy_(w)


def run_trainer():
    init_rpc(NAME, ARGS.index + 1)
    ps_rref = rpc.remote("ps", get_parameter_server, timeout=ARGS.call_timeout)
    model = Net()
    loss_fn = nn.MSELoss()
    step = ARGS.resume_step  # the last step whose update the ps acknowledged
    try:
        done, ws = ps_rref.rpc_sync(timeout=ARGS.call_timeout).progress(NAME)
        if ARGS.protocol == "fixed":
            step = done  # the ps's checkpoint says which steps it applied
        if ARGS.attempt > 0:
            log("rejoined the ps (attempt %d): the ps has my step %d, going on after step %d" %
                (ARGS.attempt, done, step))
            fe.event("trainer.rejoined", step=step, ps_step=done)
        set_weights(model, ws)
        while step < ARGS.steps:
            x, y = batch(ARGS.index, step + 1)
            model.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            grads = [p.grad for p in model.parameters()]
            ws = ps_rref.rpc_sync(timeout=ARGS.call_timeout).update_and_fetch(NAME, step + 1, grads)
            step += 1
            set_weights(model, ws)
            if step % 10 == 0:
                log("step %d loss %.6f" % (step, loss.item()))
        ps_rref.rpc_sync(timeout=ARGS.call_timeout).finish(NAME)
    except RuntimeError as e:
        if ARGS.protocol == "legacy":
            raise
        rejoin(step, e)
    log("done at step %d" % step)
    fe.event("train.done", step=step)
    rpc.shutdown()


def rejoin(step, e):
    log("lost the ps after step %d: %s" % (step, str(e).splitlines()[0]))
    fe.event("trainer.lost", step=step)
    sys.stdout.flush()
    sys.stderr.flush()
    # a graceful rpc.shutdown() would wait for the dead ps, and the agent's
    # state (worker names, the RRef the dead ps owned) is the process's:
    # start afresh, on the same command line, and join the new ps
    argv = [a for a in sys.argv if not a.startswith(("--attempt=", "--resume-step="))]
    os.execv(sys.executable, [sys.executable] + argv +
             ["--attempt=%d" % (ARGS.attempt + 1), "--resume-step=%d" % step])


def init_rpc(name, rank):
    opts = rpc.TensorPipeRpcBackendOptions(num_worker_threads=4, rpc_timeout=ARGS.rpc_timeout)
    rpc.init_rpc(name, rank=rank, world_size=ARGS.trainers + 1, rpc_backend_options=opts)
    log("joined the RPC group (%d workers, master %s:%s)" %
        (ARGS.trainers + 1, os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--role", choices=["ps", "trainer"], required=True)
    ap.add_argument("--index", type=int, default=0)
    ap.add_argument("--trainers", type=int, default=2)
    ap.add_argument("--protocol", choices=["legacy", "local", "fixed"], required=True)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--save-every", type=int, default=20)
    # the agent's default timeout, which also bounds the rendezvous of
    # init_rpc (a rejoining trainer waits there for the new ps)
    ap.add_argument("--rpc-timeout", type=float, default=60)
    # each call to the ps: an update takes milliseconds
    ap.add_argument("--call-timeout", type=float, default=2)
    ap.add_argument("--attempt", type=int, default=0)
    ap.add_argument("--resume-step", type=int, default=0)
    global ARGS, NAME
    ARGS = ap.parse_args()
    NAME = "ps" if ARGS.role == "ps" else "trainer%d" % ARGS.index
    os.environ.setdefault("MASTER_PORT", "29500")
    torch.set_num_threads(1)
    if ARGS.role == "ps":
        run_ps()
    else:
        run_trainer()


if __name__ == "__main__":
    main()
