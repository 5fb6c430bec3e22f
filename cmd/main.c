/* masteraff: runs a command (nginx) with libmasteraff preloaded; shows
 * where a master, its children and their memory are (status), and the
 * machine as the library sees it (topology). */
#define _GNU_SOURCE
#include "cli.h"

#include <string.h>

const char usage_text[] =
    "Usage: masteraff [OPTION]... [--] COMMAND [ARG]...\n"
    "       masteraff status [--sysfs DIR] [--json | --check | --prometheus |\n"
    "                        --textfile[=DIR|FILE]] [PID | PIDFILE]\n"
    "       masteraff topology [--sysfs DIR]\n"
    "\n"
    "Runs COMMAND (nginx) with libmasteraff preloaded: the master process\n"
    "follows worker 0 onto its package and moves its memory to worker 0's\n"
    "NUMA node.\n"
    "\n"
    "  --scope SCOPE    how far around worker 0's CPUs the master may run:\n"
    "                   package (default), die, node, llc, cluster, core,\n"
    "                   cpu, worker\n"
    "  --no-migrate     leave the master's memory where it is\n"
    "  --no-early       do not place the master at start from nginx's\n"
    "                   configuration; follow worker 0 when it pins\n"
    "  --auto-cpuset    worker_cpu_affinity auto within the CPUs nginx may\n"
    "                   use: worker i on the i-th allowed CPU\n"
    "  --dry-run        decide and log, change nothing\n"
    "  --log LEVEL      error, warn, notice (default), info, debug\n"
    "  --sysfs DIR      read the topology below DIR (absolute) instead of /sys\n"
    "  --library PATH   the library to preload (default: $MASTERAFF_LIBRARY,\n"
    "                   else " LIBRARY_NAME " beside this program, else the\n"
    "                   installed one)\n"
    "  -h, --help       show this help and exit\n"
    "  -V, --version    show the version and exit\n"
    "\n"
    "status: the master (PID, the pid in PIDFILE, default " DEFAULT_PIDFILE
    ")\n"
    "and its children, one line each: pid, role, allowed CPUs, their packages\n"
    "and nodes, resident pages per node (private, and shared zones); whether\n"
    "the library is loaded in the master and its settings there; then a\n"
    "verdict (ok, warning, critical, unknown) on whether the master and its\n"
    "memory are with worker 0, at the master's MASTERAFF_SCOPE.\n"
    "  --json           all of it as one JSON object\n"
    "  --check          one line \"MASTERAFF OK - ...\" and the exit status of\n"
    "                   a monitoring plugin: 0 ok, 1 warning, 2 critical\n"
    "                   (also a master that is not running), 3 unknown\n"
    "                   (any other error)\n"
    "  --prometheus     Prometheus' text format: one sample per fact\n"
    "                   (masteraff_up, masteraff_verdict, ...)\n"
    "  --textfile[=DIR|FILE]  the same into FILE (ending in .prom) or\n"
    "                   DIR/masteraff.prom, default DIR\n"
    "                   " DEFAULT_TEXTFILE_DIR ",\n"
    "                   replaced whole, for node_exporter; a master not\n"
    "                   found is written as masteraff_up 0\n"
    "\n"
    "topology: packages, dies, nodes, LLCs, clusters and cores with their "
    "CPUs.\n"
    "\n"
    "topology reads below --sysfs DIR, else $MASTERAFF_SYSFS, else /sys;\n"
    "status too, then below the master's own MASTERAFF_SYSFS.\n"
    "\n"
    "Exit status: 0 ok (status: a report was made, whatever its verdict),\n"
    "1 runtime error, 2 usage error, 126 COMMAND cannot run, 127 COMMAND not\n"
    "found; else COMMAND's own.\n";

/* getopt names argv[0] in its messages: "masteraff", or "masteraff status"
 * once a subcommand is chosen. */
static char program[] = "masteraff";

/* Runs a subcommand with argv[0] naming it, as getopt's messages do. */
static int subcommand(int (*command)(int, char **), int argc, char **argv)
{
    static char name[64];
    snprintf(name, sizeof name, "masteraff %s", argv[1]);
    me = name;
    argv[1] = name;
    return command(argc - 1, argv + 1);
}

int main(int argc, char **argv)
{
    argv[0] = program;
    if (argc > 1 && strcmp(argv[1], "status") == 0)
        return subcommand(status_command, argc, argv);
    if (argc > 1 && strcmp(argv[1], "topology") == 0)
        return subcommand(topology_command, argc, argv);
    run_command(argc, argv);
}
