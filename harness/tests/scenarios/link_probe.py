#!/usr/bin/env python3
"""link_probe.py: traffic for the link-fault scenarios (test_faults_link.c).

  link_probe.py udp-rx PORT BIN          count datagrams by their first byte;
                                         answer each 'P' with 'p'; at the
                                         first 'F' report the counts of 'L'
                                         and 'H' as event link.udp and exit;
                                         'S<n>' datagrams (sequence numbers)
                                         add seq=, dups=, ooo= (arrivals
                                         below an earlier one), lost=, runs=
                                         (runs of consecutive lost numbers)
  link_probe.py udp-tx HOST PORT BIN EVENT N GAP_MS [STABLE_MS [TAG]]
                                         wait until HOST answers; emit --sync
                                         EVENT (the fault lands); send N 'L'
                                         datagrams (TAG S: 'S<n>') GAP_MS
                                         apart; wait until bursts of 20
                                         probes are all answered for
                                         STABLE_MS (the fault healed); send
                                         400 'H', 50 'F<N>'
  link_probe.py udp-rtt HOST PORT BIN EVENT N
                                         N round trips to HOST one at a
                                         time (ICMP echoes its kernel answers,
                                         dated by this kernel's receive
                                         timestamp), emit --sync EVENT, N more;
                                         report event link.rtt with base_us
                                         (median before) and min_us, med_us,
                                         max_us, p90_us (under the fault); 50 'F0'
  link_probe.py tcp-rx PORT BIN          two TCP transfers; report each one's
                                         rate as event link.rate
  link_probe.py tcp-sink PORT BIN         TCP transfers until killed; report
                                         each one's rate and the process's
                                         generation as event link.transfer
  link_probe.py tcp-tx HOST PORT BIN EVENT SECS
                                         one transfer of SECS seconds, emit
                                         --sync EVENT, a second one
The fault is applied when `faultline emit --sync` returns, so nothing here
sleeps to wait for it; waiting for the heal is watching the link itself.
"""
import os
import socket
import subprocess
import sys
import time


def emit(bin_dir, *args):
    subprocess.run([bin_dir + "/faultline", "emit"] + list(args), check=True)


def udp_rx(port, bin_dir):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    # a buffer that holds every datagram of a burst, so that a receiver
    # slow to run on a busy machine drops none (what is lost is the link's):
    # SO_RCVBUFFORCE needs CAP_NET_ADMIN in the machine's user namespace,
    # which a task has only on a privileged host; else SO_RCVBUF, up to the
    # machine's net.core.rmem_max (4 MiB on the machines faultline is
    # tested on, 208 KiB by Debian's default)
    try:
        s.setsockopt(socket.SOL_SOCKET, 33, 4 << 20)  # SO_RCVBUFFORCE
    except PermissionError:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind(("", port))
    counts = {}
    seqs = []
    n_sent = 0
    while True:
        data, peer = s.recvfrom(64)
        tag = data[:1].decode()
        counts[tag] = counts.get(tag, 0) + 1
        if tag == "P":
            s.sendto(b"p" + data[1:], peer)
        elif tag == "S":
            seqs.append(int(data[1:]))
        elif tag == "F":
            n_sent = int(data[1:] or b"0")
            break
    lossy, healed = counts.get("L", 0) + len(seqs), counts.get("H", 0)
    extra = []
    if seqs:
        got = set(seqs)
        ooo, top = 0, -1
        for q in seqs:
            if q < top:
                ooo += 1
            top = max(top, q)
        runs, prev_lost = 0, False
        for q in range(n_sent):
            lost = q not in got
            if lost and not prev_lost:
                runs += 1
            prev_lost = lost
        extra = [f"seq={len(got)}", f"dups={len(seqs) - len(got)}", f"ooo={ooo}",
                 f"lost={n_sent - len(got)}", f"runs={runs}"]
    print(" ".join([f"lossy={lossy}", f"healed={healed}"] + extra), flush=True)
    emit(bin_dir, "link.udp", f"lossy={lossy}", f"healed={healed}", *extra)


def probe(s, addr, n, wait_s):
    """Sends n probes, returns how many answers came within wait_s."""
    while True:  # stale answers
        try:
            s.recv(16, socket.MSG_DONTWAIT)
        except (BlockingIOError, socket.timeout):
            break
    for _ in range(n):
        s.sendto(b"P", addr)
    got, end = 0, time.monotonic() + wait_s
    while got < n:
        left = end - time.monotonic()
        if left <= 0:
            break
        s.settimeout(left)
        try:
            s.recv(16)
            got += 1
        except socket.timeout:
            break
    return got


def wait_up(s, addr):
    deadline = time.monotonic() + 20
    while probe(s, addr, 1, 0.05) == 0:     # the receiver is up
        if time.monotonic() > deadline:
            sys.exit("receiver never answered")


def udp_tx(host, port, bin_dir, event, n, gap_ms, stable_ms, tag="L"):
    addr = (socket.gethostbyname(host), port)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    wait_up(s, addr)
    emit(bin_dir, "--sync", event)
    for i in range(n):
        s.sendto(b"L" if tag == "L" else b"S%d" % i, addr)
        if gap_ms:
            time.sleep(gap_ms / 1000.0)     # pacing the traffic, not waiting for anything
    # healed: every probe answered, for stable_ms in a row (a flapping
    # link answers everything while it is up)
    t0 = time.monotonic()
    ok_since = None
    while True:
        now = time.monotonic()
        if probe(s, addr, 20, 0.1) < 20:
            ok_since = None
        elif ok_since is None:
            ok_since = now
        if ok_since is not None and (now - ok_since) * 1000 >= stable_ms:
            break
        if now - t0 > 30:
            sys.exit("the link never healed")
        if stable_ms:
            time.sleep(0.01)                # pacing the probes
    print(f"healed after {time.monotonic() - t0:.2f}s", flush=True)
    for _ in range(400):
        s.sendto(b"H", addr)
    for _ in range(50):
        s.sendto(b"F%d" % n, addr)


def icmp_checksum(b):
    if len(b) % 2:
        b += b"\0"
    c = sum(int.from_bytes(b[i:i + 2], "big") for i in range(0, len(b), 2))
    while c >> 16:
        c = (c & 0xffff) + (c >> 16)
    return ~c & 0xffff


SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # also SCM_TIMESTAMPNS; 64-bit timespec


def rtts(host_ip, n, seq0):
    """n ICMP echo round trips to host_ip, one at a time (microseconds).

    The echo is answered by the other host's kernel and the answer dated by
    this host's kernel as it arrives (SO_TIMESTAMPNS), so neither an echoing
    process's nor this one's scheduling on a busy machine adds to a round
    trip: what is measured is the link (the emulator's hold).  An ICMP echo
    socket (SOCK_DGRAM: what ping uses without CAP_NET_RAW, which a task in
    a host does not have): the kernel sets the identifier and hands back
    the ICMP message without its IP header."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    ident = os.getpid() & 0xffff
    out = []
    for i in range(n):
        seq = (seq0 + i) & 0xffff
        hdr = bytes([8, 0, 0, 0]) + ident.to_bytes(2, "big") + seq.to_bytes(2, "big")
        pkt = hdr + b"faultline-rtt"
        pkt = pkt[:2] + icmp_checksum(pkt).to_bytes(2, "big") + pkt[4:]
        t0 = time.time_ns()
        s.sendto(pkt, (host_ip, 0))
        end = time.monotonic() + 2
        while True:
            left = end - time.monotonic()
            if left <= 0:
                break
            s.settimeout(left)
            try:
                data, anc, _, _ = s.recvmsg(256, 64)
            except socket.timeout:
                break
            icmp = data[:8]
            if len(icmp) == 8 and icmp[0] == 0 and int.from_bytes(icmp[6:8], "big") == seq:
                t1 = None
                for level, kind, val in anc:
                    if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                        sec, nsec = int.from_bytes(val[:8], "little"), int.from_bytes(val[8:16], "little")
                        t1 = sec * 10**9 + nsec
                out.append(((t1 if t1 is not None else time.time_ns()) - t0) // 1000)
                break
    s.close()
    return sorted(out)


def udp_rtt(host, port, bin_dir, event, n):
    addr = (socket.gethostbyname(host), port)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    wait_up(s, addr)
    base = rtts(addr[0], n, 0)
    emit(bin_dir, "--sync", event)
    d = rtts(addr[0], n, n)
    if not base or not d:
        sys.exit("no round trips")
    kv = [f"base_us={base[len(base) // 2]}", f"min_us={d[0]}", f"med_us={d[len(d) // 2]}",
          f"max_us={d[-1]}", f"p90_us={d[len(d) * 9 // 10]}", f"n={len(d)}"]
    print(" ".join(kv), flush=True)
    emit(bin_dir, "link.rtt", *kv)
    for _ in range(50):
        s.sendto(b"F0", addr)


def tcp_rx(port, bin_dir):
    l = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("", port))
    l.listen(4)
    rates = []
    for _ in range(2):
        c, _ = l.accept()
        got, t0 = 0, None
        while True:
            b = c.recv(1 << 16)
            if not b:
                break
            if t0 is None:
                t0 = time.monotonic()
            got += len(b)
        secs = time.monotonic() - t0
        c.close()
        rates.append(int(got * 8 / secs / 1000))
    print(f"free_kbit={rates[0]} limited_kbit={rates[1]}", flush=True)
    emit(bin_dir, "link.rate", f"free_kbit={rates[0]}", f"limited_kbit={rates[1]}")


def tcp_sink(port, bin_dir):
    l = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("", port))
    l.listen(4)
    gen = os.environ.get("FAULTLINE_GENERATION", "0")
    while True:
        c, _ = l.accept()
        got, t0 = 0, None
        while True:
            b = c.recv(1 << 16)
            if not b:
                break
            if t0 is None:
                t0 = time.monotonic()
            got += len(b)
        kbit = int(got * 8 / (time.monotonic() - t0) / 1000)
        print(f"generation {gen}: {kbit} kbit/s", flush=True)
        emit(bin_dir, "link.transfer", f"kbit={kbit}", f"gen={gen}")
        c.close()


def tcp_send(addr, secs):
    deadline = time.monotonic() + 20
    while True:
        try:
            c = socket.create_connection(addr, timeout=5)
            break
        except ConnectionRefusedError:       # the receiver is not up yet
            if time.monotonic() > deadline:
                sys.exit("receiver never listened")
            time.sleep(0.02)
    buf = b"x" * (1 << 16)
    end = time.monotonic() + secs
    while time.monotonic() < end:
        c.sendall(buf)
    c.shutdown(socket.SHUT_WR)
    c.settimeout(60)
    c.recv(1)                               # the receiver has counted it all (its close)
    c.close()


def tcp_tx(host, port, bin_dir, event, secs):
    addr = (socket.gethostbyname(host), port)
    tcp_send(addr, secs)
    emit(bin_dir, "--sync", event)
    tcp_send(addr, secs)


if __name__ == "__main__":
    a = sys.argv[1:]
    if a[0] == "udp-rx":
        udp_rx(int(a[1]), a[2])
    elif a[0] == "udp-tx":
        udp_tx(a[1], int(a[2]), a[3], a[4], int(a[5]), int(a[6]), int(a[7]) if len(a) > 7 else 0,
               a[8] if len(a) > 8 else "L")
    elif a[0] == "udp-rtt":
        udp_rtt(a[1], int(a[2]), a[3], a[4], int(a[5]))
    elif a[0] == "tcp-rx":
        tcp_rx(int(a[1]), a[2])
    elif a[0] == "tcp-sink":
        tcp_sink(int(a[1]), a[2])
    elif a[0] == "tcp-tx":
        tcp_tx(a[1], int(a[2]), a[3], a[4], float(a[5]))
    else:
        sys.exit("usage: see the docstring")
