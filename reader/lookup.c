/* lookup.c - entries by position, by name (and name map), by prefix; copies. */
#include <string.h>

#include "bytes.h"
#include "reader.h"

int wpk_search(const wpack_archive *ar, int sec, uint32_t rec_size, uint64_t count,
               const uint8_t *key, uint64_t key_len, uint64_t *pos)
{
    uint64_t lo = 0, hi = count;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        const uint8_t *r = wpk_rec(ar, sec, mid, rec_size);
        const uint8_t *name = (const uint8_t *)wpk_str(ar, wpk_ld64(r));
        int c = wpk_name_cmp(name, wpk_ld32(r + 8), key, key_len);
        if (c == 0) {
            *pos = mid;
            return 1;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *pos = lo;
    return 0;
}

void wpk_fill_tensor(const wpack_archive *ar, uint64_t i, wpack_tensor *t)
{
    const uint8_t *r = wpk_rec(ar, WPK_SEC_ENTRIES, i, WPK_ENTRY_SIZE);
    /* every field set below (not memset: `rep stos` of the whole struct
     * was half of this function's time in the resolver's lookups) */
    for (unsigned d = 0; d < WPACK_MAX_RANK; d++)
        t->dims[d] = 0;
    t->data = NULL;
    t->fill = NULL;
    t->fill_size = 0;
    t->alias_target = 0;
    t->chunk_size = 0;
    for (size_t k = 0; k < sizeof t->reserved_ptr / sizeof t->reserved_ptr[0]; k++)
        t->reserved_ptr[k] = NULL;
    for (size_t k = 0; k < sizeof t->reserved / sizeof t->reserved[0]; k++)
        t->reserved[k] = 0;
    t->name = wpk_str(ar, wpk_ld64(r + WPK_E_NAME_OFF));
    t->name_len = wpk_ld32(r + WPK_E_NAME_LEN_OFF);
    t->index = i;
    t->kind = r[WPK_E_KIND_OFF];
    t->dtype = r[WPK_E_DTYPE_OFF];
    t->codec = r[WPK_E_CODEC_OFF];
    t->rank = r[WPK_E_RANK_OFF];
    const uint8_t *dims = ar->sec[WPK_SEC_DIMS] + 8 * wpk_ld64(r + WPK_E_DIMS_OFF);
    t->nelems = 1;
    for (unsigned d = 0; d < t->rank; d++) {
        t->dims[d] = wpk_ld64(dims + 8 * d);
        t->nelems *= t->dims[d]; /* checked at open */
    }
    uint64_t unit, block;
    wpk_dtype_unit(ar, t->dtype, &unit, &block);
    t->nbytes = t->nelems / block * unit;
    t->offset = wpk_ld64(r + WPK_E_DATA_OFFSET_OFF);
    t->stored_length = wpk_ld64(r + WPK_E_STORED_LEN_OFF);
    t->checksum = wpk_ld64(r + WPK_E_CHECKSUM_OFF);
    /* An alias shows its target's bytes, or its target's fill for a splat. */
    const uint8_t *src = r;
    if (t->kind == WPACK_KIND_ALIAS) {
        t->alias_target = wpk_ld32(r + WPK_E_TARGET_OFF);
        src = wpk_rec(ar, WPK_SEC_ENTRIES, t->alias_target, WPK_ENTRY_SIZE);
    }
    t->decoded_checksum = t->checksum;
    if (src[WPK_E_KIND_OFF] == WPACK_KIND_SPLAT) {
        t->fill = ar->sec[WPK_SEC_AUX] + wpk_ld64(src + WPK_E_AUX_OFF);
        t->fill_size = (size_t)wpk_ld64(src + WPK_E_AUX_LEN_OFF);
    } else if (src[WPK_E_CODEC_OFF] == WPACK_CODEC_ZSTD) {
        t->chunk_size = 1u << wpk_ld32(src + WPK_E_CODEC_PARAM_OFF);
        t->decoded_checksum = wpk_ld64(ar->sec[WPK_SEC_AUX] + wpk_ld64(src + WPK_E_AUX_OFF));
    } else if (src[WPK_E_KIND_OFF] == WPACK_KIND_EXTERNAL) {
        /* a shard's bytes: validated against the shard at open */
        uint32_t s = wpk_ld32(src + WPK_E_TARGET_OFF);
        /* NULL only while open is still validating the manifest (and, then,
         * for a place outside the shard: base + offset must not even be
         * computed, it may overflow) */
        const wpack_archive *sh = s < ar->nshards ? ar->shards[s] : NULL;
        t->data = sh && wpk_in_bounds(t->offset, t->stored_length, sh->len) ? sh->base + t->offset
                                                                            : NULL;
        if (t->kind == WPACK_KIND_EXTERNAL)
            t->alias_target = wpk_ld32(src + WPK_E_TARGET_OFF);
    } else {
        t->data = ar->base ? ar->base + t->offset : NULL; /* NULL: an unmapped source */
    }
}

uint64_t wpack_count(const wpack_archive *ar)
{
    return ar->info.entry_count;
}

int wpack_tensor_at(const wpack_archive *ar, uint64_t i, wpack_tensor *out)
{
    if (i >= ar->info.entry_count)
        return WPACK_E_NOT_FOUND;
    wpk_fill_tensor(ar, i, out);
    return WPACK_OK;
}

int wpack_find(const wpack_archive *ar, const char *name, wpack_tensor *out)
{
    if (!name)
        return WPACK_E_INVALID_ARGUMENT;
    uint64_t pos, len = strlen(name);
    if (wpk_search(ar, WPK_SEC_ENTRIES, WPK_ENTRY_SIZE, ar->info.entry_count,
                   (const uint8_t *)name, len, &pos)) {
        wpk_fill_tensor(ar, pos, out);
        return WPACK_OK;
    }
    if (wpk_search(ar, WPK_SEC_NAMEMAP, WPK_NAMEMAP_REC_SIZE, ar->info.namemap_count,
                   (const uint8_t *)name, len, &pos)) {
        const uint8_t *r = wpk_rec(ar, WPK_SEC_NAMEMAP, pos, WPK_NAMEMAP_REC_SIZE);
        wpk_fill_tensor(ar, wpk_ld32(r + WPK_N_ENTRY_OFF), out);
        return WPACK_OK;
    }
    return WPACK_E_NOT_FOUND;
}

int wpack_prefix_range(const wpack_archive *ar, const char *prefix, uint64_t *first,
                       uint64_t *count)
{
    if (!prefix)
        return WPACK_E_INVALID_ARGUMENT;
    uint64_t plen = strlen(prefix), n = ar->info.entry_count, lo, hi;
    wpk_search(ar, WPK_SEC_ENTRIES, WPK_ENTRY_SIZE, n, (const uint8_t *)prefix, plen, &lo);
    /* The run ends at the first name that does not start with prefix. */
    uint64_t a = lo, b = n;
    while (a < b) {
        uint64_t mid = a + (b - a) / 2;
        const uint8_t *r = wpk_rec(ar, WPK_SEC_ENTRIES, mid, WPK_ENTRY_SIZE);
        const char *name = wpk_str(ar, wpk_ld64(r + WPK_E_NAME_OFF));
        if (wpk_ld32(r + WPK_E_NAME_LEN_OFF) >= plen && memcmp(name, prefix, (size_t)plen) == 0)
            a = mid + 1;
        else
            b = mid;
    }
    hi = a;
    *first = lo;
    *count = hi - lo;
    return *count ? WPACK_OK : WPACK_E_NOT_FOUND;
}

int wpack_tensor_view(const wpack_archive *ar, uint64_t i, const void **data, uint64_t *nbytes)
{
    if (i >= ar->info.entry_count)
        return WPACK_E_NOT_FOUND;
    wpack_tensor t;
    wpk_fill_tensor(ar, i, &t);
    *data = t.data;
    *nbytes = t.data ? t.nbytes : 0;
    if (!t.data)
        return WPACK_E_NO_VIEW;
    if (ar->flags & WPACK_OPEN_VERIFY_READS)
        return wpack_verify_once(ar, i);
    int known = wpk_known_check(ar, &t); /* found bad before: refused, verifying or not */
    return known > 0 ? wpk_failed_before(ar, &t, known) : WPACK_OK;
}
