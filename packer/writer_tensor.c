/* writer_tensor.c - the writer's entries: data tensors streamed or given
 * whole (with their checksums, weight stats and compression), splats,
 * aliases, externals and block dtypes. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "bytes.h"
#include "writer.h"
#include "writer_shards.h"

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
    int rc = wpk_name_ok(w, name, "tensor"); /* the messages below show it as it is */
    if (rc)
        return rc;
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
    if (rank && !dims)
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT, "tensor '%s': NULL dims for rank %u", name,
                         rank);
    uint64_t n = 1;
    for (unsigned d = 0; d < rank; d++)
        if (!wpk_mul(n, dims[d], &n))
            return wpk_wfail(w, WPACK_E_OVERFLOW, "tensor '%s': element count overflows", name);
    if (dtype >= WPACK_DTYPE_BLOCK_BASE) { /* rank 0 too with 1-element blocks (spec 7.2) */
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
    int rc = wpk_writer_usable(w);
    if (rc)
        return rc;
    if (wpk_entry_count(w) >= WPK_LIMIT_ENTRIES)
        return wpk_wfail(w, WPACK_E_LIMIT, "more than %llu entries",
                         (unsigned long long)WPK_LIMIT_ENTRIES);
    wpk_pending_entry e;
    memset(&e, 0, sizeof e);
    if ((rc = wpk_pool_name(w, name, "tensor", &e.name)))
        return rc;
    uint64_t item;
    if (wpk_nameset_find(&w->entry_set, wpk_entry_name_of, w, (const uint8_t *)name, e.name.len, &item)) {
        w->strings.len = e.name.off;
        return wpk_wfail(w, WPACK_E_EXISTS, "tensor '%s' added twice", name);
    }
    if (wpk_nameset_find(&w->name_set, wpk_map_name_of, w, (const uint8_t *)name, e.name.len, &item)) {
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
        !wpk_nameset_insert(&w->entry_set, wpk_entry_name_of, w, (const uint8_t *)name, e.name.len, idx))
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    *out = &wpk_entries(w)[idx];
    return WPACK_OK;
}

/* What a data tensor's calls check first: a usable writer, a name, a shape
 * whose byte size (*nbytes) is known. */
static int tensor_args(wpack_writer *w, const char *name, int dtype, unsigned rank,
                       const uint64_t *dims, uint64_t *nbytes)
{
    int rc = wpk_writer_usable(w);
    if (rc)
        return rc;
    return tensor_size(w, name, dtype, rank, dims, nbytes);
}

int wpack_writer_begin_tensor(wpack_writer *w, const char *name, int dtype, unsigned rank,
                              const uint64_t *dims)
{
    uint64_t nbytes = 0;
    int rc = tensor_args(w, name, dtype, rank, dims, &nbytes);
    if (rc)
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
    /* compressed: one checksum per zstd chunk of decoded bytes (19b) */
    wpk_sums_begin(w, nbytes, wpk_compress_active(w) ? wpk_compress_chunk_log2(w) : w->sums_log2);
    return WPACK_OK;
}

/* Hash the bytes and feed their whole elements to the stats, keeping a
 * split element in carry (on the executor when there is one). */
static void hash_and_stats(wpack_writer *w, wpk_pending_entry *e, const uint8_t *p, size_t n)
{
    size_t size = wpack_dtype_size(e->dtype);
    size_t pre = 0;
    if (w->carry_len) {
        pre = size - w->carry_len < n ? size - w->carry_len : n;
        memcpy(w->carry + w->carry_len, p, pre);
        w->carry_len += pre;
        if (w->carry_len < size) {
            wpk_tensor_hash(w, p, n);
            return;
        }
        wpk_acc_feed_isa(&e->acc, e->dtype, w->carry, 1, w->stats_isa);
        w->carry_len = 0;
    }
    size_t whole = (n - pre) / size;
    if (!wpk_par_hash_stats(w, e, p, n, pre, whole)) {
        wpk_tensor_hash(w, p, n);
        wpk_acc_feed_isa(&e->acc, e->dtype, p + pre, whole, w->stats_isa);
    }
    w->carry_len = n - pre - whole * size;
    memcpy(w->carry, p + pre + whole * size, w->carry_len);
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

int wpk_tensor_take(wpack_writer *w, wpk_pending_entry *e, const void *data, size_t nbytes)
{
    if (nbytes > w->cur_expected - w->cur_written)
        return wpk_wfail(w, WPACK_E_SIZE, "tensor '%s': %llu bytes written, its shape holds %llu",
                         wpk_pool_str(w, e->name),
                         (unsigned long long)(w->cur_written + nbytes),
                         (unsigned long long)w->cur_expected);
    if (e->has_acc)
        hash_and_stats(w, e, data, nbytes);
    else
        wpk_tensor_hash(w, data, nbytes);
    w->cur_written += nbytes;
    return WPACK_OK;
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
    int rc = wpk_tensor_take(w, e, data, nbytes);
    if (rc)
        return rc;
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
        wpk_tensor_hash(w, zeros, k);
        left -= k;
    }
    /* Skip over the zeros: the file gets a hole, read back as zeros. */
    int rc = wpk_out_flush(w);
    if (rc)
        return rc;
    if (lseek(w->fd, (off_t)nbytes, SEEK_CUR) < 0)
        return wpk_wbreak(w, WPACK_E_IO, "%s: seek failed: %s", w->shown, strerror(errno));
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
    /* a short extent in the file: the archive cannot be finished */
    if (w->cur_written != w->cur_expected)
        return wpk_wbreak(w, WPACK_E_SIZE, "tensor '%s': %llu bytes written, its shape needs %llu",
                          wpk_pool_str(w, e->name), (unsigned long long)w->cur_written,
                          (unsigned long long)w->cur_expected);
    e->checksum = wpk_hasher_digest(w->hasher);
    w->in_tensor = 0;
    int rc = wpk_compress_active(w) ? wpk_compress_end(w, e, e->checksum) : WPACK_OK;
    return rc ? rc : wpk_sums_end(w, e);
}

int wpack_writer_add_tensor(wpack_writer *w, const char *name, int dtype, unsigned rank,
                            const uint64_t *dims, const void *data, uint64_t nbytes)
{
    uint64_t want = 0;
    int rc = tensor_args(w, name, dtype, rank, dims, &want);
    if (rc)
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
    int rc = wpk_writer_usable(w);
    if (rc)
        return rc;
    if ((rc = tensor_size(w, name, dtype, rank, dims, &nbytes)))
        return rc;
    if (!fill)
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT, "splat '%s': NULL fill", name);
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
    int rc = wpk_writer_usable(w);
    if (rc)
        return rc;
    wpk_str_ref t;
    if ((rc = wpk_pool_name(w, target, "alias target", &t)))
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
    int rc = wpk_writer_usable(w);
    if (rc)
        return rc;
    if ((rc = wpk_name_ok(w, name, "external")))
        return rc;
    if (w->shards)
        return wpk_wfail(w, WPACK_E_STATE, "external '%s': this writer makes its own shards", name);
    if (!t || t->kind != WPACK_KIND_DATA || t->codec != WPACK_CODEC_NONE || shard >= WPK_MAX_SHARDS)
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT,
                         "external '%s': needs an uncompressed data entry and a shard number below %u",
                         name, WPK_MAX_SHARDS);
    uint64_t nbytes;
    if ((rc = tensor_size(w, name, t->dtype, t->rank, t->dims, &nbytes)))
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


int wpack_writer_add_block_dtype(wpack_writer *w, const char *name, uint32_t block_elems,
                                 uint32_t block_bytes, const void *params, size_t params_len,
                                 int *code)
{
    int rc = wpk_writer_usable(w);
    if (rc)
        return rc;
    uint64_t n = w->dtypes.len / sizeof(wpk_pending_dtype);
    if (n >= WPK_MAX_BLOCK_DTYPES)
        return wpk_wfail(w, WPACK_E_LIMIT, "more than 128 block dtypes");
    if (!block_elems || !block_bytes)
        return wpk_wfail(w, WPACK_E_DTYPE, "block dtype: zero block size");
    wpk_pending_dtype d;
    memset(&d, 0, sizeof d);
    if ((rc = wpk_pool_name(w, name, "block dtype", &d.name)))
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
