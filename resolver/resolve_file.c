/* resolve_file.c - wpack_resolve_file(): map the input, resolve into a
 * temporary file beside the output, rename on success. */
#include <stdlib.h>
#include <unistd.h>

#include "atomic_file.h"
#include "internal.h"
#include "resolve_int.h"

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
    char err[600];
    if (!ar || !in_path || !out_path) {
        if (o.diag)
            o.diag(o.diag_user, WPACK_DIAG_ERROR, "wpack_resolve_file: bad arguments");
        return WPACK_E_INVALID_ARGUMENT;
    }
    const char *buf;
    size_t len;
    int in_fd;
    int rc = wpk_rsv_map_file(in_path, &buf, &len, &in_fd, err, sizeof err);
    if (rc) {
        if (o.diag)
            o.diag(o.diag_user, WPACK_DIAG_ERROR, err);
        return rc;
    }
    wpk_atomic t;
    rc = wpk_atomic_open(&t, out_path, 0, err, sizeof err);
    if (rc) {
        wpk_rsv_unmap_file(buf, len);
        if (in_fd >= 0)
            close(in_fd);
        if (o.diag)
            o.diag(o.diag_user, WPACK_DIAG_ERROR, err);
        return rc;
    }
    wpk_fd_sink *sink = malloc(sizeof *sink);
    if (!sink) {
        wpk_atomic_abort(&t);
        wpk_rsv_unmap_file(buf, len);
        if (in_fd >= 0)
            close(in_fd);
        return WPACK_E_NOMEM;
    }
    sink->fd = t.fd;
    sink->in_fd = in_fd;
    sink->failed = 0;
    sink->used = 0;
    rc = wpk_resolve_run(ar, buf, len, &o, wpk_fd_sink_write, wpk_fd_sink_copy, sink, res);
    if (!rc && wpk_fd_sink_flush(sink)) {
        rc = WPACK_E_IO;
        wpk_fmt(err, sizeof err, "%s: writing failed", out_path);
        if (o.diag)
            o.diag(o.diag_user, WPACK_DIAG_ERROR, err);
    }
    free(sink);
    if (!rc) {
        rc = wpk_atomic_commit(&t, err, sizeof err);
        if (rc && o.diag)
            o.diag(o.diag_user, WPACK_DIAG_ERROR, err);
    } else {
        wpk_atomic_abort(&t);
    }
    wpk_rsv_unmap_file(buf, len);
    if (in_fd >= 0)
        close(in_fd);
    return rc;
}
