#!/usr/bin/env bash
# The cases of test/cpuset.t (test/cpuset.sh) with the library reading a
# cgroup2 hierarchy: cpuset.cpus.effective in the cgroup, or in its
# parent when the cgroup has none (a parent that does not enable the
# controller). This host binds the cpuset controller to its v1 hierarchy,
# and the kernel moves a controller to cgroup2 only when no v1 mount is
# left anywhere: in a private mount namespace, the test hides the v1
# mount, lays the cgroup2 files over the cgroup2 mount point, and writes
# them as the kernel changes the v1 cpuset (this kernel rewrites the tasks'
# masks by the same rule for v1 and v2).
. "$(dirname "$0")/privatens.sh"
. "$(dirname "$0")/lib.sh"
. "$SRCDIR/test/cpuset.sh"

UNIFIED=/sys/fs/cgroup/unified
mountpoint -q "$UNIFIED" || mount -t cgroup2 none "$UNIFIED" 2>/dev/null ||
    skip_all "no cgroup2 mount at $UNIFIED, and none can be made"
# The fake tree first: test/mktree is a script, which would start with
# no reachable working directory below.
make_twopkg
# The v1 hierarchy stays reachable from the working directory only.
cd "$V1" && umount -l "$V1" || skip_all "cannot hide the v1 cpuset mount"
V1=. CG=./$CG_NAME
mount -t tmpfs masteraff-cgroup2 "$UNIFIED" || skip_all "cannot mount a tmpfs over $UNIFIED"
CG2=$UNIFIED
mkdir "$CG2/$CG_NAME"
! grep -q ' - cgroup [^ ]* .*cpuset' /proc/self/mountinfo
ok $? "the v1 cpuset mount is hidden: the library reads the cgroup2 files"

case_widen
case_shrink_following
CG2_AT=root
case_shrink_idle
done_testing
