#!/bin/bash
# Reap cost per pass: zombies accumulated while drainit is stopped (SIGSTOP,
# drainit as subreaper), then reaped in passes of up to 1,024 on SIGCONT; prints
# the mmap, munmap and wait4 counts of `strace -c` (drainit alone, not -f).
# Usage: bench/reap_pass.sh DRAINIT [N]
B=$1; N=${2:-3000}; D=$(mktemp -d)
strace -c -o $D/st $B -- /bin/sh -c "touch $D/ready; while [ ! -e $D/go ]; do sleep 0.01; done; i=0; while [ \$i -lt $N ]; do (true &); i=\$((i+1)); done; touch $D/made; while [ ! -e $D/end ]; do sleep 0.01; done" &
while [ ! -e $D/ready ]; do sleep 0.01; done
P=$(pgrep -f "^$B -- /bin/sh" | head -1)
kill -STOP $P; touch $D/go
while [ ! -e $D/made ]; do sleep 0.01; done
while [ $(ps --ppid $P -o stat= | grep -c Z) -lt $((N-10)) ]; do sleep 0.05; done
kill -CONT $P
while [ $(ps --ppid $P -o stat= | grep -c Z) -gt 0 ]; do sleep 0.02; done
touch $D/end; wait
grep -E " (mmap|munmap|wait4|total)$" $D/st; rm -rf $D
