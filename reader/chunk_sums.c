/* chunk_sums.c - chunk checksums (spec 19b, format 1.2): an uncompressed
 * data entry may carry one XXH3-64 per chunk of 2^codec_param of its
 * stored bytes, so that a part of it is checked by hashing (or fetching)
 * only the chunks that hold it, not the whole entry: the rows one host of
 * a tensor-parallel job loads from a 4 GB embedding, over the network. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "reader.h"

int wpk_sums_in_force(const wpack_archive *ar)
{
    return ar->info.format_minor >= 2 && (ar->info.optional_features & WPK_OPT_CHUNK_SUMS);
}

int wpk_sums_check_ref(wpack_archive *ar, const char *q, uint32_t log2, uint64_t stored,
                       uint64_t off)
{
    if (log2 < WPK_CHUNK_LOG2_MIN)
        return wpk_fail(ar, WPACK_E_CODEC, "tensor '%s': chunk checksum size 2^%u below 4 KiB", q,
                        log2);
    if (log2 > WPK_CHUNK_LOG2_MAX) /* a whole chunk is hashed to check any byte of it */
        return wpk_fail(ar, WPACK_E_LIMIT, "tensor '%s': chunk checksum size 2^%u above the limit "
                        "of 2^%u", q, log2, WPK_CHUNK_LOG2_MAX);
    uint64_t count = wpk_chunk_count(stored, log2);
    char what[300];
    wpk_fmt(what, sizeof what, "tensor '%s': chunk checksums", q);
    return wpk_aux_ref(ar, off, 8 * count, what); /* count < 2^52: 8 * count fits */
}

int wpk_entry_sums(const wpack_archive *ar, const uint8_t *rec, wpk_sums *s)
{
    uint32_t log2 = wpk_ld32(rec + WPK_E_CODEC_PARAM_OFF);
    uint64_t off = wpk_ld64(rec + WPK_E_SUMS_OFF);
    int codec = rec[WPK_E_CODEC_OFF];
    if (!wpk_sums_in_force(ar) || rec[WPK_E_KIND_OFF] != WPACK_KIND_DATA ||
        (codec == WPACK_CODEC_NONE ? !log2 : !off))
        return 0;
    uint64_t stored = wpk_ld64(rec + WPK_E_STORED_LEN_OFF);
    s->log2 = log2;
    s->codec = codec;
    if (codec == WPACK_CODEC_NONE) {
        s->count = wpk_chunk_count(stored, log2);
        s->stored = stored;
    } else { /* one per zstd chunk (the seek table's ends); the logical size: the caller's */
        s->count = (wpk_ld64(rec + WPK_E_AUX_LEN_OFF) - 8) / 8;
        s->stored = 0;
    }
    s->at = ar->sec[WPK_SEC_AUX] + off;
    return 1;
}

int wpk_sums_of(const wpack_archive *ar, const wpack_tensor *t, const wpack_archive **holder,
                wpk_sums *s)
{
    const uint8_t *r = wpk_owner_rec(ar, t);
    const wpack_archive *h = wpk_holder(ar, t);
    if (!h)
        return 0;
    if (h != ar) { /* an external entry: its shard's data entry of the same name */
        wpack_tensor st;
        if (wpack_find(h, wpk_str(ar, wpk_ld64(r + WPK_E_NAME_OFF)), &st) != WPACK_OK)
            return 0;
        r = wpk_rec(h, WPK_SEC_ENTRIES, st.index, WPK_ENTRY_SIZE);
    }
    *holder = h;
    if (!wpk_entry_sums(h, r, s))
        return 0;
    if (s->codec != WPACK_CODEC_NONE) /* its chunks cut the logical bytes */
        s->stored = t->nbytes;
    return 1;
}

uint64_t wpack_tensor_chunk_size(const wpack_archive *ar, uint64_t i)
{
    if (!ar || i >= ar->info.entry_count)
        return 0;
    wpack_tensor t;
    wpk_fill_tensor(ar, i, &t);
    const wpack_archive *h;
    wpk_sums s;
    return wpk_sums_of(ar, &t, &h, &s) ? (uint64_t)1 << s.log2 : 0;
}

static uint64_t chunk_sum(const wpk_sums *s, uint64_t k)
{
    return wpk_ld64(s->at + 8 * k);
}

/* Bytes [*a, *b) of chunk k. */
static void chunk_span(const wpk_sums *s, uint64_t k, uint64_t *a, uint64_t *b)
{
    *a = k << s->log2;
    *b = *a + ((uint64_t)1 << s->log2) < s->stored ? *a + ((uint64_t)1 << s->log2) : s->stored;
}

static int bad_chunk(const wpack_archive *ar, const wpack_tensor *t, const wpk_sums *s, uint64_t k,
                     uint64_t got, const char *how)
{
    char q[768];
    uint64_t a, b;
    chunk_span(s, k, &a, &b);
    wpk_entry_label(ar, t, q, sizeof q);
    /* bad bytes are bad for every later call too, whole or part */
    wpk_checked_set(ar, wpk_owner_of(t), WPACK_E_CHECKSUM);
    return wpk_fail((wpack_archive *)ar, WPACK_E_CHECKSUM,
                    "%s: chunk %llu (bytes %llu..%llu) %s%016llx, its chunk "
                    "checksum is %016llx", q, (unsigned long long)k, (unsigned long long)a,
                    (unsigned long long)b, how, (unsigned long long)got,
                    (unsigned long long)chunk_sum(s, k));
}

/* ------------------------------------------------ chunks checked before */

/* A set of the addresses of mapped chunks that matched their checksums
 * (open addressing; the key is the chunk's first byte's address + 1). Its
 * memory is bounded: at WPK_MARKS_MAX slots it is emptied and starts over
 * (the chunks are hashed again: correct, only slower). Bytes of a mapping
 * are the open file's, as for the per-entry marks (read.c): checked once
 * per open. */
#define WPK_MARKS_MAX ((size_t)1 << 16)

struct wpk_chunk_marks {
    pthread_mutex_t lock;
    uintptr_t *slot;        /* NULL until the first mark */
    size_t used;
};

int wpk_chunk_marks_new(wpack_archive *ar)
{
    if (!(ar->marks = calloc(1, sizeof *ar->marks)))
        return WPACK_E_NOMEM;
    pthread_mutex_init(&ar->marks->lock, NULL);
    return WPACK_OK;
}

void wpk_chunk_marks_free(wpack_archive *ar)
{
    if (!ar->marks)
        return;
    pthread_mutex_destroy(&ar->marks->lock);
    free(ar->marks->slot);
    free(ar->marks);
    ar->marks = NULL;
}

static size_t mark_home(uintptr_t key)
{
    uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 48) & (WPK_MARKS_MAX - 1);
}

/* 1 when the chunk at p was marked; with set, mark it (0 returned). */
static int marked(struct wpk_chunk_marks *m, const uint8_t *p, int set)
{
    if (!m)
        return 0;
    uintptr_t key = (uintptr_t)p + 1;
    int hit = 0;
    pthread_mutex_lock(&m->lock);
    if (!m->slot && set)
        m->slot = calloc(WPK_MARKS_MAX, sizeof *m->slot);
    if (m->slot) {
        if (set && m->used >= WPK_MARKS_MAX / 4 * 3) { /* full enough: start over */
            memset(m->slot, 0, WPK_MARKS_MAX * sizeof *m->slot);
            m->used = 0;
        }
        size_t i = mark_home(key);
        while (m->slot[i] && m->slot[i] != key)
            i = (i + 1) & (WPK_MARKS_MAX - 1);
        hit = m->slot[i] == key;
        if (set && !hit) {
            m->slot[i] = key;
            m->used++;
        }
    }
    pthread_mutex_unlock(&m->lock);
    return hit;
}

int wpk_sums_check_mapped(const wpack_archive *ar, const wpack_tensor *t, const wpk_sums *s,
                          const uint8_t *data, uint64_t offset, size_t n)
{
    if (!n)
        return WPACK_OK;
    for (uint64_t k = offset >> s->log2; k <= (offset + n - 1) >> s->log2; k++) {
        uint64_t a, b;
        chunk_span(s, k, &a, &b);
        if (marked(ar->marks, data + a, 0))
            continue;
        uint64_t got = wpk_xxh3(data + a, (size_t)(b - a));
        if (got != chunk_sum(s, k))
            return bad_chunk(ar, t, s, k, got, "hashes to ");
        marked(ar->marks, data + a, 1);
    }
    return WPACK_OK;
}

/* Chunks [k0, k1] of t's stored bytes into buf (buf[0] is chunk k0's first
 * byte), each checked; a chunk that fails is fetched once more (the
 * source told to forget its copy first), then WPACK_E_CHECKSUM. */
static int fetch_chunks(const wpack_archive *ar, const wpack_tensor *t, const wpack_archive *h,
                        const wpk_sums *s, uint64_t k0, uint64_t k1, uint8_t *buf)
{
    char q[256], msg[400] = "";
    uint64_t a0, b0, a1, b1;
    chunk_span(s, k0, &a0, &b0);
    chunk_span(s, k1, &a1, &b1);
    int rc = h->src.read(h->src.user, t->offset + a0, buf, (size_t)(b1 - a0), msg, sizeof msg);
    for (uint64_t k = k0; rc == WPACK_OK && k <= k1; k++) {
        uint64_t a, b;
        chunk_span(s, k, &a, &b);
        uint8_t *p = buf + (a - a0);
        uint64_t got = wpk_xxh3(p, (size_t)(b - a));
        if (got == chunk_sum(s, k))
            continue;
        if (h->src.forget) /* a cached copy may be what is wrong: fetch afresh */
            h->src.forget(h->src.user, t->offset + a, b - a);
        if ((rc = h->src.read(h->src.user, t->offset + a, p, (size_t)(b - a), msg, sizeof msg)))
            break;
        if ((got = wpk_xxh3(p, (size_t)(b - a))) != chunk_sum(s, k))
            return bad_chunk(ar, t, s, k, got,
                             "as fetched twice (the source serves other bytes than the archive it "
                             "opened) hashes to ");
    }
    if (rc) {
        wpk_quote(q, sizeof q, t->name, t->name_len);
        return wpk_fail((wpack_archive *)ar, rc, "tensor '%s': %s", q,
                        *msg ? msg : wpack_error_describe(rc));
    }
    return WPACK_OK;
}

/* The first or last chunk of a read, when the read covers only part of
 * it: through a buffer of one chunk, then the part copied out. */
static int edge_chunk(const wpack_archive *ar, const wpack_tensor *t, const wpack_archive *h,
                      const wpk_sums *s, uint64_t k, uint64_t offset, uint8_t *dst, size_t n)
{
    uint64_t a, b;
    chunk_span(s, k, &a, &b);
    uint8_t *buf = malloc((size_t)(b - a));
    if (!buf) {
        char q[256];
        wpk_quote(q, sizeof q, t->name, t->name_len);
        return wpk_fail((wpack_archive *)ar, WPACK_E_NOMEM, "tensor '%s': out of memory", q);
    }
    int rc = fetch_chunks(ar, t, h, s, k, k, buf);
    if (rc == WPACK_OK) {
        uint64_t from = offset > a ? offset : a, to = offset + n < b ? offset + n : b;
        memcpy(dst + (from - offset), buf + (from - a), (size_t)(to - from));
    }
    free(buf);
    return rc;
}

int wpk_sums_fetch(const wpack_archive *ar, const wpack_tensor *t, const wpack_archive *h,
                   const wpk_sums *s, uint64_t offset, void *dst, size_t n)
{
    if (!n)
        return WPACK_OK;
    uint8_t *out = dst;
    uint64_t k0 = offset >> s->log2, k1 = (offset + n - 1) >> s->log2;
    uint64_t a0, b0, a1, b1;
    chunk_span(s, k0, &a0, &b0);
    chunk_span(s, k1, &a1, &b1);
    int first_whole = a0 == offset && (b0 <= offset + n);
    int last_whole = b1 == offset + n;
    /* the chunks the read covers whole: [first, end) */
    uint64_t first = first_whole ? k0 : k0 + 1, end = last_whole ? k1 + 1 : k1;
    int rc = WPACK_OK;
    if (!first_whole)
        rc = edge_chunk(ar, t, h, s, k0, offset, out, n);
    if (rc == WPACK_OK && k1 != k0 && !last_whole)
        rc = edge_chunk(ar, t, h, s, k1, offset, out, n);
    /* fetched straight into dst, in one request the source splits over
     * its connections */
    if (rc == WPACK_OK && first < end)
        rc = fetch_chunks(ar, t, h, s, first, end - 1, out + ((first << s->log2) - offset));
    return rc;
}

void wpk_sums_cursor_init(wpk_sums_cursor *c, const wpk_sums *s, wpk_hasher *h)
{
    memset(c, 0, sizeof *c);
    c->s = *s;
    c->h = h;
    c->bad = UINT64_MAX;
    wpk_hasher_reset(h);
}

void wpk_sums_cursor_feed(wpk_sums_cursor *c, const void *data, size_t n)
{
    const uint8_t *p = data;
    while (n && c->k < c->s.count) {
        uint64_t a, b;
        chunk_span(&c->s, c->k, &a, &b);
        size_t take = b - a - c->fill < n ? (size_t)(b - a - c->fill) : n;
        wpk_hasher_update(c->h, p, take);
        c->fill += take;
        p += take;
        n -= take;
        if (c->fill == b - a) {
            uint64_t got = wpk_hasher_digest(c->h);
            if (got != chunk_sum(&c->s, c->k) && c->bad == UINT64_MAX) {
                c->bad = c->k;
                c->got = got;
            }
            wpk_hasher_reset(c->h);
            c->fill = 0;
            c->k++;
        }
    }
}

int wpk_sums_cursor_end(const wpk_sums_cursor *c, const wpack_archive *ar, const wpack_tensor *t)
{
    return c->bad == UINT64_MAX ? WPACK_OK : bad_chunk(ar, t, &c->s, c->bad, c->got, "hashes to ");
}

/* ------------------------------------------------ zstd entries */

/* Chunk k decoded into tmp (its whole logical size), from the mapping or
 * from part (the fetched stored bytes from part_off on); *got: its XXH3.
 * WPACK_E_DECODE when it does not decode to its size. */
static int decode_chunk(const wpack_archive *ar, const uint8_t *rec, const wpk_sums *s, uint64_t k,
                        const uint8_t *part, uint64_t part_off, uint8_t *tmp, uint64_t *got)
{
    uint64_t a, b;
    chunk_span(s, k, &a, &b);
    int rc = part ? wpk_read_zstd_part(ar, rec, part, part_off, s->stored, a, tmp, (size_t)(b - a))
                  : wpk_read_zstd(ar, rec, s->stored, a, tmp, (size_t)(b - a));
    if (rc == WPACK_OK)
        *got = wpk_xxh3(tmp, (size_t)(b - a));
    return rc;
}

/* The part of chunk k (decoded in tmp) that [offset, +n) holds, to dst. */
static void copy_part(const wpk_sums *s, uint64_t k, const uint8_t *tmp, uint64_t offset,
                      uint8_t *dst, size_t n)
{
    uint64_t a, b;
    chunk_span(s, k, &a, &b);
    uint64_t lo = offset > a ? offset : a, hi = offset + n < b ? offset + n : b;
    memcpy(dst + (lo - offset), tmp + (lo - a), (size_t)(hi - lo));
}

int wpk_sums_read_zstd(const wpack_archive *ar, const wpack_tensor *t, const wpack_archive *h,
                       const wpk_sums *s, uint64_t offset, void *dst, size_t n)
{
    if (!n)
        return WPACK_OK;
    char q[256];
    wpk_quote(q, sizeof q, t->name, t->name_len);
    const uint8_t *rec = wpk_owner_rec(ar, t);
    uint64_t k0 = offset >> s->log2, k1 = (offset + n - 1) >> s->log2, a, b, got = 0;
    chunk_span(s, k0, &a, &b);
    size_t cap = (size_t)(k0 == k1 ? b - a : (uint64_t)1 << s->log2);
    uint8_t *tmp = malloc(cap ? cap : 1), *part = NULL;
    uint64_t from = 0, to = 0;
    int fetched = wpk_unmapped(h), rc = WPACK_OK;
    if (fetched) { /* the stored bytes of those chunks only */
        wpk_zstd_stored_span(ar, rec, s->stored, offset, n, &from, &to);
        part = tmp ? malloc((size_t)(to - from) ? (size_t)(to - from) : 1) : NULL;
    }
    if (!tmp || (fetched && !part)) {
        free(tmp);
        return wpk_fail((wpack_archive *)ar, WPACK_E_NOMEM, "tensor '%s': out of memory", q);
    }
    uint64_t k = k0;
    for (int attempt = 0; fetched && attempt < 2; attempt++) {
        char msg[400] = "";
        if (attempt && h->src.forget) /* a cached copy may be what is wrong */
            h->src.forget(h->src.user, t->offset + from, to - from);
        if ((rc = h->src.read(h->src.user, t->offset + from, part, (size_t)(to - from), msg,
                              sizeof msg))) {
            rc = wpk_fail((wpack_archive *)ar, rc, "tensor '%s': %s", q,
                          *msg ? msg : wpack_error_describe(rc));
            break;
        }
        for (k = k0; k <= k1; k++) {
            if ((rc = decode_chunk(ar, rec, s, k, part, from, tmp, &got)) || got != chunk_sum(s, k))
                break;
            copy_part(s, k, tmp, offset, dst, n);
        }
        if (k > k1 || (rc && rc != WPACK_E_DECODE)) /* all good, or no answer from the bytes */
            break;
    }
    /* mapped: decoded and hashed at each read (the decoding costs more
     * than the hash: no marks) */
    if (!fetched)
        for (k = k0; rc == WPACK_OK && k <= k1; k++) {
            if ((rc = decode_chunk(ar, rec, s, k, NULL, 0, tmp, &got)) == WPACK_OK) {
                if (got != chunk_sum(s, k))
                    break;
                copy_part(s, k, tmp, offset, dst, n);
            }
        }
    free(part);
    free(tmp);
    if (rc == WPACK_E_DECODE)
        return wpk_read_failed(ar, t, rc);
    if (rc == WPACK_OK && k <= k1) /* chunk k decoded to other bytes (twice, fetched) */
        return bad_chunk(ar, t, s, k, got, fetched ? "as fetched twice decodes to bytes hashing to "
                                                   : "decodes to bytes hashing to ");
    return rc;
}
