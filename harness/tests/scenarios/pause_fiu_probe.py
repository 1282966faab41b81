# pause_fiu_probe.py: for the pause-disk scenario.  SYNC go: the harness
# pauses this task and then applies a disk fault on the probe's own point
# probe/write (EIO) while it is frozen; once it runs again the point fails
# (its control thread takes the command it found waiting: asked until it
# does, at most 5 s).  SYNC again: a second fault (ENOSPC), applied to the
# running process, fails the point at once.  One line each.
import time

from fl_probe_lib import sync, try_write


print('before:', try_write(), flush=True)
sync('go')
deadline = time.time() + 5
while try_write() == 'wrote' and time.time() < deadline:
    time.sleep(0.001)
print('after the pause:', try_write(), flush=True)
sync('again')
print('running:', try_write(), flush=True)
