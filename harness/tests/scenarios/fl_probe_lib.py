# fl_probe_lib.py: what the Python probes of the disk-fault scenarios
# (fds_fiu_probe.py, pause_fiu_probe.py) share.  Events: one connection to
# the harness's event channel (docs/events.md), made at import, before any
# fault, so that a probe can still sync when it may open nothing; sync(KIND)
# returns once the faults it triggers are applied.  Fault point: try_write()
# asks libfiu (the library fl_fiu_preload.so loaded) whether the probe's own
# point probe/write fails, and returns 'wrote' or the errno's name, so the
# faults touch nothing else, the probe's stdout least of all.
import ctypes
import errno
import os
import socket
import sys

_ev = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
_ev.connect(os.environ['FAULTLINE_EVENTS'])
_ev.sendall(('HELLO host=%s job=%s task=%s pid=%d\n' % (
    os.environ['FAULTLINE_HOST'], os.environ['FAULTLINE_JOB'],
    os.environ['FAULTLINE_TASK'], os.getpid())).encode())
_rd = _ev.makefile('rb', buffering=0)
_seq = 0


def sync(kind):
    global _seq
    _seq += 1
    _ev.sendall(('SYNC %d %s\n' % (_seq, kind)).encode())
    line = _rd.readline().decode().strip()
    if line != 'OK %d' % _seq:
        sys.exit('sync %s: harness answered %r' % (kind, line))


_fiu = ctypes.CDLL('libfiu.so.0')
_fiu.fiu_failinfo.restype = ctypes.c_void_p


def try_write():
    if not _fiu.fiu_fail(b'probe/write'):
        return 'wrote'
    e = _fiu.fiu_failinfo() or 0
    return errno.errorcode.get(e, str(e))
