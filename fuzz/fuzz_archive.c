/*
 * fuzz_archive.c - the reader: open the input with wpack_open_memory and, when
 * that succeeds, call every reader function on every entry, metadata record,
 * name-map record and stats record, then verify.
 *
 * Superblock, trailer and index are checksummed, which a mutator cannot
 * forge, so most mutations would only ever reach the checksum checks. Each
 * input is therefore opened up to three times:
 *   1. as it is;
 *   2. with every checksum recomputed (index, entries, superblock, trailer);
 *   3. as 2, after overwriting the trailer with a copy of the superblock.
 * An attacker can compute checksums too, so a crash in 2 or 3 is as real as
 * one in 1.
 *
 * Besides "no crash, no read outside the buffer", the walk checks what the
 * API promises (names are NUL-terminated, lookups find what the iteration
 * showed, views point inside the buffer, ...) and aborts when one breaks.
 */
#include <math.h>
#include <unistd.h>

#include "bytes.h"
#include "fix_checksums.h"
#include "fuzz.h"
#include "layout.h"
#include "wpack.h"

/* p..p+n lies inside buf..buf+len. */
static int inside(const void *p, uint64_t n, const uint8_t *buf, size_t len)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)buf;
    return a >= b && a - b <= len && n <= len - (a - b);
}

/* ------------------------------------------------------------- entries */

static int starts_with(const wpack_tensor *t, const char *prefix, size_t plen)
{
    return t->name_len >= plen && memcmp(t->name, prefix, plen) == 0;
}

/* wpack_prefix_range for the first plen bytes of entry i's name. */
static void check_prefix(const wpack_archive *ar, const wpack_tensor *t, size_t plen)
{
    char *prefix = malloc(plen + 1);
    if (!prefix)
        abort();
    memcpy(prefix, t->name, plen);
    prefix[plen] = 0;
    uint64_t first = 0, count = 0, n = wpack_count(ar);
    int rc = wpack_prefix_range(ar, prefix, &first, &count);
    FUZZ_ASSERT(rc == WPACK_OK && first <= t->index && t->index - first < count &&
                    count <= n - first,
                "entry %llu: prefix of %zu bytes gives rc %d, [%llu, +%llu)",
                (unsigned long long)t->index, plen, rc, (unsigned long long)first,
                (unsigned long long)count);
    /* The run is maximal: its ends match, the entries beside it do not. */
    wpack_tensor u;
    uint64_t probe[4] = {first, first + count - 1, first - 1, first + count};
    for (int k = 0; k < 4; k++) {
        if (probe[k] >= n)
            continue; /* first - 1 wrapped, or past the end */
        FUZZ_ASSERT(wpack_tensor_at(ar, probe[k], &u) == WPACK_OK, "tensor_at %llu",
                    (unsigned long long)probe[k]);
        FUZZ_ASSERT(starts_with(&u, prefix, plen) == (k < 2),
                    "prefix run [%llu, +%llu) wrong at entry %llu", (unsigned long long)first,
                    (unsigned long long)count, (unsigned long long)probe[k]);
    }
    free(prefix);
}

/* The first and last bytes through wpack_read (and, compressed, the bytes
 * around the first chunk boundary), against the view or the fill; a
 * compressed range must read the same twice. */
static void check_read(const wpack_archive *ar, const wpack_tensor *t)
{
    uint8_t got[64], again[64];
    uint64_t k = t->nbytes < sizeof got ? t->nbytes : sizeof got;
    uint64_t at[3] = {0, t->nbytes - k, 0};
    int ranges = 2;
    if (t->codec == WPACK_CODEC_ZSTD && t->chunk_size && t->nbytes - k > t->chunk_size - k / 2)
        at[ranges++] = t->chunk_size - k / 2;
    for (int e = 0; e < ranges; e++) {
        memset(got, 0xa5, sizeof got);
        int rc = wpack_read(ar, t->index, at[e], got, (size_t)k);
        if (t->codec == WPACK_CODEC_ZSTD) {
            FUZZ_ASSERT(rc == WPACK_OK || rc == WPACK_E_DECODE || rc == WPACK_E_NOMEM,
                        "entry %llu: compressed read rc %d", (unsigned long long)t->index, rc);
            if (rc == WPACK_OK) {
                rc = wpack_read(ar, t->index, at[e], again, (size_t)k);
                FUZZ_ASSERT(rc == WPACK_OK && memcmp(got, again, (size_t)k) == 0,
                            "entry %llu: two reads of %llu bytes at %llu differ",
                            (unsigned long long)t->index, (unsigned long long)k,
                            (unsigned long long)at[e]);
            }
            continue;
        }
        FUZZ_ASSERT(rc == WPACK_OK, "entry %llu: read of %llu bytes at %llu: rc %d",
                    (unsigned long long)t->index, (unsigned long long)k,
                    (unsigned long long)at[e], rc);
        for (uint64_t j = 0; j < k; j++) {
            uint64_t pos = at[e] + j;
            uint8_t want = t->data ? ((const uint8_t *)t->data)[pos]
                                   : ((const uint8_t *)t->fill)[pos % t->fill_size];
            FUZZ_ASSERT(got[j] == want, "entry %llu: byte %llu read wrong",
                        (unsigned long long)t->index, (unsigned long long)pos);
        }
    }
    /* Past the end, and an offset whose sum overflows. */
    FUZZ_ASSERT(wpack_read(ar, t->index, t->nbytes, got, 1) == WPACK_E_INVALID_ARGUMENT,
                "entry %llu: read past the end accepted", (unsigned long long)t->index);
    FUZZ_ASSERT(wpack_read(ar, t->index, UINT64_MAX, got, 2) == WPACK_E_INVALID_ARGUMENT,
                "entry %llu: read at an overflowing offset accepted", (unsigned long long)t->index);
}

/* Verify on read agrees with verify: an archive that verifies streams
 * every entry checked, the same bytes wpack_read gives. */
typedef struct {
    const wpack_archive *ar;
    uint64_t i, done;
    int same;
} stream_cmp;

static int compare_piece(void *user, const void *p, size_t n)
{
    stream_cmp *c = user;
    uint8_t *b = malloc(n ? n : 1);
    c->same = c->same && b && wpack_read(c->ar, c->i, c->done, b, n) == WPACK_OK &&
              memcmp(b, p, n) == 0;
    free(b);
    c->done += n;
    return 0;
}

static void check_verified_reads(const uint8_t *buf, size_t len, int vrc)
{
    wpack_archive *ar;
    if (wpack_open_memory(&ar, buf, len, WPACK_OPEN_VERIFY_READS) != WPACK_OK) {
        wpack_close(ar);
        return;
    }
    for (uint64_t i = 0; i < wpack_count(ar); i++) {
        /* bounded work per input: a valid 2^62-byte splat would stream for ever */
        wpack_tensor t;
        if (wpack_tensor_at(ar, i, &t) != WPACK_OK || t.nbytes > ((uint64_t)64 << 20))
            continue;
        if (t.data && t.nbytes) { /* a view of the last third, before anything checks the whole */
            const void *p = NULL;
            uint64_t off = t.nbytes - t.nbytes / 3;
            int prc = wpack_tensor_view_range(ar, i, off, t.nbytes - off, &p);
            FUZZ_ASSERT(prc == WPACK_OK ? p == (const uint8_t *)t.data + off : p == NULL,
                        "entry %llu: view of a part rc %d, pointer %p", (unsigned long long)i, prc, p);
            FUZZ_ASSERT(vrc != WPACK_OK || prc == WPACK_OK,
                        "entry %llu: verified archive, view of a part rc %d", (unsigned long long)i, prc);
        }
        stream_cmp c = {ar, i, 0, 1};
        int rc = wpack_read_stream(ar, i, compare_piece, &c, 0);
        FUZZ_ASSERT(vrc != WPACK_OK || (rc == WPACK_OK && c.same),
                    "entry %llu: verified archive, checked stream rc %d (same %d)",
                    (unsigned long long)i, rc, c.same);
        FUZZ_ASSERT(rc != WPACK_OK || wpack_verify_once(ar, i) == WPACK_OK,
                    "entry %llu: streamed OK, then its check fails", (unsigned long long)i);
    }
    wpack_close(ar);
}

static void walk_entries(const wpack_archive *ar, const uint8_t *buf, size_t len)
{
    uint64_t n = wpack_count(ar), first = 0, count = 0;
    wpack_tensor t, u;
    FUZZ_ASSERT(wpack_tensor_at(ar, n, &t) == WPACK_E_NOT_FOUND, "tensor_at(count) found");
    int rc = wpack_prefix_range(ar, "", &first, &count);
    FUZZ_ASSERT(n ? rc == WPACK_OK && first == 0 && count == n : rc == WPACK_E_NOT_FOUND,
                "prefix '' gives rc %d, [%llu, +%llu) of %llu", rc, (unsigned long long)first,
                (unsigned long long)count, (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++) {
        FUZZ_ASSERT(wpack_tensor_at(ar, i, &t) == WPACK_OK, "tensor_at %llu", (unsigned long long)i);
        FUZZ_ASSERT(t.index == i && t.name && inside(t.name, t.name_len + 1, buf, len) &&
                        strlen(t.name) == t.name_len,
                    "entry %llu: name not a NUL-terminated string in the file", (unsigned long long)i);
        FUZZ_ASSERT(t.kind >= WPACK_KIND_DATA && t.kind <= WPACK_KIND_EXTERNAL &&
                        t.rank <= WPACK_MAX_RANK &&
                        (t.codec == WPACK_CODEC_NONE || t.codec == WPACK_CODEC_ZSTD),
                    "entry %llu: kind %d rank %u codec %d", (unsigned long long)i, t.kind, t.rank,
                    t.codec);
        uint64_t ne = 1;
        for (unsigned d = 0; d < t.rank; d++)
            ne *= t.dims[d];
        FUZZ_ASSERT(ne == t.nelems, "entry %llu: nelems %llu, dims say %llu", (unsigned long long)i,
                    (unsigned long long)t.nelems, (unsigned long long)ne);
        /* chunk checksums (1.2): only on entries with bytes, of a size the
         * format takes (a zstd entry's: its zstd chunk) */
        uint64_t cs = wpack_tensor_chunk_size(ar, i);
        FUZZ_ASSERT(!cs || (t.kind != WPACK_KIND_SPLAT && cs >= 4096 &&
                            cs <= ((uint64_t)1 << WPK_CHUNK_LOG2_MAX) && (cs & (cs - 1)) == 0 &&
                            (t.codec == WPACK_CODEC_NONE || cs == t.chunk_size)),
                    "entry %llu: chunk checksum size %llu", (unsigned long long)i,
                    (unsigned long long)cs);
        const void *view = NULL;
        uint64_t view_len = 0;
        rc = wpack_tensor_view(ar, i, &view, &view_len);
        if (t.data) {
            FUZZ_ASSERT(inside(t.data, t.nbytes, buf, len) && inside(t.data, t.stored_length, buf, len),
                        "entry %llu: view of %llu bytes outside the buffer", (unsigned long long)i,
                        (unsigned long long)t.nbytes);
            FUZZ_ASSERT(rc == WPACK_OK && view == t.data && view_len == t.nbytes,
                        "entry %llu: tensor_view rc %d disagrees with the tensor's view",
                        (unsigned long long)i, rc);
        } else if (t.fill) {
            FUZZ_ASSERT(t.fill_size && inside(t.fill, t.fill_size, buf, len) &&
                            t.nbytes % t.fill_size == 0,
                        "entry %llu: fill of %zu bytes unusable", (unsigned long long)i, t.fill_size);
        } else {
            FUZZ_ASSERT(t.codec == WPACK_CODEC_ZSTD && t.chunk_size >= 4096 &&
                            (t.chunk_size & (t.chunk_size - 1)) == 0 &&
                            t.offset <= len && t.stored_length <= len - t.offset,
                        "entry %llu: no view, no fill, codec %d, chunk %u, bytes %llu+%llu",
                        (unsigned long long)i, t.codec, t.chunk_size, (unsigned long long)t.offset,
                        (unsigned long long)t.stored_length);
        }
        if (!t.data)
            FUZZ_ASSERT(rc == WPACK_E_NO_VIEW, "entry %llu: tensor_view rc %d without a view",
                        (unsigned long long)i, rc);
        if (t.kind == WPACK_KIND_ALIAS)
            FUZZ_ASSERT(t.alias_target < n && t.alias_target != i, "alias %llu: target %llu",
                        (unsigned long long)i, (unsigned long long)t.alias_target);

        rc = wpack_find(ar, t.name, &u);
        FUZZ_ASSERT(rc == WPACK_OK && u.index == i, "entry %llu: find by its name gives rc %d, %llu",
                    (unsigned long long)i, rc, (unsigned long long)u.index);
        check_prefix(ar, &t, t.name_len / 2);
        check_prefix(ar, &t, t.name_len);
        check_read(ar, &t);
    }
}

/* ---------------------------------------------------------- block dtypes */

static void walk_block_dtypes(const wpack_archive *ar, const uint8_t *buf, size_t len, uint64_t n)
{
    const char *name = NULL;
    const void *params = NULL;
    uint32_t elems = 0, bytes = 0;
    uint64_t plen = 0;
    for (uint64_t k = 0; k <= n; k++) {
        int rc = wpack_block_dtype_at(ar, k, &name, &elems, &bytes, &params, &plen);
        if (k == n) {
            FUZZ_ASSERT(rc == WPACK_E_NOT_FOUND, "block dtype %llu of %llu found",
                        (unsigned long long)k, (unsigned long long)n);
            break;
        }
        FUZZ_ASSERT(rc == WPACK_OK && name && inside(name, 1, buf, len) &&
                        inside(name, strlen(name) + 1, buf, len) && elems && bytes &&
                        (plen == 0 || inside(params, plen, buf, len)),
                    "block dtype %llu: rc %d, name, geometry %u/%u or %llu parameter bytes wrong",
                    (unsigned long long)k, rc, elems, bytes, (unsigned long long)plen);
    }
}

/* ------------------------------------------------------------ metadata */

static void check_string(const char *s, uint64_t count, const uint8_t *buf, size_t len,
                         const char *key)
{
    FUZZ_ASSERT(s && inside(s, count + 1, buf, len) && strlen(s) == count,
                "metadata '%.40s': string of %llu bytes not in the file or not terminated", key,
                (unsigned long long)count);
}

static void walk_meta(const wpack_archive *ar, const uint8_t *buf, size_t len)
{
    uint64_t n = wpack_meta_count(ar);
    wpack_meta m, f, e;
    FUZZ_ASSERT(wpack_meta_at(ar, n, &m) == WPACK_E_NOT_FOUND, "meta_at(count) found");
    for (uint64_t i = 0; i < n; i++) {
        FUZZ_ASSERT(wpack_meta_at(ar, i, &m) == WPACK_OK, "meta_at %llu", (unsigned long long)i);
        FUZZ_ASSERT(m.key && inside(m.key, 1, buf, len) && inside(m.key, strlen(m.key) + 1, buf, len),
                    "metadata %llu: key not in the file", (unsigned long long)i);
        FUZZ_ASSERT(wpack_meta_find(ar, m.key, &f) == WPACK_OK && f.key == m.key && f.type == m.type,
                    "metadata '%.40s': not found by its key", m.key);
        switch (m.type) {
        case WPACK_META_STRING:
            check_string(m.str, m.count, buf, len, m.key);
            break;
        case WPACK_META_BOOL:
            FUZZ_ASSERT(m.boolean == 0 || m.boolean == 1, "metadata '%.40s': bool %d", m.key,
                        m.boolean);
            break;
        case WPACK_META_BYTES:
            FUZZ_ASSERT(m.count == 0 || inside(m.bytes, m.count, buf, len),
                        "metadata '%.40s': bytes outside the file", m.key);
            break;
        case WPACK_META_ARRAY:
            FUZZ_ASSERT(m.elem_type >= WPACK_META_STRING && m.elem_type <= WPACK_META_BYTES,
                        "metadata '%.40s': array of type %d", m.key, m.elem_type);
            for (uint64_t j = 0; j < m.count; j++) {
                FUZZ_ASSERT(wpack_meta_elem(ar, &m, j, &e) == WPACK_OK && e.type == m.elem_type,
                            "metadata '%.40s': element %llu", m.key, (unsigned long long)j);
                if (e.type == WPACK_META_STRING)
                    check_string(e.str, e.count, buf, len, m.key);
                else if (e.type == WPACK_META_BYTES)
                    FUZZ_ASSERT(e.count == 0 || inside(e.bytes, e.count, buf, len),
                                "metadata '%.40s': element %llu bytes outside the file", m.key,
                                (unsigned long long)j);
                else if (e.type == WPACK_META_BOOL)
                    FUZZ_ASSERT(e.boolean == 0 || e.boolean == 1, "metadata '%.40s': bool %d",
                                m.key, e.boolean);
            }
            break;
        case WPACK_META_I64:
        case WPACK_META_F64:
            break;
        default:
            FUZZ_ASSERT(0, "metadata '%.40s': type %d", m.key, m.type);
        }
        FUZZ_ASSERT(wpack_meta_elem(ar, &m, m.type == WPACK_META_ARRAY ? m.count : 0, &e) ==
                        WPACK_E_INVALID_ARGUMENT,
                    "metadata '%.40s': element past the end given", m.key);
    }
}

/* ------------------------------------------------------------ name map */

static void walk_namemap(const wpack_archive *ar, const uint8_t *buf, size_t len)
{
    uint64_t n = wpack_namemap_count(ar), entry = 0;
    const char *other = NULL;
    wpack_tensor t;
    FUZZ_ASSERT(wpack_namemap_at(ar, n, &other, &entry) == WPACK_E_NOT_FOUND,
                "namemap_at(count) found");
    for (uint64_t i = 0; i < n; i++) {
        FUZZ_ASSERT(wpack_namemap_at(ar, i, &other, &entry) == WPACK_OK, "namemap_at %llu",
                    (unsigned long long)i);
        FUZZ_ASSERT(other && inside(other, 1, buf, len) &&
                        inside(other, strlen(other) + 1, buf, len) && entry < wpack_count(ar),
                    "name map %llu: name outside the file or entry %llu", (unsigned long long)i,
                    (unsigned long long)entry);
        int rc = wpack_find(ar, other, &t);
        FUZZ_ASSERT(rc == WPACK_OK && t.index == entry,
                    "name map '%.40s': find gives rc %d, entry %llu, not %llu", other, rc,
                    (unsigned long long)t.index, (unsigned long long)entry);
    }
}

/* --------------------------------------------------------------- stats */

static void walk_stats(const wpack_archive *ar, const uint8_t *buf, size_t len)
{
    uint64_t n = wpack_stats_count(ar);
    wpack_stats s, f;
    FUZZ_ASSERT(wpack_stats_at(ar, n, &s) == WPACK_E_NOT_FOUND, "stats_at(count) found");
    for (uint64_t i = 0; i < n; i++) {
        FUZZ_ASSERT(wpack_stats_at(ar, i, &s) == WPACK_OK, "stats_at %llu", (unsigned long long)i);
        FUZZ_ASSERT(s.key && inside(s.key, strlen(s.key) + 1, buf, len),
                    "stats %llu: key outside the file", (unsigned long long)i);
        FUZZ_ASSERT(wpack_stats_find(ar, s.key, s.kind, &f) == WPACK_OK && f.key == s.key,
                    "stats '%.40s' kind %d: not found by key and kind", s.key, s.kind);
        FUZZ_ASSERT((s.kind == WPACK_STATS_WEIGHT || s.kind == WPACK_STATS_ACTIVATION) &&
                        (s.granularity == WPACK_GRAN_TENSOR || s.granularity == WPACK_GRAN_CHANNEL) &&
                        s.channels >= 1,
                    "stats '%.40s': kind %d granularity %d channels %u", s.key, s.kind,
                    s.granularity, s.channels);
        FUZZ_ASSERT(s.min == wpack_stats_value(&s, WPACK_STAT_MIN, 0) &&
                        s.variance == wpack_stats_value(&s, WPACK_STAT_VARIANCE, 0),
                    "stats '%.40s': channel 0 fields differ from stats_value", s.key);
        for (uint32_t c = 0; c < s.channels; c++)
            for (int w = WPACK_STAT_MIN; w <= WPACK_STAT_VARIANCE; w++)
                FUZZ_ASSERT(isfinite(wpack_stats_value(&s, w, c)),
                            "stats '%.40s': value %d of channel %u not finite", s.key, w, c);
        FUZZ_ASSERT(isnan(wpack_stats_value(&s, WPACK_STAT_VARIANCE + 1, 0)) &&
                        isnan(wpack_stats_value(&s, -1, 0)) &&
                        isnan(wpack_stats_value(&s, WPACK_STAT_MIN, s.channels)),
                    "stats '%.40s': out-of-range value not NaN", s.key);
        double lo, hi, q, v;
        uint64_t cnt, sum = 0;
        for (uint32_t b = 0; b < s.hist_bins; b++) {
            wpack_stats_bin(&s, b, &lo, &hi, &cnt);
            FUZZ_ASSERT(isfinite(lo) && isfinite(hi) && lo < hi, "stats '%.40s': bin %u [%g, %g)",
                        s.key, b, lo, hi);
            sum += cnt;
        }
        FUZZ_ASSERT(s.hist_bins == 0 || sum == s.count,
                    "stats '%.40s': histogram counts sum to %llu, count %llu", s.key,
                    (unsigned long long)sum, (unsigned long long)s.count);
        wpack_stats_bin(&s, s.hist_bins, &lo, &hi, &cnt);
        FUZZ_ASSERT(isnan(lo) && isnan(hi) && cnt == 0, "stats '%.40s': bin past the end", s.key);
        for (uint32_t j = 0; j < s.percentile_count; j++) {
            wpack_stats_percentile(&s, j, &q, &v);
            FUZZ_ASSERT(q >= 0 && q <= 100 && isfinite(v), "stats '%.40s': percentile %u (%g, %g)",
                        s.key, j, q, v);
        }
        wpack_stats_percentile(&s, s.percentile_count, &q, &v);
        FUZZ_ASSERT(isnan(q) && isnan(v), "stats '%.40s': percentile past the end", s.key);
    }
}

/* ---------------------------------------------------------------- open */

/* A sharded set (a manifest) opens only from a file, since its shards are
 * found beside it: write the input to a fresh directory and open it there.
 * The shards it names are not there, so this exercises the manifest's
 * checks (reader/shards.c) up to opening the first shard. */
static char set_dir[4096], set_path[4200];

static void remove_set(void)
{
    if (set_path[0])
        unlink(set_path);
    if (set_dir[0])
        rmdir(set_dir);
    set_path[0] = set_dir[0] = 0;
}

static void open_as_file(const uint8_t *buf, size_t len)
{
    snprintf(set_dir, sizeof set_dir, "%s/wpack-fuzz-set-XXXXXX", fuzz_tmpdir());
    FUZZ_ASSERT(mkdtemp(set_dir) != NULL, "mkdtemp %s failed", set_dir);
    snprintf(set_path, sizeof set_path, "%s/set.wpack", set_dir);
    fuzz_cleanup = remove_set;
    FILE *f = fopen(set_path, "wb");
    FUZZ_ASSERT(f && fwrite(buf, 1, len, f) == len && fclose(f) == 0, "cannot write %s", set_path);
    wpack_archive *ar = NULL;
    int rc = wpack_open_file(&ar, set_path, 0);
    FUZZ_ASSERT(ar != NULL, "open_file returned no handle (rc %d)", rc);
    FUZZ_ASSERT(wpack_errcode(ar) == rc && (rc == WPACK_OK) == (wpack_errmsg(ar)[0] == 0),
                "open_file rc %d, handle says %d '%s'", rc, wpack_errcode(ar), wpack_errmsg(ar));
    if (rc == WPACK_OK) {
        uint32_t n = wpack_shard_count(ar);
        for (uint32_t k = 0; k <= n; k++) {
            const char *path = NULL;
            const wpack_archive *sh = NULL;
            int src = wpack_shard_at(ar, k, &path, &sh);
            FUZZ_ASSERT((src == WPACK_OK) == (k < n), "shard_at(%u) of %u: rc %d", k, n, src);
        }
    }
    wpack_close(ar);
    remove_set();
    fuzz_cleanup = NULL;
}

static void open_and_walk(const uint8_t *buf, size_t len)
{
    wpack_archive *ar = NULL;
    int rc = wpack_open_memory(&ar, buf, len, WPACK_OPEN_NO_VERIFY_READS);
    FUZZ_ASSERT(ar != NULL, "open returned no handle (rc %d)", rc);
    FUZZ_ASSERT(wpack_errcode(ar) == rc && strlen(wpack_errmsg(ar)) < 600 &&
                    (rc == WPACK_OK) == (wpack_errmsg(ar)[0] == 0),
                "open rc %d, handle says %d '%s'", rc, wpack_errcode(ar), wpack_errmsg(ar));
    FUZZ_ASSERT(strcmp(wpack_error_name(rc), "WPACK_E_UNKNOWN") != 0 && wpack_error_describe(rc),
                "open returned an unnamed code %d", rc);
    if (rc != WPACK_OK) {
        wpack_close(ar);
        if (rc == WPACK_E_SHARD)
            open_as_file(buf, len);
        return;
    }
    wpack_info info;
    wpack_get_info(ar, &info);
    FUZZ_ASSERT(info.file_length <= len && info.entry_count == wpack_count(ar) &&
                    info.metadata_count == wpack_meta_count(ar) &&
                    info.namemap_count == wpack_namemap_count(ar) &&
                    info.stats_count == wpack_stats_count(ar),
                "info disagrees with the counts");
    FUZZ_ASSERT(wpack_shard_count(ar) == 0, "a buffer has %u shards", wpack_shard_count(ar));
    walk_entries(ar, buf, len);
    walk_block_dtypes(ar, buf, len, info.block_dtype_count);
    walk_meta(ar, buf, len);
    walk_namemap(ar, buf, len);
    walk_stats(ar, buf, len);

    int vrc = fuzz_verify_all(ar);
    wpack_close(ar);
    check_verified_reads(buf, len, vrc);

    /* Opening with WPACK_OPEN_VERIFY must agree with open + verify. */
    rc = wpack_open_memory(&ar, buf, len, WPACK_OPEN_VERIFY);
    FUZZ_ASSERT((rc == WPACK_OK) == (vrc == WPACK_OK), "open with verify rc %d, verify_all rc %d",
                rc, vrc);
    wpack_close(ar);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_single_threaded();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *as_is = fuzz_copy(data, size);
    open_and_walk(as_is, size);
    if (size >= 2 * WPK_HEADER_SIZE && memcmp(data, WPK_SUPERBLOCK_MAGIC, 8) == 0) {
        uint8_t *fixed = fuzz_copy(data, size), *synced = fuzz_copy(data, size);
        fix_checksums(fixed, size, 0);
        fix_checksums(synced, size, 1);
        if (memcmp(fixed, as_is, size) != 0)
            open_and_walk(fixed, size);
        if (memcmp(synced, fixed, size) != 0 && memcmp(synced, as_is, size) != 0)
            open_and_walk(synced, size);
        free(fixed);
        free(synced);
    }
    free(as_is);
    return 0;
}
