/*
 * writer_commit.c - the two-phase finish of a writer (wpack.h): prepare
 * (the archive complete and fsynced in its temporary file), then commit
 * (renamed into place) or abort. For callers that put several files in
 * place together and must not rename the archive before the others are
 * ready (resolver/externalize.c).
 */
#include <string.h>

#include "atomic_file.h"
#include "internal.h"
#include "writer.h"

int wpack_writer_prepare(wpack_writer *w)
{
    if (!w)
        return WPACK_E_INVALID_ARGUMENT;
    if (w->prepared)
        return wpk_wfail(w, WPACK_E_STATE, "%s: the archive is already prepared", w->path);
    int rc = wpk_writer_finish_file(w);
    if (rc)
        return rc;
    w->prepared = 1;
    /* every further change is refused; commit and abort check `prepared` */
    wpk_wbreak(w, WPACK_E_STATE, "%s: the archive is prepared: only commit or abort remain", w->path);
    return WPACK_OK;
}

const char *wpack_writer_prepared_path(const wpack_writer *w)
{
    return w && w->prepared ? w->out.tmp : NULL;
}

const char *wpack_writer_target_path(const wpack_writer *w)
{
    return w ? w->path : NULL;
}

int wpack_writer_commit(wpack_writer *w, char *errbuf, size_t errlen)
{
    if (!w)
        return WPACK_E_INVALID_ARGUMENT;
    if (!w->prepared)
        return wpack_writer_finish(w, errbuf, errlen);
    char err[sizeof w->errmsg];
    int rc = wpk_atomic_commit(&w->out, err, sizeof err);
    w->fd = -1;
    if (errbuf && errlen) /* the message names the path: escaped as every message */
        wpack_text_escape(errbuf, errlen, err, rc ? strlen(err) : 0);
    wpk_writer_free(w, rc != WPACK_OK);
    return rc;
}
