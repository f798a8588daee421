/* verify.c - checksums of tensor bytes and zero padding, on demand. */
#include <stdlib.h>

#include "bytes.h"
#include "reader.h"

/* A bool splat's fill is 0 or 1 (spec 21.17); a bool tensor's bytes are
 * checked in the pass that hashes them (wpk_check_stream). */
static int check_bool_fill(wpack_archive *ar, const wpack_tensor *t)
{
    const uint8_t *p = t->fill;
    if (wpk_first_bad_bool(p, 1) == 1)
        return WPACK_OK;
    char q[256];
    wpk_quote(q, sizeof q, t->name, t->name_len);
    return wpk_fail(ar, WPACK_E_VALUE, "splat '%s': bool fill is %u; bools are 0 or 1", q, p[0]);
}

int wpack_verify_entry(wpack_archive *ar, uint64_t i)
{
    if (i >= ar->info.entry_count)
        return WPACK_E_NOT_FOUND;
    wpack_tensor t;
    wpk_fill_tensor(ar, i, &t);
    if (t.fill) /* a splat: its fill checksum is verified at open */
        return t.dtype == WPACK_DTYPE_BOOL ? check_bool_fill(ar, &t) : WPACK_OK;
    if (t.codec == WPACK_CODEC_ZSTD && !wpk_needs_fetch(ar, &t)) {
        /* the stored (compressed) bytes first; the decoded ones below (a
         * fetch checks the stored bytes itself) */
        uint64_t got = wpk_xxh3(ar->base + t.offset, (size_t)t.stored_length);
        if (got != t.checksum) {
            char q[768];
            wpk_entry_label(ar, &t, q, sizeof q);
            return wpk_fail(ar, WPACK_E_CHECKSUM,
                            "%s: checksum mismatch (stored %016llx, bytes hash to %016llx)",
                            q, (unsigned long long)t.checksum, (unsigned long long)got);
        }
    }
    /* The logical bytes: the view itself (= the stored bytes), or every
     * chunk decoded once; bool values in the same pass. */
    return wpk_check_stream(ar, i, NULL, NULL,
                            WPK_CHECK_HASH | WPK_CHECK_SUMS |
                                (t.dtype == WPACK_DTYPE_BOOL ? WPK_CHECK_BOOL : 0));
}

/* The start of the k-th extent in offset order and the end of its bytes. */
static void extent_at(const wpack_archive *ar, uint64_t k, uint64_t *start, uint64_t *end)
{
    uint32_t i = wpk_ld32(ar->sec[WPK_SEC_EXTENTS] + 4 * k);
    const uint8_t *r = wpk_rec(ar, WPK_SEC_ENTRIES, i, WPK_ENTRY_SIZE);
    *start = wpk_ld64(r + WPK_E_DATA_OFFSET_OFF);
    *end = *start + wpk_ld64(r + WPK_E_STORED_LEN_OFF);
}

/* A source's plan of the padding the pass below reads, in its order: the
 * gaps then come in the source's merged read-ahead requests, not one
 * request each (4000 tensors: 4344 requests before). Out of memory: no
 * plan, one read per gap. */
static void plan_padding(wpack_archive *ar, uint64_t data_count)
{
    if (!wpk_unmapped(ar) || !ar->src.plan || !data_count ||
        data_count > SIZE_MAX / (2 * sizeof(uint64_t)))
        return;
    uint64_t *v = malloc((size_t)data_count * 2 * sizeof *v);
    if (!v)
        return;
    size_t k = 0;
    uint64_t prev_end = ar->info.data_offset, start, end;
    for (uint64_t e = 0; e < data_count; e++) {
        extent_at(ar, e, &start, &end);
        if (start > prev_end && start - prev_end <= WPACK_MAX_ALIGNMENT) {
            v[2 * k] = prev_end;
            v[2 * k + 1] = start - prev_end;
            k++;
        }
        prev_end = end;
    }
    ar->src.plan(ar->src.user, v, k);
    free(v);
}

int wpack_verify_all(wpack_archive *ar, wpack_verify_cb on_bad, void *user)
{
    return wpack_verify_all_progress(ar, on_bad, NULL, user);
}

int wpack_verify_all_progress(wpack_archive *ar, wpack_verify_cb on_bad,
                              wpack_verify_progress_cb on_entry, void *user)
{
    int first = WPACK_OK;
    uint64_t n = ar->info.entry_count;
    if (wpk_unmapped(ar) || ar->nshards) { /* a source fetches ahead along this order */
        uint64_t *v = n < SIZE_MAX / sizeof *v ? calloc((size_t)(n ? n : 1), sizeof *v) : NULL;
        size_t k = 0;
        for (uint64_t i = 0; v && i < n; i++) {
            const uint8_t *r = wpk_rec(ar, WPK_SEC_ENTRIES, i, WPK_ENTRY_SIZE);
            if (r[WPK_E_KIND_OFF] == WPACK_KIND_DATA || r[WPK_E_KIND_OFF] == WPACK_KIND_EXTERNAL)
                v[k++] = i;
        }
        if (v)
            wpack_read_plan(ar, v, k);
        free(v);
    }
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *r = wpk_rec(ar, WPK_SEC_ENTRIES, i, WPK_ENTRY_SIZE);
        int kind = r[WPK_E_KIND_OFF];
        /* a bool splat's fill value too (M51; open checked its checksum),
         * not counted as an entry with bytes of its own */
        int bool_splat = kind == WPACK_KIND_SPLAT && r[WPK_E_DTYPE_OFF] == WPACK_DTYPE_BOOL;
        if (kind != WPACK_KIND_DATA && kind != WPACK_KIND_EXTERNAL && !bool_splat)
            continue; /* an alias shares its target's bytes and checksum */
        int rc = wpack_verify_entry(ar, i);
        if (rc) {
            if (!first)
                first = rc;
            if (on_bad)
                on_bad(user, i, rc, ar->errmsg);
        }
        if (on_entry && !bool_splat)
            on_entry(user, i);
    }
    /* Padding between extents, in offset order: from the end of one extent
     * to the start of the next (open checked that the gaps are only padding). */
    uint64_t prev_end = ar->info.data_offset;
    uint64_t data_count = ar->sec_len[WPK_SEC_EXTENTS] / 4;
    plan_padding(ar, data_count);
    for (uint64_t k = 0; k < data_count; k++) {
        uint32_t i = wpk_ld32(ar->sec[WPK_SEC_EXTENTS] + 4 * k);
        const uint8_t *r = wpk_rec(ar, WPK_SEC_ENTRIES, i, WPK_ENTRY_SIZE);
        uint64_t start = wpk_ld64(r + WPK_E_DATA_OFFSET_OFF);
        int z = start > prev_end ? wpk_padding_zero(ar, prev_end, start - prev_end) : 1;
        if (z != 1) {
            int rc = z < 0 ? ar->errcode /* a source's read failed: its message */
                           : wpk_fail(ar, WPACK_E_PADDING,
                                      "padding at %llu..%llu (before tensor '%s') is not zero",
                                      (unsigned long long)prev_end, (unsigned long long)start,
                                      wpk_str(ar, wpk_ld64(r + WPK_E_NAME_OFF)));
            if (!first)
                first = rc;
            if (on_bad)
                on_bad(user, i, rc, ar->errmsg);
        }
        prev_end = start + wpk_ld64(r + WPK_E_STORED_LEN_OFF);
    }
    return first;
}
