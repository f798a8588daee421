/*
 * import_api.c - the public calls of wpack_import.h for importing: options,
 * the importer (several inputs into one writer), wpack_import_file and
 * wpack_import_list. Each input goes through the sink (import_sink.c) to
 * the importer of its kind (import.c); a plain .npy without --cast streams
 * straight into the writer (npy_pack.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "import.h"
#include "internal.h"
#include "manifest_stats.h"
#include "npy.h"
#include "wpack_import.h"

struct wpack_importer {
    wpack_writer *w;
    wpk_sink sink;
    char err[1024];
    /* every input path given, copied: the sink's name owners point at them */
    char **paths;
    size_t npaths, cap;
};

void wpack_import_options_init(wpack_import_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->weight_stats = 1;
    opt->max_ratio = WPK_DEFAULT_MAX_RATIO;
    opt->max_total = WPK_DEFAULT_MAX_TOTAL;
}

/* o: the caller's options (NULL: defaults) as a whole struct, checked. */
static int options_take(const wpack_import_options *in, wpack_import_options *o, char *err,
                        size_t errlen)
{
    wpack_import_options_init(o);
    if (in)
        *o = *in;
    int rc = WPK_RESERVED_CHECK(o, "wpack_import_options", "wpack_import.h", err, errlen);
    if (rc)
        return rc;
    if (o->cast && o->cast != WPACK_DTYPE_BF16 && o->cast != WPACK_DTYPE_F16) {
        wpk_fmt(err, errlen, "wpack_import_options: cast %d: want 0, WPACK_DTYPE_BF16 or "
                "WPACK_DTYPE_F16", o->cast);
        return WPACK_E_INVALID_ARGUMENT;
    }
    if ((o->only_count && !o->only) || (o->name_map_count && (!o->name_map_other ||
                                                               !o->name_map_entry))) {
        wpk_fmt(err, errlen, "wpack_import_options: a count without its array");
        return WPACK_E_INVALID_ARGUMENT;
    }
    return WPACK_OK;
}

/* The sink's options for one input. */
static wpk_import_opts sink_opts(const wpack_import_options *o)
{
    wpk_import_opts io = {
        .prefix = o->prefix && *o->prefix ? o->prefix : NULL,
        .key = o->key && *o->key ? o->key : NULL,
        .cast = o->cast,
        .only = o->only_count ? o->only : NULL,
        .nonly = o->only_count,
        .weight_stats = o->weight_stats,
        .max_total = o->max_total,
        .max_ratio = o->max_ratio,
        .follow_links = o->follow_links,
        .temp_dir = o->temp_dir && *o->temp_dir ? o->temp_dir : NULL,
        .keep_observers = o->keep_observers,
        .executor = o->executor,
        .portable_stats = o->portable_stats,
    };
    return io;
}

int wpack_import_open(wpack_importer **out, wpack_writer *w)
{
    *out = NULL;
    if (!w)
        return WPACK_E_INVALID_ARGUMENT;
    wpack_importer *imp = calloc(1, sizeof *imp);
    if (!imp)
        return WPACK_E_NOMEM;
    imp->w = w;
    wpk_sink_init(&imp->sink, w, imp->err, sizeof imp->err);
    *out = imp;
    return WPACK_OK;
}

void wpack_import_close(wpack_importer *imp)
{
    if (!imp)
        return;
    wpk_sink_free(&imp->sink);
    for (size_t i = 0; i < imp->npaths; i++)
        free(imp->paths[i]);
    free(imp->paths);
    free(imp);
}

const char *wpack_import_errmsg(const wpack_importer *imp)
{
    return imp ? imp->err : "";
}

static int fail(wpack_importer *imp, int code, const char *fmt, const char *a, const char *b)
{
    wpk_fmt(imp->err, sizeof imp->err, fmt, a, b);
    return code;
}

/* path copied for as long as the importer lives (NULL: out of memory). */
static const char *keep_path(wpack_importer *imp, const char *path)
{
    if (imp->npaths && strcmp(imp->paths[imp->npaths - 1], path) == 0)
        return imp->paths[imp->npaths - 1];
    if (imp->npaths == imp->cap) {
        size_t cap = imp->cap ? imp->cap * 2 : 16;
        char **v = realloc(imp->paths, cap * sizeof *v);
        if (!v)
            return NULL;
        imp->paths = v;
        imp->cap = cap;
    }
    char *p = strdup(path);
    if (p)
        imp->paths[imp->npaths++] = p;
    return p;
}

/* A listed .npy, opened (non-blocking, regular files only): under
 * o->within one component at a time, no link followed unless follow_links
 * (a directory swapped for a link since the listing cannot take the
 * import out of the tree), else by its path. The fd, or minus a code. */
static int open_item(wpack_importer *imp, const char *path, const wpack_import_options *o,
                     struct stat *st)
{
    char msg[600];
    int code, fd;
    size_t wl = o->within ? strlen(o->within) : 0;
    while (wl > 1 && o->within[wl - 1] == '/')
        wl--;
    if (!wl || o->follow_links) {
        fd = wpk_open_input(AT_FDCWD, path, 0, st, &code, msg, sizeof msg);
    } else if (strncmp(path, o->within, wl) != 0 || path[wl] != '/') {
        return -fail(imp, WPACK_E_INVALID_ARGUMENT, "%s: not under the directory it was listed "
                     "from (%s)", path, o->within);
    } else {
        const char *rel = path + wl;
        while (*rel == '/')
            rel++;
        int dfd = open(o->within, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
            return -fail(imp, WPACK_E_IO, "%s: cannot open its directory: %s", path,
                         strerror(errno));
        fd = wpk_open_input(dfd, rel, WPK_INPUT_NOFOLLOW, st, &code, msg, sizeof msg);
        close(dfd);
    }
    if (fd >= 0 && (code = wpk_refuse_output(imp->sink.w, fd, path, msg, sizeof msg))) {
        close(fd);
        return -fail(imp, code, "%s%s", msg, "");
    }
    if (fd < 0)
        return -fail(imp, code, "%s: %s", path, msg);
    return fd;
}

/* One .npy file as tensor name (before the prefix). Without a cast it
 * streams straight into the writer (npy_pack.c); a cast goes through the
 * sink, which rounds and keeps the statistics of the original values. */
static int import_npy(wpack_importer *imp, const char *path, const char *name,
                      const wpack_import_options *o)
{
    wpk_sink *s = &imp->sink;
    struct stat st;
    int fd = open_item(imp, path, o, &st);
    if (fd < 0)
        return -fd;
    if (o->cast) {
        int rc = npy_sink_pack_fd(s, name, fd);
        close(fd);
        return rc;
    }
    const char *prefix = s->o->prefix;
    size_t len = (prefix ? strlen(prefix) + 1 : 0) + strlen(name) + 1;
    char *full = malloc(len);
    if (!full) {
        close(fd);
        return fail(imp, WPACK_E_NOMEM, "%s: out of memory%s", path, "");
    }
    wpk_fmt(full, len, "%s%s%s", prefix ? prefix : "", prefix ? "." : "", name);
    int rc = npy_pack_fd(imp->w, full, path, fd, &st, o->progress, o->progress_user,
                         NPY_BUFFER_BYTES, imp->err, sizeof imp->err);
    close(fd);
    const char *prev = rc == WPACK_E_EXISTS ? wpk_sink_owner(s, full) : NULL;
    if (!rc)
        wpk_sink_claim(s, full);
    else if (prev)
        wpk_fmt(imp->err, sizeof imp->err, "%s: tensor '%s' is already taken by %s", path, full,
                prev);
    free(full);
    return rc;
}

/* One file (not a directory) of a known kind; name: a .npy's tensor name. */
static int import_one(wpack_importer *imp, const char *path, int kind, const char *name,
                      const wpack_import_options *o)
{
    wpk_import_opts io = sink_opts(o);
    const char *src = keep_path(imp, path);
    if (!src)
        return fail(imp, WPACK_E_NOMEM, "%s: out of memory%s", path, "");
    wpk_sink *s = &imp->sink;
    wpk_sink_input(s, src, &io);
    s->progress = o->progress;
    s->user = o->progress_user;
    s->warn = o->warn;
    s->warn_user = o->warn_user;
    int rc = kind == WPACK_INPUT_NPY ? import_npy(imp, src, name, o)
                                     : wpk_import_file(s, src, kind);
    s->o = NULL; /* io lives on this stack frame only */
    return rc;
}

typedef struct {
    wpack_importer *imp;
    const wpack_import_options *o;
} add_job;

static int import_item(void *user, const wpack_import_item *it)
{
    add_job *j = user;
    /* under a directory only .npy files are listed: anything else there now
     * was put in its place since (and would be opened by its path) */
    if (j->o->within && it->kind != WPACK_INPUT_NPY)
        return fail(j->imp, WPACK_E_FILE_TYPE, "%s: listed as a .npy file under %s, now "
                    "another kind of input (replaced since the listing?): refused", it->path,
                    j->o->within);
    return import_one(j->imp, it->path, it->kind, it->name, j->o);
}

/* stats_file and the name map: what comes after the input. */
static int after_input(wpack_importer *imp, const wpack_import_options *o)
{
    if (o->stats_file) {
        int rc = stats_load_file(imp->w, o->stats_file, imp->err, sizeof imp->err);
        if (rc)
            return rc;
    }
    for (size_t k = 0; k < o->name_map_count; k++) {
        int rc = wpack_writer_add_name(imp->w, o->name_map_other[k], o->name_map_entry[k]);
        if (rc) {
            const char *m = wpack_writer_errmsg(imp->w);
            wpk_fmt(imp->err, sizeof imp->err, "name map '%s' -> '%s': %s", o->name_map_other[k],
                    o->name_map_entry[k], m && *m ? m : wpack_error_name(rc));
            return rc;
        }
    }
    return WPACK_OK;
}

int wpack_import_add(wpack_importer *imp, const char *path, const wpack_import_options *opt)
{
    if (!imp)
        return WPACK_E_INVALID_ARGUMENT;
    wpack_import_options o;
    imp->err[0] = 0;
    int rc = options_take(opt, &o, imp->err, sizeof imp->err);
    struct stat st;
    if (!rc && path && !o.within && stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        o.within = path; /* its .npy files are opened under it, as listed */
    if (!rc && path) {
        /* A directory is walked while importing; a file is listed as one
         * item (its kind, and a .npy's tensor name). */
        add_job j = {imp, &o};
        rc = wpk_import_list(path, &o, import_item, &j, imp->err, sizeof imp->err);
    }
    if (!rc)
        rc = after_input(imp, &o);
    wpk_msg_escape(imp->err, sizeof imp->err); /* paths and names in it may hold anything */
    if (o.err && o.err_size) /* cut whole, not inside a character */
        wpack_text_escape(o.err, o.err_size, imp->err, rc ? strlen(imp->err) : 0);
    return rc;
}

int wpack_import_file(wpack_writer *w, const char *path, const wpack_import_options *opt)
{
    wpack_importer *imp;
    int rc = wpack_import_open(&imp, w);
    if (rc) {
        if (opt && opt->err && opt->err_size) {
            wpk_fmt(opt->err, opt->err_size, "%s: %s", path ? path : "import",
                    rc == WPACK_E_NOMEM ? "out of memory" : "no writer");
            wpk_msg_escape(opt->err, opt->err_size);
        }
        return rc;
    }
    rc = wpack_import_add(imp, path, opt);
    wpack_import_close(imp);
    return rc;
}

int wpack_import_list(const char *path, const wpack_import_options *opt, wpack_import_item_fn fn,
                      void *user)
{
    wpack_import_options o;
    char err[1024] = "";
    int rc = options_take(opt, &o, err, sizeof err);
    if (!rc && (!path || !fn)) {
        wpk_fmt(err, sizeof err, "wpack_import_list: %s is NULL", !path ? "path" : "fn");
        rc = WPACK_E_INVALID_ARGUMENT;
    }
    if (!rc)
        rc = wpk_import_list(path, &o, fn, user, err, sizeof err);
    if (o.err && o.err_size) /* escaped: paths and names in it may hold anything */
        wpack_text_escape(o.err, o.err_size, err, rc ? strlen(err) : 0);
    return rc;
}
