/*
 * same_files.c - the same-file rule (same_files.h): an output is never
 * written onto an input, nor two outputs onto one file.
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"
#include "same_files.h"
#include "wpack.h"

/* path's directory (stat: symlinks, "." and "..", bind mounts and other
 * spellings of one directory are one device and inode) into *dir; its last
 * component is returned. NULL when the directory cannot be looked at. */
static const char *where(const char *path, struct stat *dir)
{
    const char *slash = strrchr(path, '/');
    char d[PATH_MAX];
    if (!slash)
        strcpy(d, ".");
    else if (slash == path)
        strcpy(d, "/");
    else if ((size_t)(slash - path) < sizeof d)
        memcpy(d, path, (size_t)(slash - path)), d[slash - path] = 0;
    else
        return NULL;
    return stat(d, dir) == 0 ? (slash ? slash + 1 : path) : NULL;
}

/* Would files not there yet at a and b be one file: the same name in the
 * same directory, however each is spelled? */
static int same_place(const char *a, const char *b)
{
    struct stat da, db;
    const char *ba = where(a, &da), *bb = where(b, &db);
    return ba && bb && da.st_dev == db.st_dev && da.st_ino == db.st_ino && strcmp(ba, bb) == 0;
}

static int same_id(const wpk_file_ref *a, const wpk_file_ref *b)
{
    return a->exists && b->exists && a->st.st_dev == b->st.st_dev && a->st.st_ino == b->st.st_ino;
}

/* The index in v of the first existing input that an archive written at
 * out would remove (a shard of the set whose manifest is at out:
 * wpack_replaced_among), n for none, SIZE_MAX when out of memory. */
static size_t replaced_input(const wpk_file_ref *v, size_t n, const char *out)
{
    const char **in = calloc(n ? n : 1, sizeof *in);
    size_t hit = SIZE_MAX;
    if (!in)
        return SIZE_MAX;
    for (size_t j = 0; j < n; j++)
        in[j] = v[j].kind == WPK_FILE_IN && v[j].exists ? v[j].path : NULL;
    if (wpack_replaced_among(out, in, n, &hit) != WPACK_OK)
        hit = SIZE_MAX;
    free(in);
    return hit;
}

int wpk_files_check(wpk_file_ref *v, size_t n, int outputs_distinct, const char *hint, char *err,
                    size_t errlen)
{
    size_t *ins = calloc(n ? n : 1, sizeof *ins), nin = 0;
    if (!ins) {
        wpk_fmt(err, errlen, "out of memory");
        return WPACK_E_NOMEM;
    }
    for (size_t i = 0; i < n; i++) { /* each file looked at once (symlinks followed) */
        if (!v[i].known)
            v[i].exists = v[i].path && stat(v[i].path, &v[i].st) == 0;
        if (v[i].kind == WPK_FILE_IN)
            ins[nin++] = i;
    }
    int rc = WPACK_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        const wpk_file_ref *o = &v[i];
        if (o->kind == WPK_FILE_IN || !o->path)
            continue;
        size_t replaced = o->kind == WPK_FILE_OUT_ARCHIVE && o->exists ? replaced_input(v, n, o->path) : n;
        if (replaced == SIZE_MAX) {
            wpk_fmt(err, errlen, "out of memory");
            rc = WPACK_E_NOMEM;
            break;
        }
        /* each output against each input, and against the later outputs
         * unless they are known distinct */
        size_t nlater = outputs_distinct ? 0 : n - i - 1;
        for (size_t k = 0; k < nin + nlater && !rc; k++) {
            size_t j = k < nin ? ins[k] : i + 1 + (k - nin);
            const wpk_file_ref *x = &v[j];
            if (k >= nin && (x->kind == WPK_FILE_IN || !x->path))
                continue; /* an input, already seen */
            if (x->kind == WPK_FILE_IN) { /* an input exists: only an existing output can be it */
                if (same_id(o, x))
                    wpk_fmt(err, errlen,
                            "output '%s' is the same file as input '%s'%s%s: nothing was written",
                            o->path, x->path, hint ? "; " : "", hint ? hint : "");
                else if (j == replaced)
                    wpk_fmt(err, errlen,
                            "input '%s' is a shard of the set at output '%s', which the new "
                            "archive replaces and removes: nothing was written",
                            x->path, o->path);
                else
                    continue;
            } else if (o->exists && x->exists ? !same_id(o, x) : !same_place(o->path, x->path)) {
                continue;
            } else {
                wpk_fmt(err, errlen, "outputs '%s' and '%s' are the same file: nothing was written",
                        x->path, o->path);
            }
            rc = WPACK_E_SAME_FILE;
        }
    }
    free(ins);
    return rc;
}
