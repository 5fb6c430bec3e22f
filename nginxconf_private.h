/* ngx_conf_read_token reads a file through a buffer of NGX_CONF_BUFFER
 * bytes, and a token (or comment) that does not fit in it is an error. */
#define NGX_CONF_BUFFER 4096
/* The longest word kept: longer ones only fit in -g, where a long value
 * of a directive that matters would be a doubt anyway. */
#define WORD_MAX NGX_CONF_BUFFER
/* Words kept of a directive: its name and two arguments; the others pass
 * through a last slot, only to be checked. */
#define KEPT_WORDS 4

struct directive {
    size_t n; /* words read */
    char w[KEPT_WORDS][WORD_MAX + 1];
    size_t len[KEPT_WORDS];
    bool too_long;   /* some kept word did not fit */
    const char *bad; /* why worker_cpu_affinity's masks are invalid */
};

struct lexer {
    const char *buf;
    size_t size, pos, start;
    size_t last; /* the end of what nginx's buffer holds of the file: the
                    Lua reader sees no further */
    unsigned line;
    bool bounded; /* a file, read through nginx's buffer; not -g */
};

struct ctx {
    struct ma_ngx_prediction *out;
    long ncpu;
    char conf_prefix[PATH_MAX];
    const char *file; /* being read, for messages */
    struct lexer *lx;
    unsigned depth, files;
    size_t total;
    bool files_cut; /* the list of files ends in "..." */
    bool failed;
    const char *exe;  /* the executable, read only when needed */
    bool scanned;     /* the executable's tags were looked for */
    bool angie;       /* the executable is Angie's */
    int tengine;      /* Tengine's version (major * 1000 + minor), or 0 */
    int master;       /* master_process: -1 unset, 0 off, 1 on */
    long workers;     /* worker_processes: -1 unset */
    bool affinity;    /* worker_cpu_affinity seen */
    bool w0_pins;     /* nginx will call sched_setaffinity in worker 0 */
    bool automatic;   /* worker_cpu_affinity auto */
    cpu_set_t w0;
    char affinity_at[PATH_MAX + 16];
    struct directive d;
    /* The paths the start needs, here rather than on the stack: the
     * library reads the configuration in its constructor, on nginx's main
     * thread, before nginx has run, under whatever stack limit it has. */
    char conf_file[PATH_MAX], prefix[PATH_MAX], compiled_prefix[PATH_MAX],
        compiled_conf[PATH_MAX];
};

struct options {
    const char *prefix, *conf, *params;
    const char *not_server; /* why this invocation starts no server */
    char option;            /* the option that said so */
};
