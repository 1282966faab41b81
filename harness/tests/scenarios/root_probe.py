# root_probe.py: what root can do on a host (root-confined.yaml).  Each probe
# makes one system call a machine's root may make and prints its name and
# the outcome (ok or the errno's name).  `confined`: every probe must fail
# (the task's capabilities are its host's user namespace's, which owns
# nothing; file modes alone meet read-only mounts), and the last line is
# CONFINED.  `privileged` (a host with privileged: true): the task is the
# machine's root (its user namespace is init's) and makes a network link
# and a mount, both in its host's own namespaces (gone with the host); the
# last line is PRIVILEGED.  Nothing a probe could change on the machine is
# changed even when it succeeds: the clock is set to the time it reads,
# the sysctl to the value it holds, the module to load is none.
import ctypes
import errno
import os
import subprocess
import sys
import time

libc = ctypes.CDLL(None, use_errno=True)
MS_RDONLY, MS_REMOUNT, MS_BIND = 1, 32, 4096


def call(fn, *args):
    r = fn(*args)
    return 'ok' if r == 0 else errno.errorcode.get(ctypes.get_errno(), '?')


def py(fn):
    try:
        fn()
        return 'ok'
    except OSError as e:
        return errno.errorcode.get(e.errno, '?')


def write(path, text):
    with open(path, 'w') as f:
        f.write(text)


def settime():
    time.clock_settime(time.CLOCK_REALTIME, time.time())


def ip(*args):
    r = subprocess.run(['ip'] + list(args), capture_output=True, text=True)
    return 'ok' if r.returncode == 0 else r.stderr.strip().replace('\n', ' ')


scenario_dir = os.path.dirname(os.path.abspath(__file__))
mode = sys.argv[1]
own_ns = os.readlink('/proc/self/ns/user')
try:
    init_ns = os.readlink('/proc/1/ns/user')
except OSError as e:
    init_ns = errno.errorcode.get(e.errno, '?')
print('user namespace: %s, init\'s: %s' % (own_ns, init_ns))

if mode == 'privileged':
    r = {
        'same user namespace as the machine': 'ok' if own_ns == init_ns else 'no',
        'ip link add (veth)': ip('link', 'add', 'flp0', 'type', 'veth', 'peer', 'name', 'flp1'),
        'mount tmpfs /mnt': call(libc.mount, b'fl-it', b'/mnt', b'tmpfs', 0, None),
    }
    for k, v in r.items():
        print('%s: %s' % (k, v))
    print('PRIVILEGED' if all(v == 'ok' for v in r.values()) else 'NOT PRIVILEGED')
    sys.exit(0)

rl = open('/proc/sys/kernel/printk_ratelimit').read()
probes = {
    'mount tmpfs over /var/tmp': call(libc.mount, b'fl-it', b'/var/tmp', b'tmpfs', 0, None),
    'remount {scenario_dir} (a machine path) read-write':
        call(libc.mount, None, scenario_dir.encode(), None, MS_REMOUNT | MS_BIND, None),
    'write in {scenario_dir}': py(lambda: write(scenario_dir + '/fl-it-planted', 'x')),
    'set the clock': py(settime),
    'load a module': call(libc.init_module, None, 0, b''),
    'make a device': py(lambda: os.mknod('/tmp/fl-it-sda', 0o600 | 0o060000, os.makedev(8, 0))),
    'ip link add (veth)': ip('link', 'add', 'flp0', 'type', 'veth', 'peer', 'name', 'flp1'),
    'set the hostname': py(lambda: __import__('socket').sethostname('fl-it-other')),
    'write /proc/sys/kernel': py(lambda: write('/proc/sys/kernel/printk_ratelimit', rl)),
    'write /proc/sysrq-trigger': py(lambda: write('/proc/sysrq-trigger', '')),
    'make a cgroup': py(lambda: os.mkdir(
        [os.path.join(d, 'fl-it-cg') for d in ('/sys/fs/cgroup/pids', '/sys/fs/cgroup/unified',
                                                '/sys/fs/cgroup') if os.path.isdir(d)][0])),
    'write /sys/kernel': py(lambda: write('/sys/kernel/uevent_helper', '')),
}
ok = True
for k, v in probes.items():
    print('%s: %s' % (k, v))
    ok = ok and v != 'ok'
# what root of the host may still do: its own files, a port below 1024
try:
    write('/etc/fl-it-root-confined', 'x')
    import socket
    s = socket.socket()
    s.bind(('0.0.0.0', 80))
    s.close()
    print('own /etc and port 80: ok')
except OSError as e:
    print('own /etc and port 80: %s' % e)
    ok = False
print('CONFINED' if ok else 'NOT CONFINED')
