#!/usr/bin/env python3
"""unsynced_writes.py: writes files with and without fsync, then (in the next
generation of the task, after its host crashed and came back) says what is
left.  Used by unsynced-writes.yaml (harness/tests/test_faults_durable.c).

Generation 0 (FAULTLINE_GENERATION), in the working directory (the host's
disk), in this order (the root directory's last fsync comes before a, b
and sub are made, so their entries are never durable):
  big    600 KiB, file and directory fsynced (on a disk of 1M, the store of
         what is synced must live elsewhere)
  c.txt  "C", file and directory fsynced
  d.txt  "old-d" made durable; then d.tmp "new-d" fsynced, renamed over
         d.txt, directory fsynced
  g.txt  opened O_DSYNC: "G1" written (its entry made durable with e.txt's),
         then "G2" after the last fsync of the directory: "G1G2" is durable
  h.txt  "H", never fsynced, its entry made durable with e.txt's: comes
         back empty
  e.txt  "old-e" made durable (file and directory); then overwritten in
         place with "new-e-longer", no fsync
  a.txt  "A", no fsync
  b.txt  "B", file fsynced, directory not
  sub/f.txt  "F": file and sub/ fsynced, the root directory not
then prints "written" and waits to be killed.
Generation 1 prints one line: "verify: big=... a=... b=... c=... d=...
d.tmp=... e=... g=... h=... sub=..." (big's size; a file's content,
"empty" or "gone").
"""
import os
import sys
import time


def put(path, data, sync):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, data.encode())
    if sync:
        os.fsync(fd)
    os.close(fd)


def sync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(fd)
    os.close(fd)


def get(path):
    try:
        with open(path) as f:
            return f.read() or "empty"
    except FileNotFoundError:
        return "gone"


def write():
    put("big", "z" * (600 * 1024), True)
    put("c.txt", "C", True)
    sync_dir(".")
    put("d.txt", "old-d", True)
    sync_dir(".")
    put("d.tmp", "new-d", True)
    os.rename("d.tmp", "d.txt")
    sync_dir(".")
    g = os.open("g.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DSYNC, 0o644)
    os.write(g, b"G1")
    put("h.txt", "H", False)
    put("e.txt", "old-e", True)
    sync_dir(".")
    os.write(g, b"G2")
    os.close(g)
    put("e.txt", "new-e-longer", False)
    put("a.txt", "A", False)
    put("b.txt", "B", True)
    os.mkdir("sub")
    put("sub/f.txt", "F", True)
    sync_dir("sub")
    print("written", flush=True)
    time.sleep(120)


def verify():
    names = [("a", "a.txt"), ("b", "b.txt"), ("c", "c.txt"), ("d", "d.txt"),
             ("d.tmp", "d.tmp"), ("e", "e.txt"), ("g", "g.txt"), ("h", "h.txt"), ("sub", "sub/f.txt")]
    big = os.path.getsize("big") if os.path.exists("big") else "gone"
    print("verify: big=%s " % big + " ".join("%s=%s" % (k, get(p)) for k, p in names), flush=True)


if __name__ == "__main__":
    if os.environ.get("FAULTLINE_GENERATION", "0") == "0":
        write()
    else:
        verify()
    sys.exit(0)
