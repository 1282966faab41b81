"""faultline_events: the event channel of faultline (docs/events.md) for
Python programs, such as training scripts of a real framework run under
`faultline run`.

    import faultline_events as fe
    fe.event("train.step", step=10, loss=0.25)   # recorded; may trigger a fault
    fe.sync("save.done", step=20)                # waits until the faults it
                                                 # triggers are applied

One persistent connection per process to the unix socket named by
$FAULTLINE_EVENTS, opened at the first call, with one HELLO line
(host, job, task, pid from the FAULTLINE_* variables); no process is spawned
per event.  `sync` sends `SYNC <seq> <kind> ...` with a sequence number that
increases per connection and blocks until the harness answers `OK <seq>`
(or kills the caller, when that is the fault it triggers).  A sync costs
one round trip to the harness; use `event` for what no fault waits on
($FAULTLINE_SYNC lists the kinds some fault of the run waits on).

Without $FAULTLINE_EVENTS (not under the harness) every call does nothing.
If the connection cannot be made or breaks, one line goes to stderr and the
program carries on without events: it never dies because the harness is
gone.  A forked child (a DataLoader worker) opens a connection of its own.
Thread-safe: writes and the wait for an answer are serialised by a lock.

Kinds are `[a-z0-9._-]+`; values are sent bare when they are
`[^ "=]+`, else double-quoted with `"` and `\\` escaped.  A bad kind or key
raises ValueError, where the program is tried out, rather than become an
event the harness drops.  Only the standard library is used; put this
file's directory on PYTHONPATH (a scenario: `env: {PYTHONPATH:
"{scenario_dir}/../.."}` from scenarios/frameworks/<framework>/<scenario>/).
"""

import os
import re
import socket
import sys
import threading

__all__ = ["event", "sync", "enabled", "close"]

_KIND = re.compile(r"[a-z0-9._-]+\Z")
_KEY = re.compile(r'[^ "=]+\Z')
_BARE = re.compile(r'[^ "=]+\Z')
_LINE_MAX = 4096

_lock = threading.Lock()
_sock = None
_rfile = None
_pid = None  # the process that opened _sock (a fork must open its own)
_seq = 0
_broken = False


def enabled():
    """True when the process runs under faultline (FAULTLINE_EVENTS set)."""
    return bool(os.environ.get("FAULTLINE_EVENTS"))


def _warn(what):
    global _broken
    _broken = True
    sys.stderr.write("faultline_events: %s; carrying on without events\n" % what)
    sys.stderr.flush()


def _connect():
    """Opens the connection (under _lock); False when there is none."""
    global _sock, _rfile, _pid, _seq, _broken
    if _sock is not None and _pid == os.getpid():
        return True
    if _broken and _pid == os.getpid():
        return False
    path = os.environ.get("FAULTLINE_EVENTS")
    if not path:
        return False
    _sock, _rfile, _seq, _broken = None, None, 0, False
    _pid = os.getpid()
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.sendall(("HELLO host=%s job=%s task=%s pid=%d\n" % (
            os.environ.get("FAULTLINE_HOST") or "-",
            os.environ.get("FAULTLINE_JOB") or "-",
            os.environ.get("FAULTLINE_TASK") or "-1", _pid)).encode())
    except OSError as e:
        _warn("connect %s: %s" % (path, e))
        return False
    _sock, _rfile = s, s.makefile("rb", buffering=0)
    return True


def _format(kind, attrs):
    if not _KIND.match(kind):
        raise ValueError("bad event kind %r (lower-case letters, digits, '.', '_', '-')" % kind)
    parts = [kind]
    for k, v in attrs.items():
        if not _KEY.match(k):
            raise ValueError("bad attribute key %r in event %s" % (k, kind))
        v = "%s" % (v,)
        if not _BARE.match(v):
            v = '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        parts.append("%s=%s" % (k, v))
    return " ".join(parts)


def _send(kind, attrs, wait):
    global _seq
    body = _format(kind, attrs)
    if not enabled():
        return
    with _lock:
        if not _connect():
            return
        if wait:
            _seq += 1
            line = "SYNC %d %s\n" % (_seq, body)
        else:
            line = "EVENT %s\n" % body
        data = line.encode()
        if len(data) > _LINE_MAX:
            raise ValueError("event %s is %d bytes long; the channel takes at most %d"
                             % (kind, len(data), _LINE_MAX))
        try:
            _sock.sendall(data)
            if wait:
                ans = _rfile.readline().decode(errors="replace").strip()
                if ans != "OK %d" % _seq:
                    raise OSError("harness answered %r to SYNC %d" % (ans, _seq))
        except OSError as e:
            _warn("%s: %s" % (kind, e))
            _close_locked()


def event(kind, **attrs):
    """Sends `EVENT kind k=v ...` and returns at once."""
    _send(kind, attrs, False)


def sync(kind, **attrs):
    """Sends `SYNC seq kind k=v ...` and returns once the harness has applied
    every fault the event triggers (answer `OK seq`)."""
    _send(kind, attrs, True)


def _close_locked():
    global _sock, _rfile
    try:
        if _sock is not None:
            _sock.close()
    except OSError:
        pass
    _sock, _rfile = None, None


def close():
    """Closes the connection (the next call opens a new one)."""
    with _lock:
        _close_locked()
