/* writer.c - streaming archive writer: temp file, tensors, metadata, finish. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zstd.h>

#include "bytes.h"
#include "writer.h"
#include "writer_shards.h"

/* The output buffer; fuzz builds lower it (fuzz/fuzz.mk FUZZ_LIMITS): under
 * ASan each 1 MiB allocation is a fresh mmap whose page faults dominated a
 * round-trip fuzz run, and a small buffer exercises the flush paths more. */
#ifndef WPK_WRITER_OBUF_SIZE
#define WPK_WRITER_OBUF_SIZE (1u << 20)
#endif
#define OBUF_SIZE WPK_WRITER_OBUF_SIZE

int wpk_wfail(wpack_writer *w, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    w->errcode = code;
    wpk_vfmt(w->errmsg, sizeof w->errmsg, fmt, ap);
    va_end(ap);
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

/* ---- output ---- */

static int write_all(wpack_writer *w, const void *p, size_t n)
{
    int err = wpk_write_all(w->fd, p, n);
    if (err) {
        w->failed = 1;
        return wpk_wfail(w, WPACK_E_IO, "%s: write failed: %s", w->tmp_path, strerror(err));
    }
    return WPACK_OK;
}

/* Start writeback of every 32 MiB written, so the final fsync has little
 * left to do and the disk works while we hash and compute stats. */
static void kick_writeback(wpack_writer *w, uint64_t written_to)
{
    if (written_to - w->kicked < (32u << 20))
        return;
    sync_file_range(w->fd, (off_t)w->kicked, (off_t)(written_to - w->kicked), SYNC_FILE_RANGE_WRITE);
    w->kicked = written_to;
}

int wpk_out_flush(wpack_writer *w)
{
    int rc = write_all(w, w->obuf, w->olen);
    w->olen = 0;
    if (rc == WPACK_OK)
        kick_writeback(w, w->pos);
    return rc;
}

int wpk_out(wpack_writer *w, const void *p, size_t n)
{
    if (w->failed)
        return w->errcode;
    /* Large pieces bypass the buffer: no extra copy for tensor data. */
    if (n >= OBUF_SIZE / 2) {
        int rc = wpk_out_flush(w);
        if (rc == WPACK_OK)
            rc = write_all(w, p, n);
        if (rc == WPACK_OK) {
            w->pos += n;
            kick_writeback(w, w->pos);
        }
        return rc;
    }
    if (n > OBUF_SIZE - w->olen) {
        int rc = wpk_out_flush(w);
        if (rc)
            return rc;
    }
    memcpy(w->obuf + w->olen, p, n);
    w->olen += n;
    w->pos += n;
    return WPACK_OK;
}

int wpk_out_zeros(wpack_writer *w, uint64_t n)
{
    static const uint8_t zeros[4096];
    while (n) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
        int rc = wpk_out(w, zeros, k);
        if (rc)
            return rc;
        n -= k;
    }
    return WPACK_OK;
}

/* ---- open ---- */

int wpack_writer_open(wpack_writer **out, const char *path, const wpack_writer_options *opt)
{
    return wpk_writer_open_flags(out, path, opt, 0);
}

int wpk_writer_open_flags(wpack_writer **out, const char *path, const wpack_writer_options *opt,
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
    size_t plen = strlen(path);
    w->path = malloc(plen + 1);
    w->obuf = malloc(OBUF_SIZE);
    w->hasher = wpk_hasher_new();
    if (!w->path || !w->obuf || !w->hasher)
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    memcpy(w->path, path, plen + 1);
    int rc;
    if (w->opt.shard_size && (rc = wpk_shards_init(w)))
        return rc;
    char err[sizeof w->errmsg];
    if ((rc = wpk_atomic_open(&w->out, path, atomic_flags, err, sizeof err)))
        return wpk_wfail(w, rc, "%s", err);
    w->fd = w->out.fd;
    w->tmp_path = w->out.tmp;
    /* The superblock is written last (finish); reserve its place and padding. */
    uint64_t data_offset;
    wpk_align_up(WPK_HEADER_SIZE, w->opt.alignment, &data_offset);
    return wpk_out_zeros(w, data_offset);
}

/* ---- strings ---- */

/* Intern a checked name/key into the pool. */
static int pool_name(wpack_writer *w, const char *s, const char *what, wpk_str_ref *ref)
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
    ref->off = w->strings.len;
    ref->len = (uint32_t)n;
    if (!wpk_buf_append(&w->strings, s, n + 1))
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    return WPACK_OK;
}

static const uint8_t *entry_name_of(void *ctx, uint64_t i, uint64_t *len)
{
    wpack_writer *w = ctx;
    wpk_pending_entry *e = &wpk_entries(w)[i];
    *len = e->name.len;
    return (const uint8_t *)wpk_pool_str(w, e->name);
}

static const uint8_t *meta_key_of(void *ctx, uint64_t i, uint64_t *len)
{
    wpack_writer *w = ctx;
    wpk_pending_meta *m = &((wpk_pending_meta *)(void *)w->meta.p)[i];
    *len = m->key.len;
    return (const uint8_t *)wpk_pool_str(w, m->key);
}

static const uint8_t *map_name_of(void *ctx, uint64_t i, uint64_t *len)
{
    wpack_writer *w = ctx;
    wpk_pending_name *m = &((wpk_pending_name *)(void *)w->names.p)[i];
    *len = m->name.len;
    return (const uint8_t *)wpk_pool_str(w, m->name);
}

static int usable(wpack_writer *w)
{
    if (w->failed)
        return w->errcode ? w->errcode : WPACK_E_STATE;
    if (w->in_tensor)
        return wpk_wfail(w, WPACK_E_STATE, "a tensor is still being written");
    return WPACK_OK;
}

/* ---- tensors ---- */

int wpk_writer_room(wpack_writer *w, const char *what, uint64_t nbytes)
{
    uint64_t cap = w->opt.max_data_bytes;
    if (!cap || (w->data_bytes <= cap && nbytes <= cap - w->data_bytes))
        return WPACK_OK;
    return wpk_wfail(w, WPACK_E_TOO_LARGE,
                     "%s: %llu bytes would bring the tensor data past the output cap of %llu "
                     "bytes (%llu already written)",
                     what, (unsigned long long)nbytes, (unsigned long long)cap,
                     (unsigned long long)w->data_bytes);
}

static int tensor_size(wpack_writer *w, const char *name, int dtype, unsigned rank,
                       const uint64_t *dims, uint64_t *nbytes)
{
    if (rank > WPACK_MAX_RANK)
        return wpk_wfail(w, WPACK_E_RANK, "tensor '%s': rank %u above the limit of 8", name, rank);
    uint64_t unit = wpack_dtype_size(dtype), block = 1;
    if (dtype >= WPACK_DTYPE_BLOCK_BASE) {
        uint64_t k = (uint64_t)(dtype - WPACK_DTYPE_BLOCK_BASE);
        if (k < w->dtypes.len / sizeof(wpk_pending_dtype)) {
            wpk_pending_dtype *d = &((wpk_pending_dtype *)(void *)w->dtypes.p)[k];
            unit = d->block_bytes;
            block = d->block_elems;
        }
    }
    if (!unit || dtype > 255)
        return wpk_wfail(w, WPACK_E_DTYPE, "tensor '%s': unknown dtype %d", name, dtype);
    uint64_t n = 1;
    for (unsigned d = 0; d < rank; d++)
        if (!wpk_mul(n, dims[d], &n))
            return wpk_wfail(w, WPACK_E_OVERFLOW, "tensor '%s': element count overflows", name);
    if (block > 1) {
        if (!rank || dims[rank - 1] % block)
            return wpk_wfail(w, WPACK_E_SHAPE,
                             "tensor '%s': last dim is not a multiple of the block", name);
        n /= block;
    }
    if (!wpk_mul(n, unit, nbytes))
        return wpk_wfail(w, WPACK_E_OVERFLOW, "tensor '%s': byte size overflows", name);
    return WPACK_OK;
}

/* Append an entry record with a checked, unique name. */
static int new_entry(wpack_writer *w, const char *name, int kind, int dtype, unsigned rank,
                     const uint64_t *dims, wpk_pending_entry **out)
{
    int rc = usable(w);
    if (rc)
        return rc;
    if (wpk_entry_count(w) >= WPK_LIMIT_ENTRIES)
        return wpk_wfail(w, WPACK_E_LIMIT, "more than %llu entries",
                         (unsigned long long)WPK_LIMIT_ENTRIES);
    wpk_pending_entry e;
    memset(&e, 0, sizeof e);
    if ((rc = pool_name(w, name, "tensor", &e.name)))
        return rc;
    uint64_t item;
    if (wpk_nameset_find(&w->entry_set, entry_name_of, w, (const uint8_t *)name, e.name.len, &item)) {
        w->strings.len = e.name.off;
        return wpk_wfail(w, WPACK_E_EXISTS, "tensor '%s' added twice", name);
    }
    if (wpk_nameset_find(&w->name_set, map_name_of, w, (const uint8_t *)name, e.name.len, &item)) {
        w->strings.len = e.name.off;
        return wpk_wfail(w, WPACK_E_EXISTS, "tensor '%s' is already a name-map name", name);
    }
    e.kind = (uint8_t)kind;
    e.dtype = (uint8_t)dtype;
    e.rank = (uint8_t)rank;
    if (rank && dims)
        memcpy(e.dims, dims, rank * sizeof *dims);
    uint64_t idx = wpk_entry_count(w);
    if (!wpk_buf_append(&w->entries, &e, sizeof e) ||
        !wpk_nameset_insert(&w->entry_set, entry_name_of, w, (const uint8_t *)name, e.name.len, idx))
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    *out = &wpk_entries(w)[idx];
    return WPACK_OK;
}

int wpack_writer_begin_tensor(wpack_writer *w, const char *name, int dtype, unsigned rank,
                              const uint64_t *dims)
{
    uint64_t nbytes = 0;
    int rc = usable(w);
    if (rc)
        return rc;
    if (!name)
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT, "tensor: NULL name");
    if ((rc = tensor_size(w, name, dtype, rank, dims, &nbytes)))
        return rc;
    char what[520]; /* the message holds 600 bytes: a long name is cut */
    wpk_fmt(what, sizeof what, "tensor '%.500s'", name);
    if ((rc = wpk_writer_room(w, what, nbytes)))
        return rc;
    if (w->shards) {
        wpk_pending_entry *x;
        if ((rc = new_entry(w, name, WPACK_KIND_EXTERNAL, dtype, rank, dims, &x)))
            return rc;
        if ((rc = wpk_shards_begin(w, name, dtype, rank, dims, nbytes)))
            return rc;
        w->in_tensor = 1;
        w->cur_written = 0;
        w->data_bytes += nbytes;
        return WPACK_OK;
    }
    /* Align first so that a failure below leaves no half-made entry. */
    uint64_t at;
    if (!wpk_align_up(w->pos, w->opt.alignment, &at))
        return wpk_wfail(w, WPACK_E_OVERFLOW, "archive offset overflows");
    wpk_pending_entry *e;
    if ((rc = new_entry(w, name, WPACK_KIND_DATA, dtype, rank, dims, &e)))
        return rc;
    if ((rc = wpk_out_zeros(w, at - w->pos)))
        return rc;
    e->offset = at;
    e->stored = nbytes;
    e->nbytes = nbytes;
    e->has_acc = w->opt.weight_stats && wpack_dtype_is_float(dtype);
    wpk_acc_init(&e->acc);
    w->data_bytes += nbytes;
    w->in_tensor = 1;
    w->cur_expected = nbytes;
    w->cur_written = 0;
    w->carry_len = 0;
    wpk_hasher_reset(w->hasher);
    if ((rc = wpk_compress_begin(w, e))) {
        w->failed = 1;
        return rc;
    }
    return WPACK_OK;
}

/* Feed whole elements to the stats, keeping a split element in carry. */
static void feed_stats(wpack_writer *w, wpk_pending_entry *e, const uint8_t *p, size_t n)
{
    size_t size = wpack_dtype_size(e->dtype);
    if (w->carry_len) {
        size_t take = size - w->carry_len < n ? size - w->carry_len : n;
        memcpy(w->carry + w->carry_len, p, take);
        w->carry_len += take;
        p += take;
        n -= take;
        if (w->carry_len < size)
            return;
        wpk_acc_feed(&e->acc, e->dtype, w->carry, 1);
        w->carry_len = 0;
    }
    size_t whole = n / size;
    wpk_acc_feed(&e->acc, e->dtype, p, whole);
    w->carry_len = n - whole * size;
    memcpy(w->carry, p + whole * size, w->carry_len);
}

/* data is the tensor's bytes from byte `at` on (for the message). */
static int check_bools(wpack_writer *w, const char *name, const void *data, size_t n, uint64_t at)
{
    size_t bad = wpk_first_bad_bool(data, n);
    if (bad == n)
        return WPACK_OK;
    return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT,
                     "tensor '%s': bool byte %llu of the tensor is %u; bools are 0 or 1", name,
                     (unsigned long long)(at + bad), ((const uint8_t *)data)[bad]);
}

/* nbytes (> 0) of tensor e, whose arguments and bool values are checked. */
static int put_bytes(wpack_writer *w, wpk_pending_entry *e, const void *data, size_t nbytes)
{
    if (w->shards) { /* the shard's writer checks the size; count for check_bools */
        int rc = wpk_shards_write(w, data, nbytes);
        if (rc == WPACK_OK)
            w->cur_written += nbytes;
        return rc;
    }
    if (nbytes > w->cur_expected - w->cur_written)
        return wpk_wfail(w, WPACK_E_SIZE, "tensor '%s': %llu bytes written, its shape holds %llu",
                         wpk_pool_str(w, e->name),
                         (unsigned long long)(w->cur_written + nbytes),
                         (unsigned long long)w->cur_expected);
    wpk_hasher_update(w->hasher, data, nbytes);
    if (e->has_acc)
        feed_stats(w, e, data, nbytes);
    w->cur_written += nbytes;
    if (wpk_compress_active(w))
        return wpk_compress_write(w, data, nbytes);
    return wpk_out(w, data, nbytes);
}

int wpack_writer_write(wpack_writer *w, const void *data, size_t nbytes)
{
    if (w->failed)
        return w->errcode;
    if (!nbytes)
        return w->in_tensor ? WPACK_OK : wpk_wfail(w, WPACK_E_STATE, "write outside a tensor");
    if (!data)
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT, "write of %zu bytes from NULL", nbytes);
    if (!w->in_tensor)
        return wpk_wfail(w, WPACK_E_STATE, "write outside a tensor");
    /* the tensor being written is the last entry, in a sharded set too;
     * a refused write changes nothing */
    wpk_pending_entry *e = &wpk_entries(w)[wpk_entry_count(w) - 1];
    int rc;
    if (e->dtype == WPACK_DTYPE_BOOL &&
        (rc = check_bools(w, wpk_pool_str(w, e->name), data, nbytes, w->cur_written)))
        return rc;
    return put_bytes(w, e, data, nbytes);
}

int wpack_writer_write_zeros(wpack_writer *w, uint64_t nbytes)
{
    static const uint8_t zeros[1 << 16];
    if (w->failed)
        return w->errcode;
    if (!w->in_tensor)
        return wpk_wfail(w, WPACK_E_STATE, "write outside a tensor");
    if (w->shards) {
        int rc = wpk_shards_write_zeros(w, nbytes);
        if (rc == WPACK_OK)
            w->cur_written += nbytes;
        return rc;
    }
    wpk_pending_entry *e = &wpk_entries(w)[wpk_entry_count(w) - 1];
    if (nbytes > w->cur_expected - w->cur_written)
        return wpk_wfail(w, WPACK_E_SIZE, "tensor '%s': %llu bytes written, its shape holds %llu",
                         wpk_pool_str(w, e->name),
                         (unsigned long long)(w->cur_written + nbytes),
                         (unsigned long long)w->cur_expected);
    if (e->has_acc || wpk_compress_active(w)) {
        /* stats and the compressor must see every byte */
        for (uint64_t left = nbytes; left;) {
            size_t k = left < sizeof zeros ? (size_t)left : sizeof zeros;
            int rc = put_bytes(w, e, zeros, k); /* zeros: nothing to check */
            if (rc)
                return rc;
            left -= k;
        }
        return WPACK_OK;
    }
    for (uint64_t left = nbytes; left;) {
        size_t k = left < sizeof zeros ? (size_t)left : sizeof zeros;
        wpk_hasher_update(w->hasher, zeros, k);
        left -= k;
    }
    /* Skip over the zeros: the file gets a hole, read back as zeros. */
    int rc = wpk_out_flush(w);
    if (rc)
        return rc;
    if (lseek(w->fd, (off_t)nbytes, SEEK_CUR) < 0) {
        w->failed = 1;
        return wpk_wfail(w, WPACK_E_IO, "%s: seek failed: %s", w->tmp_path, strerror(errno));
    }
    w->pos += nbytes;
    w->cur_written += nbytes;
    return WPACK_OK;
}

int wpack_writer_end_tensor(wpack_writer *w)
{
    if (w->failed)
        return w->errcode;
    if (!w->in_tensor)
        return wpk_wfail(w, WPACK_E_STATE, "end_tensor outside a tensor");
    wpk_pending_entry *e = &wpk_entries(w)[wpk_entry_count(w) - 1];
    if (w->shards) {
        w->in_tensor = 0;
        return wpk_shards_end(w, e);
    }
    if (w->cur_written != w->cur_expected) {
        w->failed = 1; /* the file now holds a short extent: the archive cannot be finished */
        return wpk_wfail(w, WPACK_E_SIZE, "tensor '%s': %llu bytes written, its shape needs %llu",
                         wpk_pool_str(w, e->name), (unsigned long long)w->cur_written,
                         (unsigned long long)w->cur_expected);
    }
    e->checksum = wpk_hasher_digest(w->hasher);
    w->in_tensor = 0;
    if (wpk_compress_active(w))
        return wpk_compress_end(w, e, e->checksum);
    return WPACK_OK;
}

int wpack_writer_add_tensor(wpack_writer *w, const char *name, int dtype, unsigned rank,
                            const uint64_t *dims, const void *data, uint64_t nbytes)
{
    uint64_t want = 0;
    int rc = usable(w);
    if (rc)
        return rc;
    if (!name)
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT, "tensor: NULL name");
    if ((rc = tensor_size(w, name, dtype, rank, dims, &want)))
        return rc;
    if (nbytes != want)
        return wpk_wfail(w, WPACK_E_SIZE, "tensor '%s': %llu bytes given, shape and dtype need %llu",
                         name, (unsigned long long)nbytes, (unsigned long long)want);
    if (nbytes > SIZE_MAX)
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT, "tensor '%s': too large", name);
    if (nbytes && !data)
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT, "tensor '%s': NULL data", name);
    /* before begin: a refused tensor leaves no half-made entry */
    if (dtype == WPACK_DTYPE_BOOL && (rc = check_bools(w, name, data, (size_t)nbytes, 0)))
        return rc;
    if ((rc = wpack_writer_begin_tensor(w, name, dtype, rank, dims)))
        return rc;
    /* bools were checked above: the bytes go in without a second scan */
    if (nbytes && (rc = put_bytes(w, &wpk_entries(w)[wpk_entry_count(w) - 1], data, (size_t)nbytes)))
        return rc;
    return wpack_writer_end_tensor(w);
}

int wpack_writer_add_splat(wpack_writer *w, const char *name, int dtype, unsigned rank,
                           const uint64_t *dims, const void *fill, size_t fill_size)
{
    uint64_t nbytes = 0;
    int rc = usable(w);
    if (rc)
        return rc;
    if (!name || !fill)
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT, "splat: NULL name or fill");
    if ((rc = tensor_size(w, name, dtype, rank, dims, &nbytes)))
        return rc;
    uint64_t unit = wpack_dtype_size(dtype);
    if (dtype >= WPACK_DTYPE_BLOCK_BASE)
        unit = ((wpk_pending_dtype *)(void *)w->dtypes.p)[dtype - WPACK_DTYPE_BLOCK_BASE].block_bytes;
    if (fill_size != unit)
        return wpk_wfail(w, WPACK_E_SIZE, "splat '%s': fill is %zu bytes, dtype needs %llu", name,
                         fill_size, (unsigned long long)unit);
    if (dtype == WPACK_DTYPE_BOOL && *(const uint8_t *)fill > 1)
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT, "splat '%s': bool fill is %u; bools are 0 or 1",
                         name, *(const uint8_t *)fill);
    uint64_t aux_off = w->aux.len;
    if (!wpk_buf_append(&w->aux, fill, fill_size))
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    wpk_pending_entry *e;
    if ((rc = new_entry(w, name, WPACK_KIND_SPLAT, dtype, rank, dims, &e))) {
        w->aux.len = aux_off;
        return rc;
    }
    e->aux_off = aux_off;
    e->aux_len = fill_size;
    e->checksum = wpk_xxh3(fill, fill_size);
    return WPACK_OK;
}

int wpack_writer_add_alias(wpack_writer *w, const char *name, const char *target)
{
    int rc = usable(w);
    if (rc)
        return rc;
    wpk_str_ref t;
    if ((rc = pool_name(w, target, "alias target", &t)))
        return rc;
    wpk_pending_entry *e;
    if ((rc = new_entry(w, name, WPACK_KIND_ALIAS, 0, 0, NULL, &e)))
        return rc;
    e->target = t; /* resolved at finish: the target may come later */
    return WPACK_OK;
}

int wpack_writer_add_external(wpack_writer *w, const char *name, uint32_t shard,
                              const wpack_tensor *t)
{
    int rc = usable(w);
    if (rc)
        return rc;
    if (w->shards)
        return wpk_wfail(w, WPACK_E_STATE, "external '%s': this writer makes its own shards",
                         name ? name : "");
    if (!t || t->kind != WPACK_KIND_DATA || t->codec != WPACK_CODEC_NONE || shard >= WPK_MAX_SHARDS)
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT,
                         "external '%s': needs an uncompressed data entry and a shard number below %u",
                         name ? name : "", WPK_MAX_SHARDS);
    uint64_t nbytes;
    if ((rc = tensor_size(w, name ? name : "", t->dtype, t->rank, t->dims, &nbytes)))
        return rc;
    if (nbytes != t->stored_length)
        return wpk_wfail(w, WPACK_E_SIZE, "external '%s': stored length disagrees with the shape", name);
    wpk_pending_entry *e;
    if ((rc = new_entry(w, name, WPACK_KIND_EXTERNAL, t->dtype, t->rank, t->dims, &e)))
        return rc;
    e->offset = t->offset;
    e->stored = e->nbytes = t->stored_length;
    e->checksum = t->checksum;
    e->shard = shard;
    return WPACK_OK;
}

int wpack_writer_set_shards(wpack_writer *w, uint32_t n, const char *const *names,
                            const uint64_t *lengths, const uint64_t *index_checksums)
{
    if (!n || n > WPK_MAX_SHARDS || !names || !lengths || !index_checksums)
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT, "shard list: 1 to %u shards", WPK_MAX_SHARDS);
    int64_t *v = malloc(2 * (size_t)n * sizeof *v);
    if (!v)
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    for (uint32_t k = 0; k < n; k++) {
        v[k] = (int64_t)lengths[k];
        v[n + k] = (int64_t)index_checksums[k];
    }
    int rc = wpack_writer_set_array(w, "wpack.shards", WPACK_META_STRING, n, names);
    if (rc == WPACK_OK)
        rc = wpack_writer_set_array(w, "wpack.shard_lengths", WPACK_META_I64, n, v);
    if (rc == WPACK_OK)
        rc = wpack_writer_set_array(w, "wpack.shard_index_xxh3", WPACK_META_I64, n, v + n);
    free(v);
    return rc;
}

int wpack_writer_add_block_dtype(wpack_writer *w, const char *name, uint32_t block_elems,
                                 uint32_t block_bytes, const void *params, size_t params_len,
                                 int *code)
{
    int rc = usable(w);
    if (rc)
        return rc;
    uint64_t n = w->dtypes.len / sizeof(wpk_pending_dtype);
    if (n >= WPK_MAX_BLOCK_DTYPES)
        return wpk_wfail(w, WPACK_E_LIMIT, "more than 128 block dtypes");
    if (!block_elems || !block_bytes)
        return wpk_wfail(w, WPACK_E_DTYPE, "block dtype: zero block size");
    wpk_pending_dtype d;
    memset(&d, 0, sizeof d);
    if ((rc = pool_name(w, name, "block dtype", &d.name)))
        return rc;
    d.block_elems = block_elems;
    d.block_bytes = block_bytes;
    d.params_off = w->aux.len;
    d.params_len = params_len;
    if ((params_len && !wpk_buf_append(&w->aux, params, params_len)) ||
        !wpk_buf_append(&w->dtypes, &d, sizeof d))
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    if (w->shards && (rc = wpk_shards_add_block_dtype(w, name, block_elems, block_bytes, params,
                                                      params_len)))
        return rc;
    *code = WPACK_DTYPE_BLOCK_BASE + (int)n;
    return WPACK_OK;
}

/* ---- metadata ---- */

static int add_meta(wpack_writer *w, const char *key, int type, int elem, uint64_t value,
                    uint64_t count)
{
    int rc = usable(w);
    if (rc)
        return rc;
    if (w->meta.len / sizeof(wpk_pending_meta) >= WPK_LIMIT_META)
        return wpk_wfail(w, WPACK_E_LIMIT, "more than %llu metadata keys",
                         (unsigned long long)WPK_LIMIT_META);
    wpk_pending_meta m;
    memset(&m, 0, sizeof m);
    if ((rc = pool_name(w, key, "metadata key", &m.key)))
        return rc;
    uint64_t item;
    if (wpk_nameset_find(&w->meta_set, meta_key_of, w, (const uint8_t *)key, m.key.len, &item))
        return wpk_wfail(w, WPACK_E_EXISTS, "metadata key '%s' set twice", key);
    m.type = (uint8_t)type;
    m.elem = (uint8_t)elem;
    m.value = value;
    m.count = count;
    uint64_t idx = w->meta.len / sizeof m;
    if (!wpk_buf_append(&w->meta, &m, sizeof m) ||
        !wpk_nameset_insert(&w->meta_set, meta_key_of, w, (const uint8_t *)key, m.key.len, idx))
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    return WPACK_OK;
}

/* A metadata string value: valid UTF-8 without NUL, pooled. */
static int pool_value(wpack_writer *w, const char *key, const char *s, wpk_str_ref *ref)
{
    if (!s)
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT, "metadata '%s': NULL string", key ? key : "");
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        uint8_t c = (uint8_t)s[i];
        size_t k = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
        if (k > 1 && (n - i < k || wpk_name_problem((const uint8_t *)s + i, k)))
            return wpk_wfail(w, WPACK_E_METADATA, "metadata '%s': value is not valid UTF-8",
                             key ? key : "");
        i += k;
    }
    ref->off = w->strings.len;
    ref->len = (uint32_t)n;
    if (!wpk_buf_append(&w->strings, s, n + 1))
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    return WPACK_OK;
}

int wpack_writer_set_string(wpack_writer *w, const char *key, const char *value)
{
    wpk_str_ref v;
    size_t mark = w->strings.len;
    int rc = pool_value(w, key, value, &v);
    if (rc == WPACK_OK && (rc = add_meta(w, key, WPACK_META_STRING, 0, v.off, v.len)))
        w->strings.len = mark;
    return rc;
}

int wpack_writer_set_i64(wpack_writer *w, const char *key, int64_t value)
{
    return add_meta(w, key, WPACK_META_I64, 0, (uint64_t)value, 0);
}

int wpack_writer_set_f64(wpack_writer *w, const char *key, double value)
{
    uint64_t u;
    memcpy(&u, &value, sizeof u);
    return add_meta(w, key, WPACK_META_F64, 0, u, 0);
}

int wpack_writer_set_bool(wpack_writer *w, const char *key, int value)
{
    return add_meta(w, key, WPACK_META_BOOL, 0, value ? 1 : 0, 0);
}

int wpack_writer_set_bytes(wpack_writer *w, const char *key, const void *value, size_t len)
{
    uint64_t off = w->aux.len;
    if (len && !wpk_buf_append(&w->aux, value, len))
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    return add_meta(w, key, WPACK_META_BYTES, 0, off, len);
}

int wpack_writer_set_array(wpack_writer *w, const char *key, int elem_type, uint64_t count,
                           const void *values)
{
    if (count > WPK_LIMIT_ARRAY || (count && !values))
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT, "metadata '%s': bad array", key ? key : "");
    if (elem_type < WPACK_META_STRING || elem_type > WPACK_META_BYTES)
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT, "metadata '%s': element type %d not settable",
                         key ? key : "", elem_type);
    uint64_t off = w->aux.len;
    int rc = WPACK_OK;
    for (uint64_t j = 0; j < count && rc == WPACK_OK; j++) {
        uint8_t rec[16];
        size_t n = 8;
        switch (elem_type) {
        case WPACK_META_I64:
            wpk_st64(rec, (uint64_t)((const int64_t *)values)[j]);
            break;
        case WPACK_META_F64:
            wpk_stf64(rec, ((const double *)values)[j]);
            break;
        case WPACK_META_BOOL:
            rec[0] = ((const int *)values)[j] ? 1 : 0;
            n = 1;
            break;
        case WPACK_META_STRING: {
            wpk_str_ref v;
            if ((rc = pool_value(w, key, ((const char *const *)values)[j], &v)))
                break;
            wpk_st64(rec, v.off);
            wpk_st64(rec + 8, v.len);
            n = 16;
            break;
        }
        case WPACK_META_BYTES: {
            const wpack_bytes *b = &((const wpack_bytes *)values)[j];
            /* The bytes go to aux after the pair table: append them to a side buffer first. */
            wpk_st64(rec, 0);
            wpk_st64(rec + 8, b->len);
            n = 16;
            break;
        }
        default:
            rc = wpk_wfail(w, WPACK_E_INVALID_ARGUMENT, "metadata '%s': element type %d not settable",
                           key ? key : "", elem_type);
        }
        if (rc == WPACK_OK && !wpk_buf_append(&w->aux, rec, n))
            rc = wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    }
    /* Bytes elements: their data follows the pair table; patch the offsets. */
    for (uint64_t j = 0; j < count && rc == WPACK_OK && elem_type == WPACK_META_BYTES; j++) {
        const wpack_bytes *b = &((const wpack_bytes *)values)[j];
        uint64_t at = w->aux.len;
        if (b->len && (!b->data || !wpk_buf_append(&w->aux, b->data, b->len)))
            rc = wpk_wfail(w, b->data ? WPACK_E_NOMEM : WPACK_E_INVALID_ARGUMENT,
                           "metadata '%s': bytes element %llu", key ? key : "", (unsigned long long)j);
        else
            wpk_st64(w->aux.p + off + 16 * j, at);
    }
    if (rc == WPACK_OK)
        rc = add_meta(w, key, WPACK_META_ARRAY, elem_type, off, count);
    if (rc)
        w->aux.len = off;
    return rc;
}

/* ---- name map and stats ---- */

int wpack_writer_add_name(wpack_writer *w, const char *other_name, const char *entry)
{
    int rc = usable(w);
    if (rc)
        return rc;
    wpk_pending_name m;
    size_t mark = w->strings.len;
    if ((rc = pool_name(w, other_name, "name-map name", &m.name)) ||
        (rc = pool_name(w, entry, "name-map entry", &m.entry))) {
        w->strings.len = mark;
        return rc;
    }
    uint64_t item;
    if (wpk_nameset_find(&w->name_set, map_name_of, w, (const uint8_t *)other_name, m.name.len,
                         &item) ||
        wpk_nameset_find(&w->entry_set, entry_name_of, w, (const uint8_t *)other_name, m.name.len,
                         &item)) {
        w->strings.len = mark;
        return wpk_wfail(w, WPACK_E_EXISTS, "name-map name '%s' already names an entry", other_name);
    }
    uint64_t idx = w->names.len / sizeof m;
    if (!wpk_buf_append(&w->names, &m, sizeof m) ||
        !wpk_nameset_insert(&w->name_set, map_name_of, w, (const uint8_t *)other_name, m.name.len,
                            idx))
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    return WPACK_OK;
}

/*
 * Name-map names whose target is no entry but a module path with
 * activation stats (`wpack create --name model.0=0`, "0" an nn.Sequential
 * layer) cannot be name-map records, whose target is an entry number: they
 * go into the metadata key wpack.module_names (spec section 9), an array of
 * strings [other, key, other, key, ...] sorted by other name, which the
 * resolver's --annotate reads. Called at finish, when all stats are known.
 */
static int pair_cmp(const void *a, const void *b)
{
    return strcmp(((char *const *)a)[0], ((char *const *)b)[0]);
}

static int module_names_finish(wpack_writer *w)
{
    wpk_pending_name *ns = (wpk_pending_name *)(void *)w->names.p;
    size_t n = w->names.len / sizeof *ns, keep = 0, np = 0;
    const wpk_pending_stats *ss = (const wpk_pending_stats *)(void *)w->stats.p;
    size_t nstats = w->stats.len / sizeof *ss;
    char **pairs = NULL;
    int rc = WPACK_OK;
    for (size_t i = 0; i < n; i++) {
        const char *target = wpk_pool_str(w, ns[i].entry);
        uint64_t item;
        int module = 0;
        if (!wpk_nameset_find(&w->entry_set, entry_name_of, w, (const uint8_t *)target,
                              ns[i].entry.len, &item))
            for (size_t k = 0; k < nstats && !module; k++)
                module = ss[k].kind == WPACK_STATS_ACTIVATION &&
                         strcmp(wpk_pool_str(w, ss[k].key), target) == 0;
        if (!module) {
            ns[keep++] = ns[i];
            continue;
        }
        char **grown = realloc(pairs, (np + 1) * 2 * sizeof *pairs);
        if (!grown) {
            rc = wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
            break;
        }
        pairs = grown;
        /* copies: the pool moves while the array's strings are added to it */
        pairs[2 * np] = strdup(wpk_pool_str(w, ns[i].name));
        pairs[2 * np + 1] = strdup(target);
        np++;
        if (!pairs[2 * np - 2] || !pairs[2 * np - 1]) {
            rc = wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
            break;
        }
    }
    if (rc == WPACK_OK && np) {
        w->names.len = keep * sizeof *ns; /* the name set is not consulted after this */
        qsort(pairs, np, 2 * sizeof *pairs, pair_cmp);
        uint64_t item;
        if (wpk_nameset_find(&w->meta_set, meta_key_of, w, (const uint8_t *)"wpack.module_names", 18,
                             &item))
            rc = wpk_wfail(w, WPACK_E_EXISTS,
                           "name map '%s': '%s' is a module path (activation stats only), which goes "
                           "into metadata 'wpack.module_names', but that key is set already",
                           pairs[0], pairs[1]);
        else
            rc = wpack_writer_set_array(w, "wpack.module_names", WPACK_META_STRING, 2 * np,
                                        (const char *const *)pairs);
    }
    for (size_t i = 0; i < 2 * np; i++)
        free(pairs[i]);
    free(pairs);
    return rc;
}

static int finite_all(const double *v, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (!(v[i] - v[i] == 0))
            return 0;
    return 1;
}

int wpack_writer_add_stats(wpack_writer *w, const wpack_stats_in *s)
{
    int rc = usable(w);
    if (rc)
        return rc;
    if (!s || !s->key)
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT, "stats: NULL record or key");
    const char *k = s->key;
    uint32_t C = s->channels;
    if ((s->kind != WPACK_STATS_WEIGHT && s->kind != WPACK_STATS_ACTIVATION) ||
        (s->granularity != WPACK_GRAN_TENSOR && s->granularity != WPACK_GRAN_CHANNEL) || C < 1 ||
        C > WPK_LIMIT_CHANNELS || (s->granularity == WPACK_GRAN_TENSOR && (C != 1 || s->axis)) ||
        s->axis >= WPACK_MAX_RANK || !s->min || !s->max || !s->absmax || !s->mean || !s->variance ||
        s->hist_bins > WPK_LIMIT_HIST_BINS || s->percentile_count > WPK_LIMIT_PERCENTILES ||
        (s->hist_bins && (!s->hist_edges || !s->hist_counts)) ||
        (s->percentile_count && !s->percentiles))
        return wpk_wfail(w, WPACK_E_STATS, "stats '%s': kind, granularity, channels or arrays invalid", k);
    /* The same consistency the reader demands, so a bad record fails here, not at open. */
    const double *arr[5] = {s->min, s->max, s->absmax, s->mean, s->variance};
    for (int j = 0; j < 5; j++)
        if (!finite_all(arr[j], C))
            return wpk_wfail(w, WPACK_E_STATS, "stats '%s': non-finite value", k);
    for (uint32_t c = 0; c < C; c++) {
        double mn = s->min[c], mx = s->max[c];
        double am = (mn < 0 ? -mn : mn) > (mx < 0 ? -mx : mx) ? (mn < 0 ? -mn : mn) : (mx < 0 ? -mx : mx);
        if (!(mn <= mx) || s->absmax[c] != am || !(mn <= s->mean[c] && s->mean[c] <= mx) ||
            s->variance[c] < 0)
            return wpk_wfail(w, WPACK_E_STATS, "stats '%s' channel %u: inconsistent values", k, c);
    }
    if (s->hist_bins) {
        uint64_t sum = 0;
        if (!finite_all(s->hist_edges, (uint64_t)s->hist_bins + 1))
            return wpk_wfail(w, WPACK_E_STATS, "stats '%s': non-finite histogram edge", k);
        for (uint32_t b = 0; b < s->hist_bins; b++) {
            if (!(s->hist_edges[b + 1] > s->hist_edges[b]))
                return wpk_wfail(w, WPACK_E_STATS, "stats '%s': histogram edges not increasing", k);
            if (!wpk_add(sum, s->hist_counts[b], &sum))
                return wpk_wfail(w, WPACK_E_STATS, "stats '%s': histogram counts overflow", k);
        }
        if (sum != s->count)
            return wpk_wfail(w, WPACK_E_STATS, "stats '%s': histogram counts sum to %llu, count is %llu",
                             k, (unsigned long long)sum, (unsigned long long)s->count);
    }
    for (uint32_t j = 0; j < s->percentile_count; j++) {
        double q = s->percentiles[2 * j], v = s->percentiles[2 * j + 1];
        if (!(q >= 0 && q <= 100) || !finite_all(&v, 1) ||
            (j && (!(q > s->percentiles[2 * j - 2]) || v < s->percentiles[2 * j - 1])))
            return wpk_wfail(w, WPACK_E_STATS, "stats '%s': percentile %u out of order or range", k, j);
    }
    wpk_pending_stats p;
    memset(&p, 0, sizeof p);
    size_t smark = w->strings.len, amark = w->aux.len;
    if ((rc = pool_name(w, k, "stats key", &p.key)))
        return rc;
    p.kind = (uint8_t)s->kind;
    p.gran = (uint8_t)s->granularity;
    p.axis = s->axis;
    p.channels = C;
    p.count = s->count;
    p.bins = s->hist_bins;
    p.pcts = s->percentile_count;
    int ok = 1;
    p.values_off = w->aux.len;
    for (int j = 0; j < 5 && ok; j++)
        for (uint32_t c = 0; c < C && ok; c++) {
            uint8_t b[8];
            wpk_stf64(b, arr[j][c]);
            ok = wpk_buf_append(&w->aux, b, 8);
        }
    if (p.bins) {
        p.hist_off = w->aux.len;
        for (uint32_t b = 0; b <= p.bins && ok; b++) {
            uint8_t x[8];
            wpk_stf64(x, s->hist_edges[b]);
            ok = wpk_buf_append(&w->aux, x, 8);
        }
        for (uint32_t b = 0; b < p.bins && ok; b++) {
            uint8_t x[8];
            wpk_st64(x, s->hist_counts[b]);
            ok = wpk_buf_append(&w->aux, x, 8);
        }
    }
    if (p.pcts) {
        p.pct_off = w->aux.len;
        for (uint32_t j = 0; j < 2 * p.pcts && ok; j++) {
            uint8_t x[8];
            wpk_stf64(x, s->percentiles[j]);
            ok = wpk_buf_append(&w->aux, x, 8);
        }
    }
    if (!ok || !wpk_buf_append(&w->stats, &p, sizeof p)) {
        w->strings.len = smark;
        w->aux.len = amark;
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    }
    return WPACK_OK;
}

/* ---- finish / abort ---- */

static void free_writer(wpack_writer *w, int remove_shards)
{
    wpk_shards_free(w, remove_shards);
    wpk_atomic_abort(&w->out); /* a committed or handed-over file has nothing left here */
    wpk_buf_free(&w->strings);
    wpk_buf_free(&w->aux);
    wpk_buf_free(&w->entries);
    wpk_buf_free(&w->meta);
    wpk_buf_free(&w->names);
    wpk_buf_free(&w->stats);
    wpk_buf_free(&w->dtypes);
    wpk_nameset_free(&w->entry_set);
    wpk_nameset_free(&w->meta_set);
    wpk_nameset_free(&w->name_set);
    wpk_hasher_free(w->hasher);
    wpk_compress_free(w->zc);
    free(w->obuf);
    free(w->path);
    free(w);
}

void wpack_writer_abort(wpack_writer *w)
{
    if (!w)
        return;
    free_writer(w, 1);
}

/* Everything up to a durable, complete temporary file. */
static int finish_file(wpack_writer *w)
{
    int rc = w->fd < 0 ? (w->errcode ? w->errcode : WPACK_E_STATE) : usable(w);
    if (rc == WPACK_OK && !w->failed &&
        !wpk_nameset_find(&w->meta_set, meta_key_of, w, (const uint8_t *)"wpack.producer", 14,
                          &(uint64_t){0}))
        rc = wpack_writer_set_string(w, "wpack.producer", "wpack " WPACK_VERSION_STRING);
    if (rc == WPACK_OK && !w->failed)
        rc = module_names_finish(w);
    if (rc == WPACK_OK && w->shards)
        rc = wpk_shards_finish(w);
    if (rc == WPACK_OK)
        rc = wpk_write_index(w);
    char err[sizeof w->errmsg];
    if (rc == WPACK_OK && (rc = wpk_atomic_sync(&w->out, err, sizeof err)))
        wpk_wfail(w, rc, "%s", err);
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
        wpk_fmt(errbuf, errlen, "%s", rc ? w->errmsg : "");
    if (rc)
        wpack_writer_abort(w);
    else
        free_writer(w, 0);
    return rc;
}
