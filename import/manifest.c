/*
 * manifest.c - raw binary files described by a JSON manifest (schema in
 * import/README.md), parsed with jansson. Every entry is checked (dtype,
 * shape, a relative path with no '..', offset + size inside the file)
 * before the first tensor is written. The parse (manifest_parse_buffer,
 * manifest.h) opens no file; manifest_pack_file does.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bytes.h"
#include "import.h"
#include "internal.h"
#include "manifest.h"
#include "safetensors.h"

#define MF_PIECE (4u << 20)

static int mf_fail(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int mf_fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen)
        wpk_vfmt(err, errlen, fmt, ap);
    va_end(ap);
    return code;
}

static int dtype_named(const char *s)
{
    int d = wpack_dtype_from_name(s);
    if (d)
        return d;
    for (int k = 1; k <= WPACK_DTYPE_BOOL; k++) /* also "F32", "BF16" as safetensors says */
        if (st_dtype_name(k) && strcmp(st_dtype_name(k), s) == 0)
            return k;
    return 0;
}

static int safe_rel_path(const char *p)
{
    if (!*p || p[0] == '/' || strchr(p, '\\'))
        return 0;
    for (const char *c = p; *c; c++)
        if (c[0] == '.' && c[1] == '.' && (c == p || c[-1] == '/') && (c[2] == 0 || c[2] == '/'))
            return 0;
    return 1;
}

static int check_entry(size_t i, json_t *e, mf_tensor *t, char *err, size_t errlen)
{
    json_t *name = json_object_get(e, "name"), *dt = json_object_get(e, "dtype"),
           *shape = json_object_get(e, "shape"), *file = json_object_get(e, "file"),
           *off = json_object_get(e, "offset"), *end = json_object_get(e, "endian");
    if (!json_is_object(e) || !json_is_string(name) || !json_is_string(dt) ||
        !json_is_array(shape) || !json_is_string(file))
        return mf_fail(err, errlen, WPACK_E_INPUT,
                             "tensors[%zu]: needs string name, dtype, file and a shape array", i);
    t->name = json_string_value(name);
    t->file = json_string_value(file);
    if (!(t->dtype = dtype_named(json_string_value(dt))))
        return mf_fail(err, errlen, WPACK_E_UNSUPPORTED, "tensor '%s': unknown dtype '%.40s'", t->name,
                             json_string_value(dt));
    if (!safe_rel_path(t->file))
        return mf_fail(err, errlen, WPACK_E_INPUT,
                             "tensor '%s': file '%.200s' must be a relative path without '..'",
                             t->name, t->file);
    if (json_array_size(shape) > WPACK_MAX_RANK)
        return mf_fail(err, errlen, WPACK_E_RANK, "tensor '%s': rank above %d", t->name,
                             WPACK_MAX_RANK);
    t->rank = (unsigned)json_array_size(shape);
    uint64_t n = 1;
    for (unsigned k = 0; k < t->rank; k++) {
        json_t *d = json_array_get(shape, k);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return mf_fail(err, errlen, WPACK_E_INPUT, "tensor '%s': shape[%u] is not an int >= 0",
                                 t->name, k);
        t->dims[k] = (uint64_t)json_integer_value(d);
        if (!wpk_mul(n, t->dims[k], &n))
            return mf_fail(err, errlen, WPACK_E_OVERFLOW, "tensor '%s': element count overflows",
                                 t->name);
    }
    if (!wpk_mul(n, wpack_dtype_size(t->dtype), &t->nbytes))
        return mf_fail(err, errlen, WPACK_E_OVERFLOW, "tensor '%s': byte size overflows", t->name);
    t->offset = 0;
    if (off) {
        if (!json_is_integer(off) || json_integer_value(off) < 0)
            return mf_fail(err, errlen, WPACK_E_INPUT, "tensor '%s': offset is not an int >= 0",
                                 t->name);
        t->offset = (uint64_t)json_integer_value(off);
    }
    t->big = 0;
    if (end) {
        const char *v = json_is_string(end) ? json_string_value(end) : "";
        if (strcmp(v, "big") == 0)
            t->big = 1;
        else if (strcmp(v, "little") != 0)
            return mf_fail(err, errlen, WPACK_E_INPUT, "tensor '%s': endian must be little or big",
                                 t->name);
    }
    return WPACK_OK;
}

/* The data file of t, opened in the manifest's directory (dirfd) with the
 * input rules: no FIFO or device, and no symlink unless the options allow. */
static int open_data(wpk_sink *s, int dirfd, const char *dir, const mf_tensor *t, int *fd)
{
    char path[8192], label[8400];
    wpk_fmt(path, sizeof path, "%s/%s", dir, t->file);
    wpk_fmt(label, sizeof label, "tensor '%s': %s", t->name, path);
    unsigned flags = s->o && s->o->follow_links ? 0 : WPK_INPUT_NOFOLLOW;
    struct stat st;
    *fd = wpk_open_in(s, dirfd, t->file, flags, label, &st);
    if (*fd < 0)
        return -*fd;
    if (!wpk_in_bounds(t->offset, t->nbytes, (uint64_t)st.st_size)) {
        close(*fd);
        return wpk_sink_fail(s, WPACK_E_BOUNDS,
                             "tensor '%s': %llu bytes at offset %llu run past the end of %s "
                             "(%lld bytes)",
                             t->name, (unsigned long long)t->nbytes,
                             (unsigned long long)t->offset, path, (long long)st.st_size);
    }
    return WPACK_OK;
}

static int pack_one(wpk_sink *s, int dirfd, const char *dir, const mf_tensor *t, uint8_t *buf)
{
    int fd, rc = open_data(s, dirfd, dir, t, &fd);
    if (rc)
        return rc;
    size_t es = wpack_dtype_size(t->dtype);
    if ((rc = wpk_sink_begin(s, t->name, t->dtype, t->rank, t->dims)))
        goto out;
    for (uint64_t done = 0; done < t->nbytes;) {
        size_t k = t->nbytes - done < MF_PIECE ? (size_t)(t->nbytes - done) : MF_PIECE;
        /* k is whole elements: MF_PIECE and nbytes are multiples of es */
        if (wpk_pread_all(fd, buf, k, t->offset + done)) {
            rc = wpk_sink_fail(s, WPACK_E_IO, "tensor '%s': read failed (file shrank?)", t->name);
            goto out;
        }
        if (t->big && es > 1)
            for (size_t i = 0; i < k; i += es)
                for (size_t a = 0, z = es - 1; a < z; a++, z--) {
                    uint8_t x = buf[i + a];
                    buf[i + a] = buf[i + z];
                    buf[i + z] = x;
                }
        if ((rc = wpk_sink_write(s, buf, k)))
            goto out;
        wpk_sink_progress(s, k);
        done += k;
    }
    rc = wpk_sink_end(s);
out:
    close(fd);
    return rc;
}

/* Metadata value v of key as an mf_meta: strings, numbers and booleans. */
static int check_meta(const char *key, json_t *v, mf_meta *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    m->key = key;
    if (json_is_string(v)) {
        m->type = WPACK_META_STRING;
        m->str = json_string_value(v);
    } else if (json_is_integer(v)) {
        m->type = WPACK_META_I64;
        m->i64 = json_integer_value(v);
    } else if (json_is_real(v)) {
        m->type = WPACK_META_F64;
        m->f64 = json_real_value(v);
    } else if (json_is_boolean(v)) {
        m->type = WPACK_META_BOOL;
        m->boolean = json_is_true(v);
    } else {
        return mf_fail(err, errlen, WPACK_E_INPUT,
                       "metadata '%s': only strings, numbers and booleans are taken", key);
    }
    return WPACK_OK;
}

static int put_meta(wpk_sink *s, const mf_meta *m)
{
    switch (m->type) {
    case WPACK_META_STRING:
        return wpk_sink_meta_string(s, m->key, m->str);
    case WPACK_META_I64:
        return wpk_sink_meta_i64(s, m->key, m->i64);
    case WPACK_META_F64:
        return wpk_sink_meta_f64(s, m->key, m->f64);
    default:
        return wpk_sink_meta_bool(s, m->key, m->boolean);
    }
}

void manifest_free(mf_manifest *m)
{
    free(m->tensors);
    free(m->meta);
    json_decref(m->json_);
    memset(m, 0, sizeof *m);
}

/* The checks of both parse entries, on the loaded document (taken over). */
static int parse_root(json_t *root, mf_manifest *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    m->json_ = root;
    json_t *tensors = json_object_get(root, "tensors"), *meta = json_object_get(root, "metadata");
    int rc = WPACK_OK;
    if (!json_is_object(root) || !json_is_array(tensors) || (meta && !json_is_object(meta))) {
        rc = mf_fail(err, errlen, WPACK_E_INPUT,
                     "manifest: want {\"tensors\": [...], \"metadata\": {...}}");
        goto out;
    }
    size_t n = json_array_size(tensors), nm = meta ? json_object_size(meta) : 0;
    m->tensors = calloc(n ? n : 1, sizeof *m->tensors);
    m->meta = calloc(nm ? nm : 1, sizeof *m->meta);
    if (!m->tensors || !m->meta) {
        rc = mf_fail(err, errlen, WPACK_E_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++, m->ntensors++)
        if ((rc = check_entry(i, json_array_get(tensors, i), &m->tensors[i], err, errlen)))
            goto out;
    if (meta) {
        const char *k;
        json_t *v;
        json_object_foreach(meta, k, v) {
            if ((rc = check_meta(k, v, &m->meta[m->nmeta], err, errlen)))
                goto out;
            m->nmeta++;
        }
    }
out:
    if (rc)
        manifest_free(m);
    return rc;
}

int manifest_parse_buffer(const char *buf, size_t len, mf_manifest *m, char *err, size_t errlen)
{
    json_error_t je;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    memset(m, 0, sizeof *m);
    if (!root)
        return mf_fail(err, errlen, WPACK_E_INPUT, "manifest JSON: %s (line %d)", je.text, je.line);
    return parse_root(root, m, err, errlen);
}

int manifest_parse_file(const char *path, mf_manifest *m, char *err, size_t errlen)
{
    int code;
    json_t *root = wpk_json_load_input(path, "manifest", NULL, &code, err, errlen);
    memset(m, 0, sizeof *m);
    if (!root)
        return code;
    return parse_root(root, m, err, errlen);
}

/* The directory part of path ("." when none), malloc'ed. */
static char *dir_of(const char *path)
{
    char *dir = strdup(path);
    if (!dir)
        return NULL;
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        slash[1] = 0;
    else if (slash)
        *slash = 0;
    else
        strcpy(dir, ".");
    return dir;
}

static int by_cstr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

uint64_t manifest_input_bytes(const char *path, int follow)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return 0;
    uint64_t total = (uint64_t)st.st_size;
    char err[300];
    int code;
    json_t *root = wpk_json_load_input(path, "manifest", NULL, &code, err, sizeof err);
    char *dir = root ? dir_of(path) : NULL;
    int dirfd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    const char **files = NULL;
    size_t n = 0;
    mf_manifest m = {0};
    if (dirfd < 0) {
        /* no directory: the JSON's own size */
    } else if (json_is_object(root) && json_object_get(root, "weight_map") &&
               !json_object_get(root, "tensors")) {
        if (st_index_check(root, &files, &n, err, sizeof err) != WPACK_OK)
            n = 0;
    } else {
        int ok = parse_root(root, &m, err, sizeof err) == WPACK_OK;
        root = NULL; /* parse_root took it over (and freed it on failure) */
        files = ok ? malloc((m.ntensors ? m.ntensors : 1) * sizeof *files) : NULL;
        for (size_t i = 0; files && i < m.ntensors; i++)
            files[n++] = m.tensors[i].file;
        if (files) { /* each data file once */
            qsort(files, n, sizeof *files, by_cstr);
            size_t u = 0;
            for (size_t i = 0; i < n; i++)
                if (!u || strcmp(files[u - 1], files[i]) != 0)
                    files[u++] = files[i];
            n = u;
        }
    }
    for (size_t i = 0; i < n; i++)
        if (fstatat(dirfd, files[i], &st, follow ? 0 : AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISREG(st.st_mode))
            total += (uint64_t)st.st_size;
    free(files);
    manifest_free(&m);
    json_decref(root);
    if (dirfd >= 0)
        close(dirfd);
    free(dir);
    return total;
}

int manifest_pack_file(wpk_sink *s, const char *path)
{
    char err[900];
    int code;
    /* a safetensors index comes here too (its "weight_map" tells, once read) */
    size_t pl = strlen(path), il = strlen(".index.json");
    const char *what = pl >= il && strcmp(path + pl - il, ".index.json") == 0
                           ? "safetensors index" : "manifest";
    json_t *root = wpk_json_load_input(path, what, s->w, &code, err, sizeof err);
    if (!root) { /* the message starts "PATH: ", as the sink's own do: once is enough */
        int named = strncmp(err, path, pl) == 0 && err[pl] == ':' && err[pl + 1] == ' ';
        return wpk_sink_fail(s, code, "%s", named ? err + pl + 2 : err);
    }
    char *dir = dir_of(path);
    int dirfd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (dirfd < 0) {
        int rc = dir ? wpk_sink_fail(s, WPACK_E_IO, "cannot open the directory %s: %s", dir,
                                     strerror(errno))
                     : wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
        free(dir);
        json_decref(root);
        return rc;
    }
    int rc;
    /* A Hugging Face model.safetensors.index.json is JSON too: its shards. */
    if (json_is_object(root) && json_object_get(root, "weight_map") &&
        !json_object_get(root, "tensors")) {
        rc = st_index_pack(s, root, dirfd, dir);
        json_decref(root);
        goto out_dir;
    }
    mf_manifest m;
    if ((rc = parse_root(root, &m, err, sizeof err))) {
        rc = wpk_sink_fail(s, rc, "%s", err);
        goto out_dir;
    }
    uint8_t *buf = malloc(MF_PIECE);
    if (!buf) {
        rc = wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < m.ntensors; i++) {
        int fd;
        if ((rc = open_data(s, dirfd, dir, &m.tensors[i], &fd)))
            goto out;
        close(fd);
    }
    for (size_t i = 0; i < m.nmeta; i++)
        if ((rc = put_meta(s, &m.meta[i])))
            goto out;
    for (size_t i = 0; i < m.ntensors; i++)
        if ((rc = pack_one(s, dirfd, dir, &m.tensors[i], buf)))
            goto out;
out:
    free(buf);
    manifest_free(&m);
out_dir:
    close(dirfd);
    free(dir);
    return rc;
}
