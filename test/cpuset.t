#!/usr/bin/env bash
# A cgroup v1 cpuset whose CPUs change under a running nginx: widened,
# shrunk, with and without worker_cpu_affinity (test/cpuset.sh). The
# kernel's rewrite of the master's mask is not the program's own mask:
# the library keeps following within the new CPUs, and says so.
. "$(dirname "$0")/lib.sh"
. "$SRCDIR/test/cpuset.sh"

case_widen
case_shrink_following
case_shrink_idle
done_testing
