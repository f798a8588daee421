/* index.c - open step 5: validate the whole index (spec: Mandatory rejections). */
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "reader.h"

static const char *const section_names[WPK_SECTION_COUNT] = {
    "entries", "extents", "dims", "strings", "aux", "dtypes", "metadata", "namemap", "stats",
};

int wpk_all_zero(const uint8_t *p, uint64_t n)
{
    /* 8 bytes a step: this runs on every entry's reserved field */
    uint64_t i = 0, acc = 0;
    for (; n - i >= 8; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        acc |= w;
    }
    for (; i < n; i++)
        acc |= p[i];
    return acc == 0;
}

int wpk_name_cmp(const uint8_t *a, uint64_t alen, const uint8_t *b, uint64_t blen)
{
    uint64_t n = alen < blen ? alen : blen;
    int c = n ? memcmp(a, b, (size_t)n) : 0;
    if (c)
        return c;
    return alen < blen ? -1 : alen > blen;
}

/* A string reference into the strings section: in bounds and followed by NUL. */
int wpk_string_ref(wpack_archive *ar, uint64_t off, uint64_t len, const char *what,
                      const uint8_t **out)
{
    uint64_t size = ar->sec_len[WPK_SEC_STRINGS];
    if (!wpk_in_bounds(off, len, size) || off + len >= size)
        return wpk_fail(ar, WPACK_E_BOUNDS, "%s: string at %llu+%llu outside the strings section",
                        what, (unsigned long long)off, (unsigned long long)len);
    const uint8_t *s = ar->sec[WPK_SEC_STRINGS] + off;
    if (s[len] != 0)
        return wpk_fail(ar, WPACK_E_BOUNDS, "%s: string at %llu is not NUL-terminated", what,
                        (unsigned long long)off);
    *out = s;
    return WPACK_OK;
}

/* A name field: string reference + name rule. */
int wpk_name_ref(wpack_archive *ar, uint64_t off, uint64_t len, const char *what,
                    const uint8_t **out)
{
    int rc = wpk_string_ref(ar, off, len, what, out);
    if (rc)
        return rc;
    const char *why = wpk_name_problem(*out, len);
    if (why) {
        char q[256];
        wpk_quote(q, sizeof q, (const char *)*out, (size_t)len);
        return wpk_fail(ar, WPACK_E_NAME, "%s '%s': %s", what, q, why);
    }
    return WPACK_OK;
}

int wpk_aux_ref(wpack_archive *ar, uint64_t off, uint64_t len, const char *what)
{
    if (!wpk_in_bounds(off, len, ar->sec_len[WPK_SEC_AUX]))
        return wpk_fail(ar, WPACK_E_BOUNDS, "%s: %llu bytes at aux offset %llu outside the aux section",
                        what, (unsigned long long)len, (unsigned long long)off);
    return WPACK_OK;
}

/* Sorted-and-unique check for a name of record i against record i-1. */
int wpk_order_check(wpack_archive *ar, const uint8_t *prev, uint64_t prev_len,
                       const uint8_t *cur, uint64_t cur_len, const char *what)
{
    int c = wpk_name_cmp(prev, prev_len, cur, cur_len);
    if (c < 0)
        return WPACK_OK;
    char q[256];
    wpk_quote(q, sizeof q, (const char *)cur, (size_t)cur_len);
    if (c == 0)
        return wpk_fail(ar, WPACK_E_DUPLICATE, "%s '%s' appears twice", what, q);
    return wpk_fail(ar, WPACK_E_UNSORTED, "%s '%s' is out of bytewise order", what, q);
}

static int check_sections(wpack_archive *ar, uint64_t entry_count, uint64_t data_count)
{
    const uint8_t *ix = ar->index;
    uint64_t ilen = ar->info.index_length;
    uint64_t cursor = WPK_INDEX_HEADER_SIZE;
    for (int s = 0; s < WPK_SECTION_COUNT; s++) {
        uint64_t off = wpk_ld64(ix + WPK_I_SECTIONS_OFF + 16 * s);
        uint64_t len = wpk_ld64(ix + WPK_I_SECTIONS_OFF + 16 * s + 8);
        if (off % 8 || off < cursor || !wpk_in_bounds(off, len, ilen))
            return wpk_fail(ar, WPACK_E_LAYOUT,
                            "index section %s at %llu+%llu misplaced (must be 8-aligned, after "
                            "%llu, inside %llu bytes)",
                            section_names[s], (unsigned long long)off, (unsigned long long)len,
                            (unsigned long long)cursor, (unsigned long long)ilen);
        ar->sec[s] = ix + off;
        ar->sec_len[s] = len;
        cursor = off + len;
    }
    uint64_t want = 0;
    if (!wpk_mul(entry_count, WPK_ENTRY_SIZE, &want) || ar->sec_len[WPK_SEC_ENTRIES] != want)
        return wpk_fail(ar, WPACK_E_LAYOUT, "entries section is %llu bytes, %llu entries need %llu",
                        (unsigned long long)ar->sec_len[WPK_SEC_ENTRIES],
                        (unsigned long long)entry_count, (unsigned long long)want);
    if (!wpk_mul(data_count, 4, &want) || ar->sec_len[WPK_SEC_EXTENTS] != want)
        return wpk_fail(ar, WPACK_E_LAYOUT, "extents section is %llu bytes, %llu data entries need %llu",
                        (unsigned long long)ar->sec_len[WPK_SEC_EXTENTS],
                        (unsigned long long)data_count, (unsigned long long)want);
    static const struct {
        int sec;
        uint32_t size;
        uint64_t limit;
    } recs[] = {
        {WPK_SEC_DIMS, 8, UINT64_MAX},
        {WPK_SEC_DTYPES, WPK_DTYPE_REC_SIZE, WPK_MAX_BLOCK_DTYPES},
        {WPK_SEC_METADATA, WPK_META_REC_SIZE, WPK_LIMIT_META},
        {WPK_SEC_NAMEMAP, WPK_NAMEMAP_REC_SIZE, WPK_LIMIT_ENTRIES},
        {WPK_SEC_STATS, WPK_STATS_REC_SIZE, WPK_LIMIT_STATS},
    };
    for (size_t k = 0; k < sizeof recs / sizeof recs[0]; k++) {
        uint64_t len = ar->sec_len[recs[k].sec];
        if (len % recs[k].size)
            return wpk_fail(ar, WPACK_E_LAYOUT, "%s section length %llu not a multiple of %u",
                            section_names[recs[k].sec], (unsigned long long)len, recs[k].size);
        if (len / recs[k].size > recs[k].limit)
            return wpk_fail(ar, WPACK_E_LIMIT, "%s section holds %llu records, limit %llu",
                            section_names[recs[k].sec], (unsigned long long)(len / recs[k].size),
                            (unsigned long long)recs[k].limit);
    }
    /* The gap bytes only now (13.1 step 5.4, M23): a section table that
     * breaks M21 or M22 is LAYOUT or LIMIT whatever its gaps hold. */
    cursor = WPK_INDEX_HEADER_SIZE;
    for (int s = 0; s < WPK_SECTION_COUNT; s++) {
        uint64_t off = (uint64_t)(ar->sec[s] - ix);
        if (!wpk_all_zero(ix + cursor, off - cursor))
            return wpk_fail(ar, WPACK_E_PADDING, "padding before index section %s is not zero",
                            section_names[s]);
        cursor = off + ar->sec_len[s];
    }
    /* A newer minor may put a new section after the last one we know. */
    if (ar->info.format_minor <= WPACK_FORMAT_MINOR && !wpk_all_zero(ix + cursor, ilen - cursor))
        return wpk_fail(ar, WPACK_E_PADDING, "padding after the last index section is not zero");
    ar->dims_count = ar->sec_len[WPK_SEC_DIMS] / 8;
    ar->info.block_dtype_count = ar->sec_len[WPK_SEC_DTYPES] / WPK_DTYPE_REC_SIZE;
    ar->info.metadata_count = ar->sec_len[WPK_SEC_METADATA] / WPK_META_REC_SIZE;
    ar->info.namemap_count = ar->sec_len[WPK_SEC_NAMEMAP] / WPK_NAMEMAP_REC_SIZE;
    ar->info.stats_count = ar->sec_len[WPK_SEC_STATS] / WPK_STATS_REC_SIZE;
    return WPACK_OK;
}

static int check_block_dtypes(wpack_archive *ar)
{
    for (uint64_t i = 0; i < ar->info.block_dtype_count; i++) {
        const uint8_t *r = wpk_rec(ar, WPK_SEC_DTYPES, i, WPK_DTYPE_REC_SIZE);
        const uint8_t *name;
        char what[64];
        wpk_fmt(what, sizeof what, "block dtype %llu", (unsigned long long)i);
        int rc = wpk_name_ref(ar, wpk_ld64(r + WPK_D_NAME_OFF), wpk_ld32(r + WPK_D_NAME_LEN_OFF), what,
                          &name);
        if (rc)
            return rc;
        if (!wpk_ld32(r + WPK_D_BLOCK_ELEMS_OFF) || !wpk_ld32(r + WPK_D_BLOCK_BYTES_OFF))
            return wpk_fail(ar, WPACK_E_DTYPE, "block dtype '%s': zero block size", name);
        if (ar->info.format_minor <= WPACK_FORMAT_MINOR && wpk_ld32(r + WPK_D_RESERVED_OFF))
            return wpk_fail(ar, WPACK_E_RESERVED, "block dtype '%s': reserved field not zero", name);
        rc = wpk_aux_ref(ar, wpk_ld64(r + WPK_D_PARAMS_OFF), wpk_ld64(r + WPK_D_PARAMS_LEN_OFF), what);
        if (rc)
            return rc;
    }
    return WPACK_OK;
}

int wpk_dtype_unit(const wpack_archive *ar, int dtype, uint64_t *unit_bytes, uint64_t *block_elems)
{
    if (dtype >= WPACK_DTYPE_BLOCK_BASE) {
        uint64_t k = (uint64_t)(dtype - WPACK_DTYPE_BLOCK_BASE);
        if (k >= ar->info.block_dtype_count)
            return 0;
        const uint8_t *r = wpk_rec(ar, WPK_SEC_DTYPES, k, WPK_DTYPE_REC_SIZE);
        *unit_bytes = wpk_ld32(r + WPK_D_BLOCK_BYTES_OFF);
        *block_elems = wpk_ld32(r + WPK_D_BLOCK_ELEMS_OFF);
        return 1;
    }
    size_t size = wpack_dtype_size(dtype);
    *unit_bytes = size;
    *block_elems = 1;
    return size != 0;
}

/* Fields of one entry record, decoded. */
typedef struct {
    const uint8_t *name;
    uint64_t name_len;
    int kind, dtype, codec;
    unsigned rank;
    uint64_t dims_index, offset, stored, checksum, aux_off, aux_len;
    uint32_t target;
} entry_fields;

static void decode_entry(const wpack_archive *ar, uint64_t i, entry_fields *e)
{
    const uint8_t *r = wpk_rec(ar, WPK_SEC_ENTRIES, i, WPK_ENTRY_SIZE);
    e->name = ar->sec[WPK_SEC_STRINGS] + wpk_ld64(r + WPK_E_NAME_OFF);
    e->name_len = wpk_ld32(r + WPK_E_NAME_LEN_OFF);
    e->kind = r[WPK_E_KIND_OFF];
    e->dtype = r[WPK_E_DTYPE_OFF];
    e->rank = r[WPK_E_RANK_OFF];
    e->codec = r[WPK_E_CODEC_OFF];
    e->dims_index = wpk_ld64(r + WPK_E_DIMS_OFF);
    e->offset = wpk_ld64(r + WPK_E_DATA_OFFSET_OFF);
    e->stored = wpk_ld64(r + WPK_E_STORED_LEN_OFF);
    e->checksum = wpk_ld64(r + WPK_E_CHECKSUM_OFF);
    e->aux_off = wpk_ld64(r + WPK_E_AUX_OFF);
    e->aux_len = wpk_ld64(r + WPK_E_AUX_LEN_OFF);
    e->target = wpk_ld32(r + WPK_E_TARGET_OFF);
}

/* The unit of the last dtype looked up (entries mostly share a few). */
typedef struct {
    int dtype;                  /* -1: none yet */
    uint64_t unit, block;
} dtype_memo;

/* The unit and block of a known dtype (M30), or 0. */
static int dtype_known(const wpack_archive *ar, int dtype, dtype_memo *m)
{
    uint64_t unit, block;
    if (dtype == m->dtype)
        return 1;
    if (!wpk_dtype_unit(ar, dtype, &unit, &block))
        return 0;
    *m = (dtype_memo){dtype, unit, block};
    return 1;
}

/* nelems and logical bytes of a validated-shape entry of a known dtype. */
static int entry_size(wpack_archive *ar, const entry_fields *e, uint64_t *nbytes,
                      const dtype_memo *m)
{
#define Q (wpk_quote(q, sizeof q, (const char *)e->name, (size_t)e->name_len), q)
    char q[256];
    const uint8_t *dims = ar->sec[WPK_SEC_DIMS] + e->dims_index * 8;
    uint64_t n = 1, unit = m->unit, block = m->block;
    for (unsigned d = 0; d < e->rank; d++)
        if (!wpk_mul(n, wpk_ld64(dims + 8 * d), &n))
            return wpk_fail(ar, WPACK_E_OVERFLOW, "tensor '%s': element count overflows", Q);
    /* every block dtype, even one of 1-element blocks: blocks run along
     * the last dim, which a rank-0 tensor lacks (spec 7.2, M35) */
    if (e->dtype >= WPACK_DTYPE_BLOCK_BASE) {
        if (e->rank == 0 || wpk_ld64(dims + 8 * (e->rank - 1)) % block)
            return wpk_fail(ar, WPACK_E_SHAPE,
                            "tensor '%s': last dim is not a multiple of the %llu-element block", Q,
                            (unsigned long long)block);
        n /= block;
    }
    if (!wpk_mul(n, unit, nbytes))
        return wpk_fail(ar, WPACK_E_OVERFLOW, "tensor '%s': byte size overflows", Q);
    return WPACK_OK;
#undef Q
}

static int check_entry(wpack_archive *ar, uint64_t i, const entry_fields *e, uint64_t *data_seen,
                       dtype_memo *memo)
{
    const uint8_t *r = wpk_rec(ar, WPK_SEC_ENTRIES, i, WPK_ENTRY_SIZE);
    char q[256];
#define Q (wpk_quote(q, sizeof q, (const char *)e->name, (size_t)e->name_len), q)
    if (e->kind < WPACK_KIND_DATA || e->kind > WPACK_KIND_EXTERNAL ||
        (e->kind == WPACK_KIND_EXTERNAL && !(ar->info.required_features & WPK_FEATURE_SHARDS)))
        return wpk_fail(ar, WPACK_E_KIND, "tensor '%s': unknown kind %d", Q, e->kind);
    /* the field checks in the spec's order (13.1 step 5.6): kind, dtype,
     * rank, codec, then reserved fields, then dims and sizes */
    if (!dtype_known(ar, e->dtype, memo))
        return wpk_fail(ar, WPACK_E_DTYPE, "tensor '%s': unknown dtype %d", Q, e->dtype);
    if (e->rank > WPACK_MAX_RANK)
        return wpk_fail(ar, WPACK_E_RANK, "tensor '%s': rank %u above the limit of 8", Q, e->rank);
    if (e->codec != WPACK_CODEC_NONE && e->codec != WPACK_CODEC_ZSTD)
        return wpk_fail(ar, WPACK_E_CODEC, "tensor '%s': unknown codec %d", Q, e->codec);
    if (e->codec == WPACK_CODEC_ZSTD && !(ar->info.required_features & WPK_FEATURE_ZSTD))
        return wpk_fail(ar, WPACK_E_CODEC, "tensor '%s': zstd codec without the zstd feature bit", Q);
    /* codec 1 on a splat or an external entry is a field its kind does not
     * allow: KIND, in the kind's own check below (spec 19 rule 1, M37). */
    /* 1.2: an uncompressed data entry's codec_param and bytes 72..79 are
     * its chunk checksums' size and place when the archive has them (19b) */
    int in_force = wpk_sums_in_force(ar) && e->kind == WPACK_KIND_DATA;
    int sums = in_force && e->codec == WPACK_CODEC_NONE && wpk_ld32(r + WPK_E_CODEC_PARAM_OFF);
    int zsums = in_force && e->codec == WPACK_CODEC_ZSTD && wpk_ld64(r + WPK_E_SUMS_OFF);
    if (ar->info.format_minor <= WPACK_FORMAT_MINOR && !sums && !zsums &&
        ((e->codec == WPACK_CODEC_NONE && wpk_ld32(r + WPK_E_CODEC_PARAM_OFF)) ||
         wpk_ld64(r + WPK_E_RESERVED_OFF) != 0))
        return wpk_fail(ar, WPACK_E_RESERVED, "tensor '%s': reserved fields not zero", Q);
    if (e->dims_index > ar->dims_count || e->rank > ar->dims_count - e->dims_index)
        return wpk_fail(ar, WPACK_E_BOUNDS, "tensor '%s': dims at %llu past the dims section", Q,
                        (unsigned long long)e->dims_index);
    uint64_t nbytes = 0;
    int rc = entry_size(ar, e, &nbytes, memo);
    if (rc)
        return rc;
    uint64_t data_start = ar->info.data_offset;
    uint64_t data_end = data_start + ar->info.data_length;
    switch (e->kind) {
    case WPACK_KIND_DATA:
        if (e->target || (e->codec == WPACK_CODEC_NONE && (e->aux_off || e->aux_len)))
            return wpk_fail(ar, WPACK_E_KIND, "tensor '%s': data entry with aux or target set", Q);
        if (e->codec == WPACK_CODEC_ZSTD &&
            (rc = wpk_check_seek_table(ar, Q, wpk_ld32(r + WPK_E_CODEC_PARAM_OFF), nbytes,
                                       e->stored, e->aux_off, e->aux_len)))
            return rc;
        /* a zstd entry's sums: one per chunk of its seek table (19b) */
        if (zsums && (rc = wpk_sums_check_ref(ar, Q, wpk_ld32(r + WPK_E_CODEC_PARAM_OFF), nbytes,
                                              wpk_ld64(r + WPK_E_SUMS_OFF))))
            return rc;
        if (e->codec == WPACK_CODEC_NONE && e->stored != nbytes)
            return wpk_fail(ar, WPACK_E_SIZE,
                            "tensor '%s': stored length %llu, shape and dtype need %llu", Q,
                            (unsigned long long)e->stored, (unsigned long long)nbytes);
        if (sums && (rc = wpk_sums_check_ref(ar, Q, wpk_ld32(r + WPK_E_CODEC_PARAM_OFF), e->stored,
                                             wpk_ld64(r + WPK_E_SUMS_OFF))))
            return rc;
        if (e->offset & (ar->info.alignment - 1)) /* a power of two (header check) */
            return wpk_fail(ar, WPACK_E_MISALIGNED,
                            "tensor '%s': offset %llu not a multiple of the alignment %u", Q,
                            (unsigned long long)e->offset, ar->info.alignment);
        if (e->offset < data_start || !wpk_in_bounds(e->offset - data_start, e->stored,
                                                     data_end - data_start))
            return wpk_fail(ar, WPACK_E_BOUNDS,
                            "tensor '%s': bytes %llu+%llu outside the data region %llu..%llu", Q,
                            (unsigned long long)e->offset, (unsigned long long)e->stored,
                            (unsigned long long)data_start, (unsigned long long)data_end);
        (*data_seen)++;
        break;
    case WPACK_KIND_SPLAT: {
        uint64_t unit, block;
        wpk_dtype_unit(ar, e->dtype, &unit, &block);
        if (e->offset || e->stored || e->target || e->codec)
            return wpk_fail(ar, WPACK_E_KIND, "tensor '%s': splat entry with data, codec or target set", Q);
        if (e->aux_len != unit)
            return wpk_fail(ar, WPACK_E_SIZE, "tensor '%s': splat fill is %llu bytes, dtype needs %llu",
                            Q, (unsigned long long)e->aux_len, (unsigned long long)unit);
        rc = wpk_aux_ref(ar, e->aux_off, e->aux_len, "splat fill");
        if (rc)
            return rc;
        if (wpk_xxh3(ar->sec[WPK_SEC_AUX] + e->aux_off, (size_t)e->aux_len) != e->checksum)
            return wpk_fail(ar, WPACK_E_CHECKSUM, "tensor '%s': splat fill checksum mismatch", Q);
        break;
    }
    case WPACK_KIND_EXTERNAL:
        /* Where the bytes are is checked against the shard (shards.c). */
        if (e->aux_off || e->aux_len || e->codec)
            return wpk_fail(ar, WPACK_E_KIND, "tensor '%s': external entry with aux or codec set", Q);
        if (e->stored != nbytes)
            return wpk_fail(ar, WPACK_E_SIZE,
                            "tensor '%s': stored length %llu, shape and dtype need %llu", Q,
                            (unsigned long long)e->stored, (unsigned long long)nbytes);
        break;
    case WPACK_KIND_ALIAS:
        /* codec 1: the chunk size is the target's (M38); codec 0: codec_param
         * is reserved, checked above under the minor rule (M9) */
        if (e->aux_off || e->aux_len ||
            (e->codec == WPACK_CODEC_ZSTD && wpk_ld32(r + WPK_E_CODEC_PARAM_OFF)))
            return wpk_fail(ar, WPACK_E_KIND, "tensor '%s': alias entry with aux or chunk size set", Q);
        break;
    }
    return WPACK_OK;
#undef Q
}

/* Aliases after all entries are known valid: the target must be a like non-alias. */
static int check_alias(wpack_archive *ar, uint64_t i, const entry_fields *e, uint64_t count)
{
    char q[256];
#define Q (wpk_quote(q, sizeof q, (const char *)e->name, (size_t)e->name_len), q)
    if (e->target >= count || e->target == i)
        return wpk_fail(ar, WPACK_E_ALIAS, "alias '%s': target %u is not another entry", Q,
                        e->target);
    entry_fields t;
    decode_entry(ar, e->target, &t);
    if (t.kind == WPACK_KIND_ALIAS)
        return wpk_fail(ar, WPACK_E_ALIAS, "alias '%s': target is itself an alias", Q);
    int same = t.dtype == e->dtype && t.codec == e->codec && t.rank == e->rank && t.offset == e->offset &&
               t.stored == e->stored && t.checksum == e->checksum &&
               memcmp(ar->sec[WPK_SEC_DIMS] + 8 * t.dims_index,
                      ar->sec[WPK_SEC_DIMS] + 8 * e->dims_index, 8 * (size_t)e->rank) == 0;
    if (!same)
        return wpk_fail(ar, WPACK_E_ALIAS,
                        "alias '%s': dtype, shape or extent differs from its target", Q);
    return WPACK_OK;
#undef Q
}

/* The extents list (13.1 step 7): every number first (M39), then the walk
 * (M40, M41), so a list that names a wrong entry is LAYOUT wherever a hole
 * or an overlap comes before it. */
static int check_extents(wpack_archive *ar, uint64_t count, uint64_t data_count)
{
    uint8_t *seen = calloc((size_t)(count / 8 + 1), 1);
    if (!seen)
        return wpk_fail(ar, WPACK_E_NOMEM, "out of memory checking %llu extents",
                        (unsigned long long)data_count);
    int rc = WPACK_OK;
    char q[256];
    entry_fields full;
    /* Q decodes the whole record of entry i (into its own copy) only for a message */
#define Q (decode_entry(ar, i, &full), \
           wpk_quote(q, sizeof q, (const char *)full.name, (size_t)full.name_len), q)
    for (uint64_t k = 0; k < data_count && rc == WPACK_OK; k++) {
        uint32_t i = wpk_ld32(ar->sec[WPK_SEC_EXTENTS] + 4 * k);
        if (i >= count)
            rc = wpk_fail(ar, WPACK_E_LAYOUT, "extent %llu names entry %u of %llu",
                          (unsigned long long)k, i, (unsigned long long)count);
        else if (wpk_rec(ar, WPK_SEC_ENTRIES, i, WPK_ENTRY_SIZE)[WPK_E_KIND_OFF] != WPACK_KIND_DATA ||
                 (seen[i / 8] >> (i % 8)) & 1)
            rc = wpk_fail(ar, WPACK_E_LAYOUT, "extent %llu: tensor '%s' is not a data entry or "
                                              "is listed twice", (unsigned long long)k, Q);
        else
            seen[i / 8] |= (uint8_t)(1u << (i % 8));
    }
    free(seen);
    uint64_t cursor = ar->info.data_offset, end = cursor;
    for (uint64_t k = 0; k < data_count && rc == WPACK_OK; k++) {
        uint32_t i = wpk_ld32(ar->sec[WPK_SEC_EXTENTS] + 4 * k);
        const uint8_t *r = wpk_rec(ar, WPK_SEC_ENTRIES, i, WPK_ENTRY_SIZE);
        uint64_t offset = wpk_ld64(r + WPK_E_DATA_OFFSET_OFF);
        if (offset != cursor) {
            rc = wpk_fail(ar, WPACK_E_OVERLAP,
                          offset < cursor
                              ? "tensor '%s': bytes at %llu overlap the previous extent (ends %llu)"
                              : "tensor '%s': hole before its bytes at %llu (previous extent ends %llu)",
                          Q, (unsigned long long)offset, (unsigned long long)cursor);
            break;
        }
        end = offset + wpk_ld64(r + WPK_E_STORED_LEN_OFF);
        /* In the data region (checked per entry), so align_up cannot overflow. */
        wpk_align_up(end, ar->info.alignment, &cursor);
    }
    if (rc == WPACK_OK && end != ar->info.data_offset + ar->info.data_length)
        rc = wpk_fail(ar, WPACK_E_LAYOUT, "data region ends at %llu, its last extent at %llu",
                      (unsigned long long)(ar->info.data_offset + ar->info.data_length),
                      (unsigned long long)end);
    return rc;
#undef Q
}

int wpk_check_index(wpack_archive *ar)
{
    uint64_t ioff = ar->info.index_offset, ilen = ar->info.index_length;
    if (!ar->index) { /* a file's index was read at step 1; a buffer's is in place */
        if (!wpk_in_bounds(ioff, ilen, ar->len))
            return wpk_fail(ar, WPACK_E_TRUNCATED, "index at %llu+%llu past the end of the file",
                            (unsigned long long)ioff, (unsigned long long)ilen);
        ar->index = ar->base + ioff;
    }
    const uint8_t *ix = ar->index;
    if (wpk_xxh3(ix, (size_t)ilen) != ar->info.index_checksum)
        return wpk_fail(ar, WPACK_E_INDEX_CHECKSUM, "index checksum mismatch");
    if (memcmp(ix, WPK_INDEX_MAGIC, 8) != 0)
        return wpk_fail(ar, WPACK_E_LAYOUT, "index magic missing at offset %llu",
                        (unsigned long long)ioff);
    if (wpk_ld32(ix + WPK_I_HEADER_SIZE_OFF) != WPK_INDEX_HEADER_SIZE ||
        wpk_ld32(ix + WPK_I_ENTRY_SIZE_OFF) != WPK_ENTRY_SIZE)
        return wpk_fail(ar, WPACK_E_LAYOUT, "index header size %u / entry size %u, must be 256 / 80",
                        wpk_ld32(ix + WPK_I_HEADER_SIZE_OFF), wpk_ld32(ix + WPK_I_ENTRY_SIZE_OFF));
    uint64_t count = wpk_ld64(ix + WPK_I_ENTRY_COUNT_OFF);
    uint64_t data_count = wpk_ld64(ix + WPK_I_DATA_ENTRY_COUNT_OFF);
    if (count != ar->info.entry_count)
        return wpk_fail(ar, WPACK_E_LAYOUT, "index holds %llu entries, superblock says %llu",
                        (unsigned long long)count, (unsigned long long)ar->info.entry_count);
    if (count > WPK_LIMIT_ENTRIES)
        return wpk_fail(ar, WPACK_E_LIMIT, "%llu entries, limit %llu", (unsigned long long)count,
                        (unsigned long long)WPK_LIMIT_ENTRIES);
    if (data_count > count)
        return wpk_fail(ar, WPACK_E_LAYOUT, "%llu data entries of %llu entries",
                        (unsigned long long)data_count, (unsigned long long)count);
    /* its reserved bytes after its sizes and counts (13.1 step 5.2: M17-M20, then M9) */
    if (ar->info.format_minor <= WPACK_FORMAT_MINOR &&
        !wpk_all_zero(ix + WPK_I_RESERVED_OFF, WPK_INDEX_HEADER_SIZE - WPK_I_RESERVED_OFF))
        return wpk_fail(ar, WPACK_E_RESERVED, "index header reserved bytes not zero");
    int rc = check_sections(ar, count, data_count);
    if (rc == WPACK_OK)
        rc = check_block_dtypes(ar);
    if (rc)
        return rc;

    uint64_t data_seen = 0, aliases = 0;
    dtype_memo memo = {-1, 0, 0};
    const uint8_t *prev = NULL;
    uint64_t prev_len = 0;
    for (uint64_t i = 0; i < count; i++) {
        const uint8_t *r = wpk_rec(ar, WPK_SEC_ENTRIES, i, WPK_ENTRY_SIZE);
        const uint8_t *name;
        uint64_t name_len = wpk_ld32(r + WPK_E_NAME_LEN_OFF);
        rc = wpk_name_ref(ar, wpk_ld64(r + WPK_E_NAME_OFF), name_len, "tensor name", &name);
        if (rc)
            return rc;
        /* in order: the comparison inline, wpk_order_check for the message */
        if (prev && wpk_name_cmp(prev, prev_len, name, name_len) >= 0 &&
            (rc = wpk_order_check(ar, prev, prev_len, name, name_len, "tensor")))
            return rc;
        prev = name;
        prev_len = name_len;
        entry_fields e;
        decode_entry(ar, i, &e);
        if ((rc = check_entry(ar, i, &e, &data_seen, &memo)))
            return rc;
        aliases += e.kind == WPACK_KIND_ALIAS;
    }
    /* aliases once every entry is known valid (their targets may come later) */
    for (uint64_t i = 0; aliases && i < count; i++) {
        entry_fields e;
        decode_entry(ar, i, &e);
        if (e.kind == WPACK_KIND_ALIAS && (rc = check_alias(ar, i, &e, count)))
            return rc;
    }
    if (data_seen != data_count)
        return wpk_fail(ar, WPACK_E_LAYOUT, "%llu data entries, index header says %llu",
                        (unsigned long long)data_seen, (unsigned long long)data_count);
    if ((rc = check_extents(ar, count, data_count)))
        return rc;
    if ((rc = wpk_check_meta(ar)) || (rc = wpk_check_namemap(ar)) || (rc = wpk_check_stats(ar)))
        return rc;
    return WPACK_OK;
}

