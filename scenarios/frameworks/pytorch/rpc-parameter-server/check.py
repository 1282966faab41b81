# check.py: the final check of rpc-parameter-server.yaml.  The ps of
# train.py writes report/final.json (its parameters, how many updates it
# applied, the update it resumed from) once every trainer has finished; this
# computes the loss of those parameters on the held-out set (problem.py, no
# torch) and passes (exit 0, "ok: ...") when it is under the target given as
# argument; else exit 1, "FAILED: ..." (it is not) or "missing: ..." (no
# report: training did not end).
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import problem  # noqa: E402


def main():
    target = float(sys.argv[1])
    path = "report/final.json"
    if not os.path.exists(path):
        print("missing: no %s (the ps never saw every trainer finish)" % path)
        return 1
    with open(path) as f:
        rep = json.load(f)
    loss = problem.loss(rep["weights"], rep["bias"])
    what = ("held-out loss %.6f (target < %g) after %d updates on the ps, resumed from update %d"
            % (loss, target, rep["updates"], rep["resumed_from"]))
    if loss < target:
        print("ok: " + what)
        return 0
    print("FAILED: " + what)
    return 1


if __name__ == "__main__":
    sys.exit(main())
