/* update.h - the in-place update session, shared by update.c (session,
 * edits, commit) and update_index.c (building the new index). */
#ifndef WPACK_PACKER_UPDATE_H
#define WPACK_PACKER_UPDATE_H

#include "buf.h"
#include "nameset.h"
#include "wpack.h"

/* A pending metadata string or name-map name (key -> value). */
typedef struct {
    char *key, *value;
} kv;

struct wpack_update {
    char *path;
    int fd;                     /* holds the updaters' lock (flock) */
    unsigned flags;
    wpack_archive *ar;
    wpack_stats_in *stats;      /* owned deep copies, one per (key, kind) */
    size_t nstats, stats_cap;
    wpk_nameset stats_keys[2];  /* per kind (weight, activation): keys -> index in stats */
    kv *drops;                  /* stats to drop: key, value = kind ("1", "2" or "0": both) */
    size_t ndrops;
    kv *meta, *names;
    size_t nmeta, nnames;
    int errcode;
    char errmsg[700];
};

/* Record the failure on u (message in u->errmsg); returns code. */
int wpk_ufail(wpack_update *u, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The new index of u's archive with u's edits in *out: only live records,
 * each string and aux item once (update_index.c). */
int wpk_update_build_index(wpack_update *u, wpk_buf *out);

#endif
