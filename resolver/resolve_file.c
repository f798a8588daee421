/* resolve_file.c - wpack_resolve_file(): map the input, resolve into a
 * temporary file beside the output, rename on success. */
#include <stdlib.h>
#include <unistd.h>

#include "atomic_file.h"
#include "internal.h"
#include "resolve_int.h"
#include "same_files.h"

/* The output is none of the inputs: in_path, and the files of ar (the
 * archive and its shards, by the device and inode they were opened as). */
static int same_files(const wpack_archive *ar, const char *in_path, const char *out_path,
                      char *err, size_t errlen)
{
    uint32_t ns = wpack_shard_count(ar);
    wpk_file_ref *v = calloc((size_t)ns + 3, sizeof *v);
    if (!v) {
        wpk_fmt(err, errlen, "out of memory");
        return WPACK_E_NOMEM;
    }
    size_t n = 0;
    v[n++] = (wpk_file_ref){.path = out_path, .kind = WPK_FILE_OUT};
    v[n++] = (wpk_file_ref){.path = in_path, .kind = WPK_FILE_IN};
    for (uint32_t s = 0; s <= ns; s++) {
        const char *path, *shard_path;
        const wpack_archive *f = ar;
        uint64_t dev, ino;
        if (s < ns && wpack_shard_at(ar, s, &shard_path, &f) != WPACK_OK)
            continue;
        if (wpack_file_identity(f, &path, &dev, &ino) != WPACK_OK) /* a buffer or a source */
            continue;
        wpk_file_ref *r = &v[n++];
        *r = (wpk_file_ref){.path = path, .kind = WPK_FILE_IN, .known = 1, .exists = 1};
        r->st.st_dev = (dev_t)dev;
        r->st.st_ino = (ino_t)ino;
    }
    int rc = wpk_files_check(v, n, 0, NULL, err, errlen);
    free(v);
    return rc;
}

int wpack_resolve_file(const wpack_archive *ar, const char *in_path, const char *out_path,
                       const wpack_resolve_options *opt, wpack_resolve_result *res)
{
    wpack_resolve_options o;
    if (opt)
        o = *opt;
    else
        wpack_resolve_options_init(&o);
    if (!o.source_name)
        o.source_name = in_path;
    /* this function's own messages, with their code like the resolver's */
    wpk_diag d = {o.diag, o.diag_user, o.source_name ? o.source_name : "<input>", 0, 0, 0};
    char err[600];
    if (WPK_RESERVED_CHECK(&o, "wpack_resolve_options", "wpack_mlir.h", err, sizeof err)) {
        wpk_diag_emit(&d, WPACK_DIAG_ERROR, WPACK_E_INVALID_ARGUMENT, "%s", err);
        return WPACK_E_INVALID_ARGUMENT; /* before anything is opened */
    }
    if (!ar || !in_path || !out_path) {
        wpk_diag_emit(&d, WPACK_DIAG_ERROR, WPACK_E_INVALID_ARGUMENT, "wpack_resolve_file: bad arguments");
        return WPACK_E_INVALID_ARGUMENT;
    }
    int rc = same_files(ar, in_path, out_path, err, sizeof err);
    if (rc) {
        wpk_diag_emit(&d, WPACK_DIAG_ERROR, rc, "%s", err);
        return rc;
    }
    const char *buf;
    size_t len;
    int in_fd;
    rc = wpk_rsv_map_file(in_path, &buf, &len, &in_fd, err, sizeof err);
    if (rc) {
        wpk_diag_emit(&d, WPACK_DIAG_ERROR, rc, "%s", err);
        return rc;
    }
    wpk_atomic t;
    rc = wpk_atomic_open(&t, out_path, WPK_ATOMIC_FOLLOW_LINK | (o.no_sync ? WPK_ATOMIC_NO_SYNC : 0), err,
                         sizeof err);
    if (rc) {
        wpk_rsv_unmap_file(buf, len);
        if (in_fd >= 0)
            close(in_fd);
        wpk_diag_emit(&d, WPACK_DIAG_ERROR, rc, "%s", err);
        return rc;
    }
    wpk_fd_sink *sink = malloc(sizeof *sink);
    if (!sink) {
        wpk_atomic_abort(&t);
        wpk_rsv_unmap_file(buf, len);
        if (in_fd >= 0)
            close(in_fd);
        wpk_diag_emit(&d, WPACK_DIAG_ERROR, WPACK_E_NOMEM, "out of memory");
        return WPACK_E_NOMEM;
    }
    wpk_fd_sink_init(sink, t.fd, in_fd, out_path);
    rc = wpk_resolve_run(ar, buf, len, &o, wpk_fd_sink_write, wpk_fd_sink_copy,
                         wpk_fd_sink_describe, sink, res);
    if (!rc && wpk_fd_sink_flush(sink)) {
        rc = WPACK_E_IO;
        wpk_fd_sink_describe(sink, err, sizeof err);
        wpk_diag_emit(&d, WPACK_DIAG_ERROR, rc, "%s", err);
    }
    free(sink);
    if (!rc) {
        rc = wpk_atomic_commit(&t, err, sizeof err);
        if (rc)
            wpk_diag_emit(&d, WPACK_DIAG_ERROR, rc, "%s", err);
    } else {
        wpk_atomic_abort(&t);
    }
    wpk_rsv_unmap_file(buf, len);
    if (in_fd >= 0)
        close(in_fd);
    return rc;
}
