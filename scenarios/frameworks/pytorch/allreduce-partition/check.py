# check.py: the final check of allreduce-partition.yaml, on a host that mounts
# the shared report/ directory (where every rank of train.py writes
# report/rank<R>.txt at its end; the checkpoints themselves are never
# shared).  Passes (exit 0, "consistent: ...") when every rank reported,
# all at the last step, all resumed from the same step and all hold the same
# parameters and optimizer state (digest); else exit 1, "DIVERGED: ..." or
# "missing: ...", with what differs.
import glob
import sys


def main():
    world = int(sys.argv[1])
    ranks = {}
    for path in sorted(glob.glob("report/rank*.txt")):
        with open(path) as f:
            kv = dict(w.split("=", 1) for w in f.read().split())
        ranks[int(kv["rank"])] = kv
        print("rank %s (attempt %s): resumed_from=%s step=%s digest=%s" %
              (kv["rank"], kv["attempt"], kv["resumed_from"], kv["step"], kv["digest"]))
    missing = [r for r in range(world) if r not in ranks]
    if missing:
        print("missing: no report from rank %s (training did not end there)" %
              ", ".join(map(str, missing)))
        return 1
    bad = []
    for key in ("step", "attempt", "resumed_from", "digest"):
        vals = {r: ranks[r][key] for r in range(world)}
        if len(set(vals.values())) > 1:
            bad.append("%s differs across ranks: %s" %
                       (key, ", ".join("rank %d %s" % (r, v) for r, v in vals.items())))
    if bad:
        print("DIVERGED: " + "; ".join(bad))
        return 1
    print("consistent: every rank at step %s, resumed from step %s, digest %s" %
          (ranks[0]["step"], ranks[0]["resumed_from"], ranks[0]["digest"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
