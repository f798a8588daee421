/*
 * fix_checksums.h - recompute the XXH3 checksums of a wpack archive in
 * place (data and splat entries, aliases copied from their target, index,
 * superblock, trailer), so that a mutated input gets past the checksum
 * checks. Shared by fuzz_archive.c and fuzz_shards.c; every offset read from
 * the input is bounds-checked, so any bytes are fine.
 */
#ifndef WPACK_FUZZ_FIX_CHECKSUMS_H
#define WPACK_FUZZ_FIX_CHECKSUMS_H

#include <stdint.h>
#include <string.h>
#include <xxhash.h>

#include "bytes.h"
#include "layout.h"
#include "wpack.h"

/* [off, off+n) inside a region of size bytes. */
static inline int fits(uint64_t off, uint64_t n, uint64_t size)
{
    return off <= size && n <= size - off;
}

/* Recompute, for the index header h points to, the checksums of its data
 * and splat entries (aliases copy their target's) and the index checksum. */
static inline void fix_index(uint8_t *b, size_t len, uint8_t *h)
{
    uint64_t ioff = wpk_ld64(h + WPK_H_INDEX_OFFSET_OFF), ilen = wpk_ld64(h + WPK_H_INDEX_LENGTH_OFF);
    if (!fits(ioff, ilen, len) || ilen < WPK_INDEX_HEADER_SIZE)
        return;
    uint8_t *ix = b + ioff;
    uint64_t eoff = wpk_ld64(ix + WPK_I_SECTIONS_OFF + 16 * WPK_SEC_ENTRIES);
    uint64_t elen = wpk_ld64(ix + WPK_I_SECTIONS_OFF + 16 * WPK_SEC_ENTRIES + 8);
    uint64_t aoff = wpk_ld64(ix + WPK_I_SECTIONS_OFF + 16 * WPK_SEC_AUX);
    uint64_t alen = wpk_ld64(ix + WPK_I_SECTIONS_OFF + 16 * WPK_SEC_AUX + 8);
    if (fits(eoff, elen, ilen)) {
        uint64_t count = elen / WPK_ENTRY_SIZE;
        for (int pass = 0; pass < 2; pass++) {
            for (uint64_t i = 0; i < count; i++) {
                uint8_t *r = ix + eoff + i * WPK_ENTRY_SIZE;
                uint64_t off = wpk_ld64(r + WPK_E_DATA_OFFSET_OFF), n = wpk_ld64(r + WPK_E_STORED_LEN_OFF);
                uint64_t xo = wpk_ld64(r + WPK_E_AUX_OFF), xn = wpk_ld64(r + WPK_E_AUX_LEN_OFF);
                uint32_t target = wpk_ld32(r + WPK_E_TARGET_OFF);
                int kind = r[WPK_E_KIND_OFF];
                if (pass == 0 && kind == WPACK_KIND_DATA && fits(off, n, len))
                    wpk_st64(r + WPK_E_CHECKSUM_OFF, XXH3_64bits(b + off, (size_t)n));
                else if (pass == 0 && kind == WPACK_KIND_SPLAT && fits(aoff, alen, ilen) &&
                         fits(xo, xn, alen))
                    wpk_st64(r + WPK_E_CHECKSUM_OFF, XXH3_64bits(ix + aoff + xo, (size_t)xn));
                else if (pass == 1 && kind == WPACK_KIND_ALIAS && target < count)
                    memmove(r + WPK_E_CHECKSUM_OFF,
                            ix + eoff + target * WPK_ENTRY_SIZE + WPK_E_CHECKSUM_OFF, 8);
            }
        }
    }
    wpk_st64(h + WPK_H_INDEX_CHECKSUM_OFF, XXH3_64bits(ix, (size_t)ilen));
}

/* b is a whole archive of len >= 2 * WPK_HEADER_SIZE bytes. With
 * copy_superblock_to_trailer the last 128 bytes become a copy of the
 * superblock (with the trailer magic) first. */
static inline void fix_checksums(uint8_t *b, size_t len, int copy_superblock_to_trailer)
{
    uint8_t *t = b + len - WPK_HEADER_SIZE;
    if (copy_superblock_to_trailer) {
        memcpy(t, b, WPK_HEADER_SIZE);
        memcpy(t, WPK_TRAILER_MAGIC, 8);
    }
    int has_trailer = memcmp(t, WPK_TRAILER_MAGIC, 8) == 0;
    fix_index(b, len, b);
    if (has_trailer)
        fix_index(b, len, t);
    wpk_st64(b + WPK_H_CHECKSUM_OFF, XXH3_64bits(b, WPK_H_CHECKSUM_OFF));
    if (has_trailer)
        wpk_st64(t + WPK_H_CHECKSUM_OFF, XXH3_64bits(t, WPK_H_CHECKSUM_OFF));
}

#endif
