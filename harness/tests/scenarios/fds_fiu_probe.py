# fds_fiu_probe.py: for the limit-fds-disk scenario.  Holds one connection
# to the harness's event channel (docs/events.md), made before any limit,
# so that it can still sync while it may open nothing.  Each SYNC returns
# once the faults it triggers are applied:
#   fds.low    limit: {fds: 3}           -> opening /dev/null fails (EMFILE)
#   disk.eio   point probe/write: EIO    \  each applied and then replaced
#   disk.nospc point probe/write: ENOSPC /  while the limit holds
# then it waits (bounded) until it may open again (the limit's heal) and
#   disk.rofs  point probe/write: EROFS  -> the process still takes commands
# printing a line before and after.  The point is the probe's own, asked
# through libfiu (ctypes; the library fl_fiu_preload.so loaded), so the
# faults touch nothing else, its stdout least of all.
import ctypes
import errno
import os
import socket
import sys
import time

ev = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
ev.connect(os.environ['FAULTLINE_EVENTS'])
ev.sendall(('HELLO host=%s job=%s task=%s pid=%d\n' % (
    os.environ['FAULTLINE_HOST'], os.environ['FAULTLINE_JOB'],
    os.environ['FAULTLINE_TASK'], os.getpid())).encode())
rd = ev.makefile('rb', buffering=0)
seq = 0


def sync(kind):
    global seq
    seq += 1
    ev.sendall(('SYNC %d %s\n' % (seq, kind)).encode())
    line = rd.readline().decode().strip()
    if line != 'OK %d' % seq:
        sys.exit('sync %s: harness answered %r' % (kind, line))


fiu = ctypes.CDLL('libfiu.so.0')
fiu.fiu_failinfo.restype = ctypes.c_void_p


def try_write():
    if not fiu.fiu_fail(b'probe/write'):
        return 'wrote'
    e = fiu.fiu_failinfo() or 0
    return errno.errorcode.get(e, str(e))


def try_open():
    try:
        os.close(os.open('/dev/null', os.O_RDONLY))
        return 'opened'
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


print('before:', try_open(), try_write(), flush=True)
sync('fds.low')
low = try_open()
sync('disk.eio')
eio = try_write()
sync('disk.nospc')
nospc = try_write()
print('under the limit: open', low, 'write', eio, 'then', nospc, flush=True)
deadline = time.time() + 20
while try_open() == 'EMFILE' and time.time() < deadline:
    time.sleep(0.01)
sync('disk.rofs')
print('after the heal: open', try_open(), 'write', try_write(), flush=True)
