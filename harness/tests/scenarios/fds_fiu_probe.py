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
import errno
import os
import time

from fl_probe_lib import sync, try_write


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
