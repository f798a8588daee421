/*
 * import_walk.c - what an input consists of before anything is imported:
 * its kind (a directory, or a file detected by content) and, for a
 * directory, the .npy files under it in bytewise name order. `wpack create`
 * lists every input first (its output cap and same-file guard need all the
 * files), then imports each item; wpack_import_file walks while importing.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "export.h"
#include "import.h"
#include "internal.h"
#include "wpack_import.h"

/* The public kinds are the internal ones, plus DIRECTORY. */
_Static_assert(WPACK_INPUT_NPY == WPK_IN_NPY && WPACK_INPUT_TORCH == WPK_IN_TORCH &&
                   WPACK_INPUT_TORCH_LEGACY == WPK_IN_TORCH_LEGACY &&
                   WPACK_INPUT_SAFETENSORS == WPK_IN_SAFETENSORS && WPACK_INPUT_ZIP == WPK_IN_ZIP &&
                   WPACK_INPUT_TAR == WPK_IN_TAR && WPACK_INPUT_MANIFEST == WPK_IN_MANIFEST &&
                   WPACK_INPUT_GGUF == WPK_IN_GGUF && WPACK_INPUT_IRPA == WPK_IN_IRPA,
               "wpack_import.h input kinds follow import.h");

const char *wpack_import_kind_name(int kind)
{
    return kind == WPACK_INPUT_DIRECTORY ? "directory" : wpk_input_kind_name(kind);
}

int wpk_detect_input(const char *path, int *code, char *err, size_t errlen)
{
    struct stat st;
    *code = WPACK_OK;
    if (!path) {
        *code = WPACK_E_INVALID_ARGUMENT;
        wpk_fmt(err, errlen, "no input path");
        return WPACK_INPUT_UNKNOWN;
    }
    if (stat(path, &st) != 0) {
        *code = WPACK_E_IO;
        wpk_fmt(err, errlen, "%s: %s", path, strerror(errno));
        return WPACK_INPUT_UNKNOWN;
    }
    if (S_ISDIR(st.st_mode))
        return WPACK_INPUT_DIRECTORY;
    if (!S_ISREG(st.st_mode)) { /* a FIFO would block the first read for ever */
        *code = WPACK_E_FILE_TYPE;
        wpk_fmt(err, errlen, "%s: %s, not a regular file or a directory (refused)", path,
                wpk_file_type_name(st.st_mode));
        return WPACK_INPUT_UNKNOWN;
    }
    int kind = wpk_import_detect(path, code, err, errlen);
    if (kind == WPK_IN_UNKNOWN && !*code)
        *code = WPACK_E_INPUT;
    return kind;
}

int wpack_import_detect(const char *path, char *err, size_t errlen)
{
    int code;
    int kind = wpk_detect_input(path, &code, err, errlen);
    if (err)
        wpk_msg_escape(err, errlen); /* the path in it may hold anything */
    return kind;
}

typedef struct {
    const wpack_import_options *o;
    wpack_import_item_fn fn;
    void *user;
    char *err;
    size_t errlen;
} lister;

static void warn(const lister *ls, const char *fmt, const char *a, const char *b)
{
    char m[1200];
    if (!ls->o->warn)
        return;
    wpk_fmt(m, sizeof m, fmt, a, b);
    wpk_msg_escape(m, sizeof m);
    ls->o->warn(ls->o->warn_user, m);
}

static int ends_with_npy(const char *s)
{
    size_t n = strlen(s);
    return n > 4 && strcmp(s + n - 4, ".npy") == 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The sorted names in the directory open at dfd (dir: its path, for
 * messages), hidden ones left out (NULL with *n 0 when empty). */
static int list_dir(const lister *ls, int dfd, const char *dir, char ***names, size_t *count)
{
    int fd = dup(dfd); /* closedir closes it; dfd stays for fstatat/openat */
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    *names = NULL;
    *count = 0;
    if (!d) {
        wpk_fmt(ls->err, ls->errlen, "%s: cannot open directory: %s", dir, strerror(errno));
        if (fd >= 0)
            close(fd);
        return WPACK_E_IO;
    }
    size_t n = 0, cap = 0;
    char **v = NULL;
    struct dirent *de;
    int rc = WPACK_OK;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue; /* ".", "..", and hidden files */
        if (n == cap) {
            cap = cap ? cap * 2 : 32;
            char **nv = realloc(v, cap * sizeof *nv);
            if (!nv) {
                rc = WPACK_E_NOMEM;
                break;
            }
            v = nv;
        }
        if (!(v[n] = strdup(de->d_name))) {
            rc = WPACK_E_NOMEM;
            break;
        }
        n++;
    }
    closedir(d);
    if (rc)
        wpk_fmt(ls->err, ls->errlen, "out of memory listing %s", dir);
    if (n) /* an empty directory has no array at all */
        qsort(v, n, sizeof *v, cmp_str);
    *names = v;
    *count = n;
    return rc;
}

/* One entry (base) of the directory open at dfd: a directory is walked, a
 * .npy becomes an item. A symlink is refused unless follow_links: it may
 * lead out of the directory; a FIFO or device is skipped with a warning,
 * never opened. Entries are looked at and opened relative to dfd, never by
 * their path, and a subdirectory with O_NOFOLLOW: a directory swapped for a
 * symlink while the walk runs cannot take it elsewhere. */
static int walk(const lister *ls, int dfd, const char *dir, const char *rel, int depth);

static int visit(const lister *ls, int dfd, const char *path, char *name, const char *base,
                 int depth)
{
    struct stat st;
    /* not following: a symlinked directory could loop; symlinked files are followed below. */
    if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        wpk_fmt(ls->err, ls->errlen, "%s: %s", path, strerror(errno));
        return WPACK_E_IO;
    }
    if (S_ISDIR(st.st_mode)) {
        int sub = openat(dfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0 && (errno == ELOOP || errno == ENOTDIR)) {
            wpk_fmt(ls->err, ls->errlen, "%s: no longer a directory (replaced while the "
                    "directory was walked?): refused", path);
            return WPACK_E_FILE_TYPE;
        }
        if (sub < 0) {
            wpk_fmt(ls->err, ls->errlen, "%s: cannot open directory: %s", path, strerror(errno));
            return WPACK_E_IO;
        }
        int rc = walk(ls, sub, path, name, depth + 1);
        close(sub);
        return rc;
    }
    if (!ends_with_npy(base)) {
        warn(ls, "skipping %s: not a .npy file%s", path, "");
        return WPACK_OK;
    }
    if (S_ISLNK(st.st_mode) && !ls->o->follow_links) {
        wpk_fmt(ls->err, ls->errlen,
                "%s: a symbolic link: refused, as it may lead out of the directory "
                "(--follow-links allows it)", path);
        return WPACK_E_FILE_TYPE;
    }
    if (S_ISLNK(st.st_mode) && fstatat(dfd, base, &st, 0) != 0) {
        wpk_fmt(ls->err, ls->errlen, "%s: broken symlink", path);
        return WPACK_E_IO;
    }
    if (!S_ISREG(st.st_mode)) {
        warn(ls, "skipping %s: %s, not a regular file", path, wpk_file_type_name(st.st_mode));
        return WPACK_OK;
    }
    name[strlen(name) - 4] = 0;
    wpk_entry_name_unescape(name); /* once, on the joined name: "a%2Fb/c.npy" -> "a/b.c" */
    wpack_import_item it = {path, name, WPACK_INPUT_NPY, (uint64_t)st.st_size};
    return ls->fn(ls->user, &it);
}

/* Walk the directory open at dfd (dir: its path) in sorted order; rel is
 * the name prefix so far ("" at the top). */
static int walk(const lister *ls, int dfd, const char *dir, const char *rel, int depth)
{
    if (depth > 64) {
        wpk_fmt(ls->err, ls->errlen, "%s: directories nested deeper than 64 levels", dir);
        return WPACK_E_LIMIT;
    }
    char **names;
    size_t n;
    int rc = list_dir(ls, dfd, dir, &names, &n);
    for (size_t i = 0; i < n && !rc; i++) {
        size_t plen = strlen(dir) + strlen(names[i]) + 2;
        size_t rlen = strlen(rel) + strlen(names[i]) + 2;
        char *path = malloc(plen), *name = malloc(rlen);
        if (!path || !name) {
            wpk_fmt(ls->err, ls->errlen, "out of memory listing %s", dir);
            rc = WPACK_E_NOMEM;
        } else {
            snprintf(path, plen, "%s/%s", dir, names[i]);
            snprintf(name, rlen, "%s%s%s", rel, *rel ? "." : "", names[i]);
            rc = visit(ls, dfd, path, name, names[i], depth);
        }
        free(path);
        free(name);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

int wpk_import_list(const char *path, const wpack_import_options *o, wpack_import_item_fn fn,
                    void *user, char *err, size_t errlen)
{
    lister ls = {o, fn, user, err, errlen};
    int code;
    int kind = wpk_detect_input(path, &code, err, errlen);
    if (kind == WPACK_INPUT_UNKNOWN)
        return code;
    if (kind == WPACK_INPUT_DIRECTORY) {
        size_t n = strlen(path);
        char *dir = strdup(path);
        if (!dir) {
            wpk_fmt(err, errlen, "out of memory");
            return WPACK_E_NOMEM;
        }
        while (n > 1 && dir[n - 1] == '/')
            dir[--n] = 0;
        /* the directory the caller named is followed if a link; nothing under it is */
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int rc = WPACK_OK;
        if (dfd < 0) {
            wpk_fmt(err, errlen, "%s: cannot open directory: %s", dir, strerror(errno));
            rc = WPACK_E_IO;
        } else {
            rc = walk(&ls, dfd, dir, "", 0);
            close(dfd);
        }
        free(dir);
        return rc;
    }
    if (kind != WPACK_INPUT_NPY) {
        /* a manifest or HF index counts the files it names too */
        wpack_import_item it = {path, NULL, kind, wpk_import_bytes(path, kind, o->follow_links)};
        return fn(user, &it);
    }
    struct stat st;
    uint64_t size = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
    if (o->name && *o->name) {
        wpack_import_item it = {path, o->name, kind, size};
        return fn(user, &it);
    }
    if (!ends_with_npy(path)) {
        wpk_fmt(err, errlen, "%s: a .npy file must be named NAME.npy", path);
        return WPACK_E_INVALID_ARGUMENT;
    }
    const char *base = strrchr(path, '/');
    char *name = strdup(base ? base + 1 : path);
    if (!name) {
        wpk_fmt(err, errlen, "out of memory");
        return WPACK_E_NOMEM;
    }
    name[strlen(name) - 4] = 0;
    wpk_entry_name_unescape(name);
    wpack_import_item it = {path, name, kind, size};
    int rc = fn(user, &it);
    free(name);
    return rc;
}
