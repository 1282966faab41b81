"""ci/shards/check_manifests.py FAULTLINE [FILE...]: checks the manifests that
spread faultline over many machines (github-actions.yml, k8s-indexed-job.yaml,
or the files given), for `make check` (test cli_manifests):
  - each against a small JSON schema of what it may hold (schemas/), with
    Debian's python3-jsonschema;
  - the shards cover 1..N exactly once: the workflow's matrix is 1..SHARDS,
    the Indexed Job's completions equal SHARDS and K is JOB_COMPLETION_INDEX+1;
  - every faultline command in them names options that command has (its
    --help), so that the manifests follow the program.
Prints one line per problem, "FILE: WHERE: what", and exits 1 when there is
one; yamllint (run beside it by ci/check-manifests) checks the YAML itself.
Run with Debian's /usr/bin/python3 (python3-yaml, python3-jsonschema)."""
import os
import re
import subprocess
import sys

import jsonschema
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
problems = []


def problem(path, where, what):
    problems.append(f"{path}: {where}: {what}")


def where_of(err):
    return ".".join(str(p) for p in err.absolute_path) or "(top)"


def validate(path, doc, schema_name, prefix=""):
    with open(os.path.join(HERE, "schemas", schema_name)) as f:
        schema = yaml.safe_load(f)
    for err in sorted(jsonschema.Draft7Validator(schema).iter_errors(doc), key=str):
        problem(path, prefix + where_of(err), err.message)


HELP = {}


def options_of(faultline, sub):
    """The long options a faultline command's --help names."""
    if sub not in HELP:
        words = sub.split()
        out = subprocess.run([faultline] + words + ["--help"], capture_output=True, text=True)
        HELP[sub] = set(re.findall(r"(--[a-z][a-z-]*)", out.stdout + out.stderr))
    return HELP[sub]


def check_commands(path, where, text, faultline):
    """Every `.../faultline SUB --opt ...` in text: options SUB has."""
    for m in re.finditer(r"\S*/faultline\s+((?:runs\s+merge)|[a-z]+)((?:\s+[^;&|\n]*)?)", text):
        sub, rest = m.group(1), m.group(2)
        known = options_of(faultline, sub)
        if not known:
            problem(path, where, f"'faultline {sub}' is no faultline command")
            continue
        for opt in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", rest):
            if opt not in known:
                problem(path, where, f"'faultline {sub}' has no option {opt}")


def check_workflow(path, faultline):
    with open(path) as f:
        doc = yaml.safe_load(f)
    if isinstance(doc, dict) and True in doc:  # YAML 1.1 reads the key "on" as true
        doc["on"] = doc.pop(True)
    validate(path, doc, "github-workflow.json")
    shards = doc.get("env", {}).get("SHARDS")
    for name, job in doc.get("jobs", {}).items():
        matrix = job.get("strategy", {}).get("matrix", {})
        if "shard" in matrix:
            want = [str(k) for k in range(1, int(shards or 0) + 1)]
            if [str(k) for k in matrix["shard"]] != want:
                problem(path, f"jobs.{name}.strategy.matrix.shard",
                        f"{matrix['shard']} is not 1..SHARDS ({shards}): a shard would run twice "
                        "or not at all")
        for i, step in enumerate(job.get("steps", [])):
            if isinstance(step, dict) and "run" in step:
                check_commands(path, f"jobs.{name}.steps.{i}.run", step["run"], faultline)
                if "--shard" in step["run"] and "matrix.shard" not in step["run"]:
                    problem(path, f"jobs.{name}.steps.{i}.run", "--shard is not the matrix's shard")


def check_jobs(path, faultline):
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    if not docs:
        problem(path, "(top)", "no document")
    for n, doc in enumerate(docs):
        validate(path, doc, "k8s-job.json", f"document {n + 1}: ")
        spec = doc.get("spec", {}) if isinstance(doc, dict) else {}
        containers = spec.get("template", {}).get("spec", {}).get("containers", [])
        for c, con in enumerate(containers):
            if not isinstance(con, dict):
                continue
            where = f"document {n + 1}: spec.template.spec.containers.{c}"
            text = " ".join(con.get("command", []) + con.get("args", []))
            check_commands(path, where, text, faultline)
            if "--shard" not in text:
                continue
            env = {e.get("name"): e.get("value") for e in con.get("env", [])}
            if spec.get("completionMode") != "Indexed":
                problem(path, f"document {n + 1}: spec.completionMode",
                        "a job that shards must be Indexed (JOB_COMPLETION_INDEX)")
            if str(spec.get("completions")) != str(env.get("SHARDS")):
                problem(path, f"document {n + 1}: spec.completions",
                        f"{spec.get('completions')} pods for SHARDS={env.get('SHARDS')} shards")
            if not re.search(r"\$\(\(JOB_COMPLETION_INDEX \+ 1\)\)", text):
                problem(path, where, "K is not $((JOB_COMPLETION_INDEX + 1))")


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: check_manifests.py FAULTLINE [FILE...]")
    faultline = sys.argv[1]
    files = sys.argv[2:] or [os.path.join(HERE, "github-actions.yml"),
                             os.path.join(HERE, "k8s-indexed-job.yaml")]
    for path in files:
        try:
            if path.endswith(".yml") or "workflow" in os.path.basename(path):
                check_workflow(path, faultline)
            else:
                check_jobs(path, faultline)
        except (OSError, yaml.YAMLError) as e:
            problem(path, "(file)", str(e))
    for p in problems:
        print(p)
    if problems:
        sys.exit(1)
    print(f"check_manifests: {len(files)} manifests: schema, shards and faultline options hold")


main()
