# pause_fiu_probe.py: for the pause-disk scenario.  SYNC go: the harness
# pauses this task and then applies a disk fault on the probe's own point
# probe/write (EIO) while it is frozen; once it runs again the point fails
# (its control thread takes the command it found waiting: asked until it
# does, at most 5 s).  SYNC again: a second fault (ENOSPC), applied to the
# running process, fails the point at once.  One line each.
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


print('before:', try_write(), flush=True)
sync('go')
deadline = time.time() + 5
while try_write() == 'wrote' and time.time() < deadline:
    time.sleep(0.001)
print('after the pause:', try_write(), flush=True)
sync('again')
print('running:', try_write(), flush=True)
