#!/usr/bin/env bash
# hosts_ip_baseline.sh N: the shell baseline of the hosts_up_down_N figures.
#
# Brings N hosts up and down the way a shell script would, with a loop of
# `ip` commands, and prints the elapsed seconds of up+down as one number on
# stdout (nothing else goes to stdout).  Per host, like faultline's hosts:
#   - a named network namespace (ip netns add <tag>-h<i>);
#   - a veth pair: "h<i>" in a switch namespace <tag>-sw, enslaved to its
#     bridge br0 (up, STP off), the peer "eth0" in the host namespace with
#     198.18.0.0 + i + 1 /15, up; lo up;
#   - a holder process in new mount (private propagation), PID, UTS and IPC
#     namespaces (unshare) with a per-host directory bind-mounted at the
#     host's working directory.
# Down: kill every holder, delete every namespace, remove the directories.
#
# It touches only what it creates: namespaces named with a run tag unique to
# this invocation (flb-<pid>-<random>-...), processes it started, a temporary
# directory.  An EXIT/INT/TERM/HUP trap removes all of it, also when the
# script is interrupted or fails half-way.  Needs root, iproute2, util-linux.
set -euo pipefail

N=${1:-}
if ! [[ "$N" =~ ^[0-9]+$ ]] || (( N < 1 || N > 65534 )); then
    echo "usage: $0 N   (1 <= N <= 65534)" >&2
    exit 2
fi
if (( EUID != 0 )); then
    echo "$0: needs root" >&2
    exit 2
fi

TAG="flb-$$-$RANDOM"
SW="$TAG-sw"
DIR=$(mktemp -d "${TMPDIR:-/tmp}/$TAG.XXXXXX")
FIFO="$DIR/ready"
NETNS_DIR=/run/netns
RUN_NETNS_WAS_MOUNT=0
mountpoint -q "$NETNS_DIR" 2>/dev/null && RUN_NETNS_WAS_MOUNT=1
HOLDERS=()

cleanup() {
    local rc=$?
    trap - EXIT INT TERM HUP
    set +e
    if ((${#HOLDERS[@]})); then
        { kill -KILL "${HOLDERS[@]}"; wait "${HOLDERS[@]}"; } 2>/dev/null
    fi
    # Only our own namespaces: every name carries this run's tag.
    local ns
    for ns in "$NETNS_DIR/$TAG"-*; do
        [[ -e "$ns" ]] && ip netns del "${ns##*/}" 2>/dev/null
    done
    exec 3<&- 2>/dev/null
    # Bind mounts lived in the holders' private mount namespaces: gone with them.
    rm -rf "$DIR"
    # `ip netns add` self-bind-mounts /run/netns the first time; undo that
    # only if we caused it and nobody else uses it now (umount of a busy
    # mount fails harmlessly).
    if (( !RUN_NETNS_WAS_MOUNT )) && mountpoint -q "$NETNS_DIR" 2>/dev/null &&
       [[ -z "$(ls -A "$NETNS_DIR" 2>/dev/null)" ]]; then
        umount "$NETNS_DIR" 2>/dev/null
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

mkfifo "$FIFO"
exec 3<>"$FIFO"   # read end held open: holders can write without blocking

addr() {  # host index -> 198.18.0.0 + i + 1
    local v=$(( (198 << 24) + (18 << 16) + $1 + 1 ))
    echo "$(( (v >> 24) & 255 )).$(( (v >> 16) & 255 )).$(( (v >> 8) & 255 )).$(( v & 255 ))"
}

now() { date +%s.%N; }

t0=$(now)

# ---- up ----
ip netns add "$SW"
ip -n "$SW" link add br0 type bridge stp_state 0 forward_delay 0
ip -n "$SW" link set br0 up
for (( i = 0; i < N; i++ )); do
    H="$TAG-h$i"
    ip netns add "$H"
    ip -n "$SW" link add "h$i" type veth peer name eth0 netns "$H"
    ip -n "$SW" link set "h$i" master br0 up
    ip -n "$H" addr add "$(addr "$i")/15" dev eth0
    ip -n "$H" link set eth0 up
    ip -n "$H" link set lo up
    mkdir -p "$DIR/h$i/disk" "$DIR/h$i/work"
    ip netns exec "$H" unshare --mount --propagation private --uts --ipc --pid --fork \
        --kill-child sh -c 'mount --bind "$1" "$2" && echo ok >"$3" && exec sleep infinity' \
        sh "$DIR/h$i/disk" "$DIR/h$i/work" "$FIFO" </dev/null >/dev/null &
    HOLDERS+=("$!")
done
for (( i = 0; i < N; i++ )); do
    if ! read -r -t 60 -u 3 _; then
        echo "$0: host holders did not come up ($i of $N ready)" >&2
        exit 1
    fi
done

# ---- down ----
{ kill -KILL "${HOLDERS[@]}"; wait "${HOLDERS[@]}" || true; } 2>/dev/null  # no "Killed" notices
HOLDERS=()
for (( i = 0; i < N; i++ )); do
    ip netns del "$TAG-h$i"
done
ip netns del "$SW"
rm -rf "${DIR:?}"/h*

t1=$(now)
awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", b - a }'
