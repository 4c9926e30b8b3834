#!/bin/sh
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
if [ -e /bin/mount ]; then
  mount -t proc proc /proc
else
  # A foreign busybox (s390x) could not list its applets on the host.
  /bin/busybox mount -t proc proc /proc
  /bin/busybox --install -s
fi
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
# Loopback, for workloads that talk to themselves (udp-stream, seed 002).
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up 2>/dev/null
# The channel's modules (virtio-serial, where the kernel has it as modules),
# dependencies first; without them the channel is the second serial port.
if [ -f /modules ]; then
  while IFS= read -r m || [ -n "$m" ]; do
    insmod "$m" 2>/dev/console || echo "farm: insmod $m failed" > /dev/console
  done < /modules
fi
ch=/dev/ttyS1
i=0
while [ $i -lt 50 ]; do
  for p in /sys/class/virtio-ports/*; do
    [ -f "$p/name" ] && [ "$(cat "$p/name")" = farm ] && ch=/dev/${p##*/}
  done
  [ -f /modules ] || break
  [ "$ch" != /dev/ttyS1 ] && [ -e "$ch" ] && break
  sleep 0.1
  i=$((i + 1))
done
exec 3>"$ch"
[ "$ch" = /dev/ttyS1 ] && stty -F /dev/ttyS1 raw -echo 2>/dev/null
r() { printf '%s\n' "$*" >&3; }
domains() {
  for d in /sys/kernel/debug/sched/domains/cpu*/domain*; do
    [ -f "$d/name" ] || continue
    c=${d%/domain*}; c=${c##*/cpu}; l=${d##*/domain}
    r "domain $1 $c $l $(cat "$d/name")"
  done
}
r "farm-job 2"
r "release $(uname -r)"
for n in /sys/devices/system/node/node[0-9]*; do
  [ -f "$n/cpulist" ] && r "node ${n##*/node} $(cat "$n/cpulist")"
done
domains before
# The machine state: lines `cycle N`, `offline N`, `autogroup 0|1`, `cgroup 1`
# then its limits `cpu_weight N`, `cpu_max Q P`, `cpuset LIST`, and the
# scheduler's `feature [NO_]NAME`, `tunable NAME N`, `numa_balancing N`;
# written by the host (numbers, and names of A-Z a-z 0-9 _ only); anything
# else stops the job.
cg=
sd=/sys/kernel/debug/sched
tun=
numa=
while IFS=' ' read -r what a b || [ -n "$what" ]; do
  case "$what" in
    cycle) echo 0 > /sys/devices/system/cpu/cpu$a/online && echo 1 > /sys/devices/system/cpu/cpu$a/online || r "error state $what $a" ;;
    offline) echo 0 > /sys/devices/system/cpu/cpu$a/online || r "error state $what $a" ;;
    autogroup) echo $a > /proc/sys/kernel/sched_autogroup_enabled || r "error state $what $a" ;;
    cgroup) mount -t cgroup2 none /sys/fs/cgroup && echo "+cpu +cpuset" > /sys/fs/cgroup/cgroup.subtree_control && mkdir /sys/fs/cgroup/farm && cg=/sys/fs/cgroup/farm || r "error state cgroup" ;;
    cpu_weight) [ -n "$cg" ] && echo $a > $cg/cpu.weight || r "error state $what $a" ;;
    cpu_max) [ -n "$cg" ] && echo "$a $b" > $cg/cpu.max || r "error state $what $a $b" ;;
    cpuset) [ -n "$cg" ] && echo $a > $cg/cpuset.cpus || r "error state $what $a" ;;
    feature)
      n=${a#NO_}
      if grep -qw -e "$n" -e "NO_$n" $sd/features 2>/dev/null; then
        echo "$a" > $sd/features || r "error apply sched feature $a: the kernel refused it"
      else
        r "error apply sched feature $a: the guest's kernel has no such feature (it has: $(cat $sd/features 2>/dev/null))"
      fi ;;
    tunable)
      if [ -f "$sd/$a" ]; then
        echo "$b" > "$sd/$a" || r "error apply sched tunable $a=$b: the kernel refused it"
        tun="$tun $a"
      else
        r "error apply sched tunable $a: the guest's kernel has no such tunable ($sd/$a)"
      fi ;;
    numa_balancing)
      if [ -f /proc/sys/kernel/numa_balancing ]; then
        echo "$a" > /proc/sys/kernel/numa_balancing || r "error apply numa_balancing $a: the kernel refused it"
        numa=1
      else
        r "error apply numa_balancing $a: the guest's kernel has no kernel.numa_balancing"
      fi ;;
    *) r "error state $what" ;;
  esac
done < /state
# The knobs as the kernel now shows them, for the host to check.
[ -f $sd/features ] && r "knob features $(cat $sd/features)"
for t in $tun; do r "knob $t $(cat $sd/$t)"; done
[ -n "$numa" ] && r "knob numa_balancing $(cat /proc/sys/kernel/numa_balancing)"
r "cmdline $(cat /proc/cmdline)"
r "online $(cat /sys/devices/system/cpu/online)"
domains after
set --
while IFS= read -r a || [ -n "$a" ]; do
  set -- "$@" "$a"
done < /job
# Counters right before and after the workload, kept in files and sent
# once the workload and the sampler are done, so that neither the sending
# (forked seds) nor the sampler lands between them; `times` is the shell's
# builtin (children's user and sys), run without a fork, taken where the
# snapshot's own forks (cat, grep) fall outside the difference.
snap() {
  [ $1 = after ] && times > /tmp/times.$1
  cat /proc/interrupts > /tmp/irq.$1
  grep '^ctxt ' /proc/stat > /tmp/ctxt.$1
  [ -f /proc/schedstat ] && cat /proc/schedstat > /tmp/schedstat.$1
  [ $1 = before ] && times > /tmp/times.$1
}
send() {
  sed "s/^/irq $1 /" /tmp/irq.$1 >&3
  [ -f /tmp/schedstat.$1 ] && sed "s/^/schedstat $1 /" /tmp/schedstat.$1 >&3
  while read -r k v; do r "ctxt $1 $v"; done < /tmp/ctxt.$1
  { read -r x; read -r u s; } < /tmp/times.$1
  r "times $1 $u $s"
}
# How slowly this guest runs plain CPU work: farm-sample times a fixed
# loop (5 ms natively, about 12 ms under TCG) and the host, which timed it
# natively, reports the ratio (guest_slowdown). Before the workload and
# its sampler start, so that it is no part of the sampler's budget.
/bin/farm-sample --calibrate >&3
# The load balancer's counters for the run (the guest is thrown away
# after it: nothing to restore).
[ -f /proc/sys/kernel/sched_schedstats ] && echo 1 > /proc/sys/kernel/sched_schedstats
# The sampler (farm-sample, a static program built by the host for this
# arch) reads /proc without forking, every 100 ms as on hosts (or less
# often, to keep within its budget), the workload's session only. It starts
# now, so that its start-up is paid before the workload, and waits on a
# FIFO for the session; SIGUSR1 wakes it to stop, and is ignored until it
# has set its handler.
# The workload's wrapper (its session's leader) waits on /tmp/go until the
# sampler has opened the perf counters on it, which its exec enables and
# everything it starts inherits (30 s at most: a sampler that died leaves
# the run without counters, not stuck); it takes the start time then.
mkfifo /tmp/sid /tmp/go
(trap '' USR1; exec /bin/farm-sample --session-from /tmp/sid --go /tmp/go --interval-ms 100 --stop /tmp/stop) >&3 &
spid=$!
# The workload does not get the channel (3>&-): it could write report
# lines, and would hold the port open past poweroff.
snap before
r "begin"
read t0 x < /proc/uptime
# The job's words are the wrapper's arguments, never part of its script.
[ -n "$cg" ] && join='echo $$ > /sys/fs/cgroup/farm/cgroup.procs || exit 1;' || join=
setsid sh -c "$join"'exec 4<>/tmp/go; read -t 30 x <&4; exec 4<&-; read t0 x < /proc/uptime; echo $t0 > /tmp/t0; exec "$@"' farm-job "$@" > /tmp/out 2> /tmp/err 3>&- &
pid=$!
r "session $pid"
# In the background: a sampler that died would never open the FIFO.
(echo $pid > /tmp/sid) &
# Under TCG a busy workload would starve the sweeps until it ends: the
# sampler runs at a higher priority, and reports what it cost.
renice -n -5 -p $spid > /dev/null 2>&1
wait $pid
rc=$?
read t1 x < /proc/uptime
# From the wrapper's release (a wrapper that failed before it: from here).
[ -s /tmp/t0 ] && read t0 < /tmp/t0
snap after
touch /tmp/stop
kill -USR1 $spid 2>/dev/null
wait $spid
send before
send after
r "end"
# A last line without a newline must not run into the next report line.
sed 's/^/out /' /tmp/out >&3
printf '\n' >&3
tail -n 100 /tmp/err | sed 's/^/err /' >&3
printf '\n' >&3
r "exit $rc"
r "wall_s $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')"
r "done"
exec 3>&-
sync
poweroff -f
