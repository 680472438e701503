# Hosts of their own on one machine, for the multi-host tests (sourced): each host a Linux network
# namespace with one address, joined by veth pairs to a bridge in a namespace of its own (the
# machine's own network is never touched), and an rsh agent through which Open MPI's launcher
# starts its daemon on a host with `ip netns exec` (and the host's own hostname, in a UTS namespace
# of its own). Shared memory between the "hosts" is off (btl tcp,self): every byte crosses the
# bridge, as between machines.
#   source tests/dist/netns.sh
#   netns_up 3 || skip "$NETNS_WHY"          # hosts h1..h3 at $(netns_addr 1).. on a /24
#   netns_mpirun 3 -np 3 octet train ...      # one process per host, mpirun itself on host 1
#   netns_cut 2                               # host 2's link down (netns_restore 2 brings it back)
#   netns_block 2; netns_slow 2 20mbit        # every frame dropped; a slow link
#   netns_down                                # removes everything (also done on EXIT)
# Names carry this shell's pid, so tests running side by side (ctest -j) do not meet.

NETNS_TAG="o$$"
NETNS_NET="10.$((77 + $$ % 100)).$(($$ / 100 % 250)).0"
NETNS_HOSTS=0
NETNS_WHY=""
NETNS_AGENT=""

netns_name() { echo "${NETNS_TAG}h$1"; }
netns_bridge_ns() { echo "${NETNS_TAG}br"; }
netns_addr() { echo "${NETNS_NET%.0}.$1"; }
netns_veth() { echo "${NETNS_TAG}v$1"; }  # the bridge's end of host i's pair

# Creates hosts 1..n; returns 1 with NETNS_WHY set where this machine refuses (not root, no ip
# netns, no veth or bridge support).
netns_up() {
  local n=$1 i
  if [ "$(id -u)" -ne 0 ]; then NETNS_WHY="needs root (ip netns)"; return 1; fi
  command -v ip >/dev/null || { NETNS_WHY="no ip command (iproute2)"; return 1; }
  trap netns_down EXIT
  local br
  br=$(netns_bridge_ns)
  ip netns add "$br" 2>/dev/null || { NETNS_WHY="ip netns add refused: $(ip netns add "$br" 2>&1)"; return 1; }
  ip -n "$br" link add br0 type bridge 2>/dev/null || { NETNS_WHY="no bridge support"; netns_down; return 1; }
  ip -n "$br" link set br0 up
  ip -n "$br" link set lo up
  for i in $(seq 1 "$n"); do
    local h v
    h=$(netns_name "$i") v=$(netns_veth "$i")
    ip netns add "$h" || { NETNS_WHY="ip netns add $h failed"; netns_down; return 1; }
    NETNS_HOSTS=$i
    ip link add "$v" netns "$br" type veth peer name eth0 netns "$h" 2>/dev/null ||
      { NETNS_WHY="no veth support"; netns_down; return 1; }
    ip -n "$br" link set "$v" master br0 up
    ip -n "$h" addr add "$(netns_addr "$i")/24" dev eth0
    ip -n "$h" link set eth0 up
    ip -n "$h" link set lo up
  done
  NETNS_AGENT=$(mktemp)
  # The agent: `AGENT [options] HOST COMMAND...` as ssh is called; HOST is an address of ours.
  cat >"$NETNS_AGENT" <<AGENT
#!/usr/bin/env bash
while [ \$# -gt 0 ] && [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1; shift
i=\${host##*.}
exec ip netns exec ${NETNS_TAG}h\$i unshare --uts bash -c "hostname host\$i; \$*"
AGENT
  chmod +x "$NETNS_AGENT"
  return 0
}

# mpirun on host 1 with the hosts 1..n (NETNS_SLOTS slots each, 4 unless set), the TCP transports
# on the bridge's subnet, and the daemons' links watched by TCP keepalive (README, data-parallel
# training: without it mpirun waits ~8 minutes on a host whose link was cut; NETNS_KEEPALIVE=0
# leaves it out).
netns_mpirun() {
  local n=$1 hosts="" i keepalive=()
  shift
  [ "${NETNS_KEEPALIVE:-1}" = 1 ] &&
    keepalive=(--mca oob_tcp_keepalive_time 5 --mca oob_tcp_keepalive_intvl 2 --mca oob_tcp_keepalive_probes 3)
  for i in $(seq 1 "$n"); do hosts="${hosts:+$hosts,}$(netns_addr "$i"):${NETNS_SLOTS:-4}"; done
  ip netns exec "$(netns_name 1)" unshare --uts bash -c 'hostname host1; exec "$@"' mpirun \
    mpirun --allow-run-as-root --host "$hosts" --mca plm_rsh_agent "$NETNS_AGENT" --mca btl tcp,self \
    --mca btl_tcp_if_include "$NETNS_NET/24" --mca oob_tcp_if_include "$NETNS_NET/24" "${keepalive[@]}" "$@"
}

# Host i's link, at the bridge's end: cut (down); blocked (the bridge port disabled: the link
# stays up and every frame is dropped, as by a switch port shut or 100% packet loss); slowed to a
# rate (tc tbf; this kernel may lack netem, so delay and loss are made these ways); or restored.
netns_cut() { ip -n "$(netns_bridge_ns)" link set "$(netns_veth "$1")" down; }
netns_block() { bridge -n "$(netns_bridge_ns)" link set dev "$(netns_veth "$1")" state 0; }
netns_slow() {
  tc -n "$(netns_bridge_ns)" qdisc replace dev "$(netns_veth "$1")" root tbf rate "$2" burst 32kb latency 400ms
}
netns_restore() {
  local br v
  br=$(netns_bridge_ns) v=$(netns_veth "$1")
  ip -n "$br" link set "$v" up
  bridge -n "$br" link set dev "$v" state 3
  tc -n "$br" qdisc del dev "$v" root 2>/dev/null || true
}

# Every process still running in our hosts' namespaces.
netns_pids() {
  local i
  for i in $(seq 1 "$NETNS_HOSTS"); do ip netns pids "$(netns_name "$i")" 2>/dev/null; done
}

netns_down() {
  local i p
  for p in $(netns_pids); do kill -9 "$p" 2>/dev/null; done
  for i in $(seq 1 "$NETNS_HOSTS"); do ip netns del "$(netns_name "$i")" 2>/dev/null; done
  ip netns del "$(netns_bridge_ns)" 2>/dev/null
  [ -n "$NETNS_AGENT" ] && rm -f "$NETNS_AGENT"
  NETNS_HOSTS=0
  return 0
}
