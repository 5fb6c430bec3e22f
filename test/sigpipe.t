#!/usr/bin/env bash
# The library's own lines never raise a signal and never wait: with stderr
# a pipe whose reader is gone (a dead log pipeline, `nginx 2>&1 | head -0`)
# or a full pipe nobody reads, the lines it says before main() (a bad
# MASTERAFF_* value, MASTERAFF_LOG=debug) are lost, and nginx starts as it
# does alone. nginx ignores SIGPIPE only from main() on.
. "$(dirname "$0")/lib.sh"
PORT=18232
make_twopkg
write_conf "10 01"

# dead_pipe COMMAND...: runs COMMAND with stderr the write end of a pipe
# whose read end was closed before it started; prints its exit status as
# perl's $? says it (a signal's number in the low 7 bits).
dead_pipe() {
    perl -e 'pipe(my $r, my $w) or die; close $r;
             defined(my $pid = fork) or die;
             if (!$pid) { open STDERR, ">&", $w or die; exec @ARGV; die }
             waitpid $pid, 0; print $?, "\n"' -- "$@"
}

# full_pipe COMMAND...: the same with a pipe whose reader is alive but
# never reads, filled up before COMMAND starts. COMMAND is killed after
# 10 s.
full_pipe() {
    perl -MFcntl -e 'pipe(my $r, my $w) or die;
             my $fl = fcntl($w, F_GETFL, 0);
             fcntl($w, F_SETFL, $fl | O_NONBLOCK);
             1 while syswrite($w, "x" x 4096);
             fcntl($w, F_SETFL, $fl);
             defined(my $pid = fork) or die;
             if (!$pid) { open STDERR, ">&", $w or die; exec @ARGV; die }
             close $w;
             local $SIG{ALRM} = sub { kill 9, $pid };
             alarm 10; waitpid $pid, 0; print $?, "\n"' -- "$@"
}

# with_lib VAR=VALUE: the command line that starts nginx with the library
# and VAR=VALUE, for the pipes above to run (they exec a program, not a
# shell function).
with_lib() {
    WITH_LIB=(env LD_PRELOAD="$LIB" MASTERAFF_SYSFS="$T/sys" "$1" "$NGINX" -c "$T/nginx.conf")
}

started() { # started DESCRIPTION STATUS
    is "$2" 0 "$1: nginx's start exits 0 (no signal)"
    wait_workers
    ok $? "$1: the master runs, with its workers"
    serves
    ok $? "$1: nginx serves"
    stop_nginx
}

started "alone, reader gone" "$(dead_pipe env -u LD_PRELOAD "$NGINX" -c "$T/nginx.conf")"
started "MASTERAFF_SCOPE=bogus, reader gone" "$(with_lib MASTERAFF_SCOPE=bogus && dead_pipe "${WITH_LIB[@]}")"
started "MASTERAFF_LOG=debug, reader gone" "$(with_lib MASTERAFF_LOG=debug && dead_pipe "${WITH_LIB[@]}")"
started "MASTERAFF_PROGRAMS=/, reader gone" "$(with_lib MASTERAFF_PROGRAMS=/ && dead_pipe "${WITH_LIB[@]}")"

started "MASTERAFF_LOG=debug, full pipe" "$(with_lib MASTERAFF_LOG=debug && full_pipe "${WITH_LIB[@]}")"
started "MASTERAFF_SCOPE=bogus, full pipe" "$(with_lib MASTERAFF_SCOPE=bogus && full_pipe "${WITH_LIB[@]}")"

# A program that blocks SIGPIPE itself still finds none pending after the
# library's line: the signal was the library's, and it took it back.
out=$(dead_pipe perl -MPOSIX -e 'sigprocmask(SIG_BLOCK, POSIX::SigSet->new(SIGPIPE)); exec @ARGV' \
    env LD_PRELOAD="$LIB" MASTERAFF_PROGRAMS=perl MASTERAFF_LOG=debug \
    perl -MPOSIX -e 'my $s = POSIX::SigSet->new; sigpending($s);
        print(($s->ismember(SIGPIPE) ? "pending" : "none"), "\n")')
is "$(head -1 <<<"$out")" none "SIGPIPE blocked by the program: none left pending by the library's lines"

done_testing
