/* libmasteraff: whether a file beside the library may be loaded into the
 * master (memory.c opens libnuma so), and what masteraff status says of
 * it. */
#ifndef MASTERAFF_LOADABLE_H
#define MASTERAFF_LOADABLE_H

#include <stddef.h>
#include <sys/types.h>

/* Whether file name in directory dir may be loaded by a master: dlopen
 * runs its constructor with the master's privileges (root), at the first
 * memory move, which can be long after the start. It must be a regular
 * file, and it and every directory from dir up to / owned by root or by
 * owner (the library's), and writable by no one else: not by group or
 * others, unless on a read-only mount, nor for a directory above dir
 * without the sticky bit, which lets no one replace another's entry.
 *
 * dir is absolute and without symbolic links; every path is read under
 * root ("" for none; masteraff status reads a master's files through
 * /proc/PID/root). Returns 0 when it may be loaded; 1 when not, with the
 * reason, which names paths as the master sees them, in why; -1 with
 * errno when name cannot be looked at (ENOENT: there is none). */
int ma_loadable(const char *root, const char *dir, const char *name,
                uid_t owner, char *why, size_t len);

#endif
