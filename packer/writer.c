/* writer.c - the writer's life cycle: options, open (the temporary file and
 * its reserved superblock), the checks every call shares (usable, names),
 * finish and abort. Tensors are in writer_tensor.c, metadata, name map and
 * stats in writer_meta.c, the output buffer in writer_buffer.c, the index in
 * writer_index.c. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "bytes.h"
#include "writer.h"
#include "writer_shards.h"

/* Set the code and message, unless the writer failed: the message then
 * says what broke it, and stays. */
static int set_error(wpack_writer *w, int code, const char *fmt, va_list ap)
{
    if (w->failed)
        return w->errcode ? w->errcode : WPACK_E_STATE;
    w->errcode = code;
    wpk_vfmt(w->errmsg, sizeof w->errmsg, fmt, ap);
    wpk_msg_escape(w->errmsg, sizeof w->errmsg); /* paths and names in it may hold anything */
    return code;
}

int wpk_wfail(wpack_writer *w, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    code = set_error(w, code, fmt, ap);
    va_end(ap);
    return code;
}

int wpk_wbreak(wpack_writer *w, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    code = set_error(w, code, fmt, ap);
    va_end(ap);
    w->failed = 1;
    return code;
}

void wpack_writer_options_init(wpack_writer_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->alignment = WPACK_DEFAULT_ALIGNMENT;
    opt->weight_stats = 1;
    opt->compress_chunk = 1u << 20;
    opt->compress_min = 64u << 10;
    opt->compress_min_saving = 5;
    opt->chunk_sums = WPACK_DEFAULT_CHUNK_SUMS;
}

int wpack_writer_errcode(const wpack_writer *w)
{
    return w ? w->errcode : WPACK_E_NOMEM;
}

const char *wpack_writer_errmsg(const wpack_writer *w)
{
    return w ? w->errmsg : "out of memory";
}

uint64_t wpack_writer_count(const wpack_writer *w)
{
    return wpk_entry_count(w);
}

/* ---- open ---- */

int wpack_writer_open(wpack_writer **out, const char *path, const wpack_writer_options *opt)
{
    return wpk_writer_open_flags(out, path, opt, 0);
}

static int open_writer(wpack_writer **out, const char *path, const wpack_writer_options *opt,
                       unsigned atomic_flags);

/* A writer whose open failed is failed: every call but abort returns the
 * open's error (it has no file, and maybe no buffers, to write to). */
int wpk_writer_open_flags(wpack_writer **out, const char *path, const wpack_writer_options *opt,
                          unsigned atomic_flags)
{
    int rc = open_writer(out, path, opt, atomic_flags);
    if (rc && *out)
        (*out)->failed = 1;
    return rc;
}

static int open_writer(wpack_writer **out, const char *path, const wpack_writer_options *opt,
                       unsigned atomic_flags)
{
    wpack_writer *w = calloc(1, sizeof *w);
    *out = w;
    if (!w)
        return WPACK_E_NOMEM;
    w->fd = -1;
    w->out.fd = -1;
    if (opt)
        w->opt = *opt;
    else
        wpack_writer_options_init(&w->opt);
    char why[300];
    if (WPK_RESERVED_CHECK(&w->opt, "wpack_writer_options", "wpack.h", why, sizeof why) ||
        (w->opt.executor && WPK_RESERVED_CHECK(w->opt.executor, "wpack_writer_options.executor",
                                               "wpack.h", why, sizeof why)))
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT, "%s", why);
    if (!w->opt.alignment)
        w->opt.alignment = WPACK_DEFAULT_ALIGNMENT;
    if (!wpk_is_pow2(w->opt.alignment) || w->opt.alignment < WPACK_MIN_ALIGNMENT ||
        w->opt.alignment > WPACK_MAX_ALIGNMENT)
        return wpk_wfail(w, WPACK_E_ALIGNMENT,
                         "alignment %u is not a power of two from 64 to 2097152", w->opt.alignment);
    if (!w->opt.compress_chunk)
        w->opt.compress_chunk = 1u << 20;
    if (w->opt.compress_level && (!wpk_is_pow2(w->opt.compress_chunk) ||
                                  w->opt.compress_chunk < (1u << WPK_CHUNK_LOG2_MIN)))
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT,
                         "compression chunk %u is not a power of two from 4 KiB to 64 MiB",
                         w->opt.compress_chunk);
    /* readers refuse bigger chunks (spec: Limits): never write one */
    if (w->opt.compress_level && w->opt.compress_chunk > (1u << WPK_CHUNK_LOG2_MAX))
        return wpk_wfail(w, WPACK_E_LIMIT, "compression chunk %u above the limit of %u bytes",
                         w->opt.compress_chunk, 1u << WPK_CHUNK_LOG2_MAX);
    if (w->opt.compress_level && (w->opt.compress_level < ZSTD_minCLevel() ||
                                  w->opt.compress_level > ZSTD_maxCLevel()))
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT, "zstd level %d outside %d..%d",
                         w->opt.compress_level, ZSTD_minCLevel(), ZSTD_maxCLevel());
    if (w->opt.compress_min_saving > 100)
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT, "minimum saving %u%% above 100%%",
                         w->opt.compress_min_saving);
    if (w->opt.histogram_bins > WPK_LIMIT_HIST_BINS)
        return wpk_wfail(w, WPACK_E_LIMIT, "%u histogram bins, limit %u", w->opt.histogram_bins,
                         WPK_LIMIT_HIST_BINS);
    int rc;
    if ((rc = wpk_sums_option(w)))
        return rc;
    if (w->opt.weight_stats)
        w->stats_isa = wpk_acc_isa(w->opt.portable_stats);
    if (!path)
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT, "wpack_writer_open: NULL path");
    size_t plen = strlen(path);
    w->path = malloc(plen + 1);
    w->obuf = malloc(WPK_WRITER_OBUF_SIZE);
    w->hasher = wpk_hasher_new();
    if (!w->path || !w->obuf || !w->hasher)
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    memcpy(w->path, path, plen + 1);
    if (w->opt.shard_size && (rc = wpk_shards_init(w)))
        return rc;
    char err[sizeof w->errmsg];
    if (w->opt.no_sync)
        atomic_flags |= WPK_ATOMIC_NO_SYNC;
    atomic_flags |= WPK_ATOMIC_FOLLOW_LINK; /* the caller named it: through a link, its target */
    if ((rc = wpk_atomic_open(&w->out, path, atomic_flags, err, sizeof err)))
        return wpk_wfail(w, rc, "%s", err);
    if (strcmp(w->out.path, path) != 0) { /* through a link: shards and the set replaced go there */
        char *real = strdup(w->out.path);
        if (!real)
            return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
        free(w->path);
        w->path = real;
    }
    w->fd = w->out.fd;
    if (!(w->shown = strdup(w->out.shown)))
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    if ((rc = wpk_refuse_shard_target(w)))
        return rc;
    /* The superblock is written last (finish); reserve its place and padding. */
    uint64_t data_offset;
    wpk_align_up(WPK_HEADER_SIZE, w->opt.alignment, &data_offset);
    return wpk_out_zeros(w, data_offset);
}

/* ---- strings ---- */

int wpk_name_ok(wpack_writer *w, const char *s, const char *what)
{
    if (!s)
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT, "%s: NULL name", what);
    size_t n = strlen(s);
    const char *why = wpk_name_problem((const uint8_t *)s, n);
    if (why) {
        char q[256];
        wpk_quote(q, sizeof q, s, n);
        return wpk_wfail(w, WPACK_E_NAME, "%s '%s': %s", what, q, why);
    }
    return WPACK_OK;
}

/* Intern a checked name/key into the pool. */
int wpk_pool_name(wpack_writer *w, const char *s, const char *what, wpk_str_ref *ref)
{
    int rc = wpk_name_ok(w, s, what);
    if (rc)
        return rc;
    size_t n = strlen(s);
    ref->off = w->strings.len;
    ref->len = (uint32_t)n;
    if (!wpk_buf_append(&w->strings, s, n + 1))
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    return WPACK_OK;
}

const uint8_t *wpk_entry_name_of(void *ctx, uint64_t i, uint64_t *len)
{
    wpack_writer *w = ctx;
    wpk_pending_entry *e = &wpk_entries(w)[i];
    *len = e->name.len;
    return (const uint8_t *)wpk_pool_str(w, e->name);
}

const uint8_t *wpk_meta_key_of(void *ctx, uint64_t i, uint64_t *len)
{
    wpack_writer *w = ctx;
    wpk_pending_meta *m = &((wpk_pending_meta *)(void *)w->meta.p)[i];
    *len = m->key.len;
    return (const uint8_t *)wpk_pool_str(w, m->key);
}

const uint8_t *wpk_map_name_of(void *ctx, uint64_t i, uint64_t *len)
{
    wpack_writer *w = ctx;
    wpk_pending_name *m = &((wpk_pending_name *)(void *)w->names.p)[i];
    *len = m->name.len;
    return (const uint8_t *)wpk_pool_str(w, m->name);
}

int wpk_writer_usable(wpack_writer *w)
{
    if (w->failed)
        return w->errcode ? w->errcode : WPACK_E_STATE;
    if (w->in_tensor)
        return wpk_wfail(w, WPACK_E_STATE, "a tensor is still being written");
    return WPACK_OK;
}

/* ---- finish / abort ---- */

static void free_writer(wpack_writer *w, int remove_shards)
{
    wpk_shards_free(w, remove_shards);
    wpack_paths_free(w->replaced, w->nreplaced);
    /* a committed or handed-over file has nothing left here; else the
     * shards placed and the old set's tied to the rename are settled (the
     * new ones removed, the old ones kept) before the temporary goes */
    wpk_atomic_abort(&w->out);
    wpk_buf_free(&w->strings);
    wpk_buf_free(&w->aux);
    wpk_buf_free(&w->entries);
    wpk_buf_free(&w->meta);
    wpk_buf_free(&w->names);
    wpk_buf_free(&w->stats);
    wpk_buf_free(&w->dtypes);
    wpk_buf_free(&w->cur_sums);
    wpk_hasher_free(w->chunk_hasher);
    free(w->replaces);
    wpk_nameset_free(&w->entry_set);
    wpk_nameset_free(&w->meta_set);
    wpk_nameset_free(&w->name_set);
    wpk_hasher_free(w->hasher);
    wpk_compress_free(w->zc);
    free(w->obuf);
    free(w->copy_buf);
    free(w->path);
    free(w->shown);
    free(w);
}

void wpack_writer_abort(wpack_writer *w)
{
    if (!w)
        return;
    free_writer(w, 1);
}

/* A failure while finishing is about the output as a whole (its metadata,
 * index, the set it replaces): the message names it, unless it does. */
static void name_output(wpack_writer *w)
{
    if (!w->shown)
        return;
    char shown[256], msg[sizeof w->errmsg]; /* the message is escaped: compare escaped */
    wpack_text_escape(shown, sizeof shown, w->shown, strlen(w->shown));
    if (strstr(w->errmsg, shown))
        return;
    wpk_fmt(msg, sizeof msg, "%s: %s", shown, w->errmsg);
    memcpy(w->errmsg, msg, sizeof msg);
}

static int finish_steps(wpack_writer *w);

/* Everything up to a durable, complete temporary file. */
static int finish_file(wpack_writer *w)
{
    int rc = finish_steps(w);
    if (rc)
        name_output(w);
    return rc;
}

static int finish_steps(wpack_writer *w)
{
    int rc = w->fd < 0 ? (w->errcode ? w->errcode : WPACK_E_STATE) : wpk_writer_usable(w);
    if (rc == WPACK_OK && !w->failed &&
        !wpk_nameset_find(&w->meta_set, wpk_meta_key_of, w, (const uint8_t *)"wpack.producer", 14,
                          &(uint64_t){0}))
        rc = wpack_writer_set_string(w, "wpack.producer", "wpack " WPACK_VERSION_STRING);
    if (rc == WPACK_OK && !w->failed)
        rc = wpk_module_names_finish(w);
    if (rc == WPACK_OK && w->shards)
        rc = wpk_shards_finish(w);
    /* A set at path (whatever this archive is): its shards are removed once
     * this archive has replaced its manifest, not before. */
    if (rc == WPACK_OK && !w->replaced &&
        (rc = wpack_replaced_shards(w->path, &w->replaced, &w->nreplaced)))
        wpk_wfail(w, rc, "%s: out of memory listing the set it replaces", w->path);
    if (rc == WPACK_OK) /* a write-protected shard is not removed with its set */
        rc = wpk_replaced_writable(w);
    if (rc == WPACK_OK)
        rc = wpk_write_index(w);
    char err[sizeof w->errmsg];
    if (rc == WPACK_OK && (rc = wpk_atomic_sync(&w->out, err, sizeof err)))
        wpk_wfail(w, rc, "%s", err);
    if (rc == WPACK_OK && w->shards) /* only now: a failure above leaves an old set whole */
        rc = wpk_shards_place(w);
    /* the set this archive replaces goes with its rename, not before */
    if (rc == WPACK_OK)
        rc = wpk_tie_replaced(w);
    return rc;
}

/* For writer_commit.c (the two-phase finish, wpack_writer_prepare/commit). */
int wpk_writer_finish_file(wpack_writer *w)
{
    return finish_file(w);
}

void wpk_writer_free(wpack_writer *w, int remove_shards)
{
    free_writer(w, remove_shards);
}

int wpack_writer_finish(wpack_writer *w, char *errbuf, size_t errlen)
{
    if (!w)
        return WPACK_E_INVALID_ARGUMENT;
    int rc = finish_file(w);
    char err[sizeof w->errmsg];
    if (rc == WPACK_OK && (rc = wpk_atomic_commit(&w->out, err, sizeof err)))
        wpk_wfail(w, rc, "%s", err);
    w->fd = -1;
    if (errbuf && errlen)
        wpack_text_escape(errbuf, errlen, w->errmsg, rc ? strlen(w->errmsg) : 0); /* cut whole */
    if (rc)
        wpack_writer_abort(w);
    else
        free_writer(w, 0);
    return rc;
}
