/* libmasteraff: worker 0's CPUs from an nginx command line and the
 * configuration it names, by nginx's own rules (src/core/nginx.c,
 * src/core/ngx_conf_file.c), before nginx has read anything.
 *
 * Pure logic over files: no process state, no globals, nothing written,
 * every descriptor closed and every allocation freed before it returns,
 * errno as the caller left it. Any doubt is "no placement" with a reason. */
#ifndef MASTERAFF_NGINXCONF_H
#define MASTERAFF_NGINXCONF_H

#include <sched.h>
#include <stdbool.h>

/* Bounds on the work: a configuration past them is a doubt. */
#define MA_NGX_MAX_FILE_BYTES (1L << 20)   /* one configuration file */
#define MA_NGX_MAX_TOTAL_BYTES (4L << 20)  /* all files together */
#define MA_NGX_MAX_FILES 64                /* files opened, includes too */
#define MA_NGX_MAX_DEPTH 8                 /* nested includes */
#define MA_NGX_MAX_EXE_BYTES (64L << 20)   /* executable scanned for paths */

struct ma_ngx_prediction {
    bool place;         /* an nginx master will start, and worker 0 pins */
    cpu_set_t worker0;  /* worker 0's mask as nginx will ask for it (not
                           yet intersected with any allowed set) */
    cpu_set_t auto_cpus; /* with "worker_cpu_affinity auto": the CPUs it
                            deals out, worker i the i-th (wrapping); else
                            empty */
    char reason[320];   /* why not; or, with place, where the mask is set */
    unsigned n_files;   /* configuration files read */
    char files[1024];   /* their names, ", "-separated, "..." if cut */
};

/* Predicts worker 0's CPUs for nginx started as argv (argc words, as
 * main() gets them) from the executable at exe (read only when no -c or a
 * relative one needs the compiled-in paths, which differ in Angie, or when
 * "worker_cpu_affinity auto" needs to know an old Tengine), on a machine
 * with ncpu online CPUs (nginx and its forks use
 * sysconf(_SC_NPROCESSORS_ONLN) for "auto"). Fills *out
 * in every case. In a constructor, which glibc calls with (argc, argv,
 * envp) as main gets them:
 *
 *     static struct ma_ngx_prediction p;
 *     ma_ngx_predict(argc, argv, ma_cfg.exe,
 *                    sysconf(_SC_NPROCESSORS_ONLN), &p);
 *     if (p.place) {
 *         CPU_AND(&p.worker0, &p.worker0, &original);  (the kernel only
 *         grants CPUs the process may use; none left is a doubt too)
 *     } else {
 *         debug("no early placement: %s", p.reason);
 *     }
 *     debug("read %u files: %s", p.n_files, p.files);
 *
 * Takes about 20 us with -c on Debian's configuration, 110 us when the
 * executable is scanned for its paths (warm page cache). */
void ma_ngx_predict(int argc, char *const argv[], const char *exe, long ncpu,
                    struct ma_ngx_prediction *out);

#endif
