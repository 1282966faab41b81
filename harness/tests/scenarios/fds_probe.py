# fds_probe.py BIN: for the limit-fds scenario.  Waits (a sync point) until
# the harness has applied what the event probe.ready triggers, then opens
# /dev/null up to 200 times.  On EMFILE it prints its limit and how many it
# got, closes them, waits (bounded; the limit has no event: it reads
# /proc/self/limits) until the limit is lifted, and opens 200 again.
import os
import subprocess
import sys
import time


def limit():
    for line in open('/proc/self/limits'):
        if line.startswith('Max open files'):
            return line.split()[3]
    return '?'


subprocess.run([sys.argv[1] + '/faultline', 'emit', '--sync', 'probe.ready'], check=True)
low = limit()
fds = []
try:
    while len(fds) < 200:
        fds.append(os.open('/dev/null', os.O_RDONLY))
    print('opened', len(fds), flush=True)
except OSError as e:
    print('limit', low, 'stopped at', len(fds), e.strerror, flush=True)
    for f in fds:
        os.close(f)
    deadline = time.time() + 20
    while limit() == low and time.time() < deadline:
        time.sleep(0.01)
    fds = [os.open('/dev/null', os.O_RDONLY) for i in range(200)]
    print('after the heal opened', len(fds), flush=True)
