/* verify.c - checksums of tensor bytes and zero padding, on demand. */
#include "bytes.h"
#include "reader.h"

int wpack_verify_entry(wpack_archive *ar, uint64_t i)
{
    if (i >= ar->info.entry_count)
        return WPACK_E_NOT_FOUND;
    wpack_tensor t;
    wpk_fill_tensor(ar, i, &t);
    if (t.fill)
        return WPACK_OK; /* a splat: its fill checksum is verified at open */
    /* The stored bytes: the view, or the compressed stream of a zstd tensor. */
    uint64_t got = wpk_xxh3(t.data ? t.data : ar->base + t.offset, (size_t)t.stored_length);
    if (got != t.checksum) {
        char q[256];
        wpk_quote(q, sizeof q, t.name, t.name_len);
        return wpk_fail(ar, WPACK_E_CHECKSUM,
                        "tensor '%s': checksum mismatch (stored %016llx, bytes hash to %016llx)", q,
                        (unsigned long long)t.checksum, (unsigned long long)got);
    }
    if (t.codec == WPACK_CODEC_ZSTD)
        return wpk_verify_decoded(ar, t.kind == WPACK_KIND_ALIAS ? t.alias_target : i);
    return WPACK_OK;
}

int wpack_verify_all(wpack_archive *ar, wpack_verify_cb on_bad, void *user)
{
    int first = WPACK_OK;
    uint64_t n = ar->info.entry_count;
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *r = wpk_rec(ar, WPK_SEC_ENTRIES, i, WPK_ENTRY_SIZE);
        if (r[WPK_E_KIND_OFF] != WPACK_KIND_DATA && r[WPK_E_KIND_OFF] != WPACK_KIND_EXTERNAL)
            continue; /* an alias shares its target's bytes and checksum */
        int rc = wpack_verify_entry(ar, i);
        if (rc) {
            if (!first)
                first = rc;
            if (on_bad)
                on_bad(user, i, rc, ar->errmsg);
        }
    }
    /* Padding between extents, in offset order: from the end of one extent
     * to the start of the next (open checked that the gaps are only padding). */
    uint64_t prev_end = ar->info.data_offset;
    uint64_t data_count = ar->sec_len[WPK_SEC_EXTENTS] / 4;
    for (uint64_t k = 0; k < data_count; k++) {
        uint32_t i = wpk_ld32(ar->sec[WPK_SEC_EXTENTS] + 4 * k);
        const uint8_t *r = wpk_rec(ar, WPK_SEC_ENTRIES, i, WPK_ENTRY_SIZE);
        uint64_t start = wpk_ld64(r + WPK_E_DATA_OFFSET_OFF);
        if (start > prev_end && !wpk_all_zero(ar->base + prev_end, start - prev_end)) {
            int rc = wpk_fail(ar, WPACK_E_PADDING, "padding at %llu..%llu (before tensor '%s') is not zero",
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
