/*
 * emit_inline.c - what --emit inline adds to the emitter: a bare-identifier
 * resource key for each entry (unique among the file's keys), and after the
 * document a {-# dialect_resources #-} section whose blobs stream from the
 * archive as hex (resolver/README.md, "inline"). A splat entry needs no
 * blob: its value is the splat itself, dense<"0xFILL"> (dense<true> or
 * dense<false> for i1), a few bytes whatever the tensor's size.
 */
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "emit_int.h"
#include "internal.h"

/* Blob alignment written into inline resources (power of two). */
#define INLINE_ALIGNMENT 64u

typedef struct {
    char **slots;
    size_t cap, n;
} key_set;

static uint64_t hash_str(const char *s, size_t n)
{
    return wpk_xxh3(s, n);
}

static int set_has(const key_set *k, const char *s, size_t n)
{
    if (!k->cap)
        return 0;
    for (size_t i = hash_str(s, n) & (k->cap - 1);; i = (i + 1) & (k->cap - 1)) {
        if (!k->slots[i])
            return 0;
        if (strlen(k->slots[i]) == n && memcmp(k->slots[i], s, n) == 0)
            return 1;
    }
}

/* Insert a heap string the set takes over; 0 on allocation failure. */
static int set_add(key_set *k, char *s)
{
    if ((k->n + 1) * 2 > k->cap) {
        size_t c = k->cap ? k->cap * 2 : 64;
        char **ns = calloc(c, sizeof *ns);
        if (!ns)
            return 0;
        for (size_t i = 0; i < k->cap; i++) {
            if (!k->slots[i])
                continue;
            size_t j = hash_str(k->slots[i], strlen(k->slots[i])) & (c - 1);
            while (ns[j])
                j = (j + 1) & (c - 1);
            ns[j] = k->slots[i];
        }
        free(k->slots);
        k->slots = ns;
        k->cap = c;
    }
    size_t j = hash_str(s, strlen(s)) & (k->cap - 1);
    while (k->slots[j])
        j = (j + 1) & (k->cap - 1);
    k->slots[j] = s;
    k->n++;
    return 1;
}

static void set_free(key_set *k)
{
    for (size_t i = 0; i < k->cap; i++)
        free(k->slots[i]);
    free(k->slots);
}

/* A bare-identifier resource key for an entry name: [A-Za-z0-9_.] kept,
 * other bytes become '_', a leading digit or '.' gets "w_" in front;
 * "_1", "_2", ... make it unique. The set owns the result. */
static const char *make_key(key_set *k, const char *name)
{
    size_t n = strlen(name);
    char *s = malloc(n + 32);
    if (!s)
        return NULL;
    size_t o = 0;
    char c0 = name[0];
    if (!((c0 >= 'a' && c0 <= 'z') || (c0 >= 'A' && c0 <= 'Z') || c0 == '_')) {
        s[o++] = 'w';
        s[o++] = '_';
    }
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        int keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '_' || c == '.';
        s[o++] = keep ? c : '_';
    }
    s[o] = 0;
    for (unsigned suffix = 1; set_has(k, s, strlen(s)); suffix++)
        wpk_fmt(s + o, 32, "_%u", suffix);
    if (!set_add(k, s)) {
        free(s);
        return NULL;
    }
    return s;
}

static const char hexdig[] = "0123456789ABCDEF";

/* The splat behind entry (itself, or the target of an alias of one) into
 * *t: 1, else 0. */
static int splat_of(const wpack_archive *ar, uint64_t entry, wpack_tensor *t)
{
    if (wpack_tensor_at(ar, entry, t) != WPACK_OK)
        return 0;
    if (t->kind == WPACK_KIND_ALIAS && wpack_tensor_at(ar, t->alias_target, t) != WPACK_OK)
        return 0;
    return t->kind == WPACK_KIND_SPLAT && t->fill && t->fill_size && t->fill_size <= 16;
}

void wpk_inline_value(wpk_strbuf *a, const wpk_emitter *e, const wpk_plan_item *it)
{
    wpack_tensor t;
    if (!splat_of(e->ar, it->entry, &t)) {
        wpk_sb_puts(a, "dense_resource<");
        wpk_sb_puts(a, it->key);
        wpk_sb_puts(a, ">");
        return;
    }
    if (t.dtype == WPACK_DTYPE_BOOL) { /* MLIR's i1 hex is bit-packed: say it */
        wpk_sb_puts(a, *(const unsigned char *)t.fill ? "dense<true>" : "dense<false>");
        return;
    }
    /* one element's bytes as hex: MLIR's splat of a dense elements attr,
     * in memory order as the blobs are */
    char hex[2 * 16 + 12] = "dense<\"0x";
    size_t o = strlen(hex);
    for (size_t i = 0; i < t.fill_size; i++) {
        unsigned char b = ((const unsigned char *)t.fill)[i];
        hex[o++] = hexdig[b >> 4];
        hex[o++] = hexdig[b & 15];
    }
    memcpy(hex + o, "\">", 3);
    wpk_sb_puts(a, hex);
}

static void hex_encode(char *dst, const unsigned char *src, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        dst[2 * i] = hexdig[src[i] >> 4];
        dst[2 * i + 1] = hexdig[src[i] & 15];
    }
}

typedef struct {
    wpk_out *o;
    char *hex;                      /* 2 x CHUNK */
} blob_job;

enum { CHUNK = 1 << 18 };

static int put_hex(void *user, const void *p, size_t n)
{
    blob_job *b = user;
    for (size_t done = 0; done < n && !b->o->rc; done += CHUNK) {
        size_t k = n - done < CHUNK ? n - done : CHUNK;
        hex_encode(b->hex, (const unsigned char *)p + done, k);
        wpk_emit_out(b->o, b->hex, 2 * k);
    }
    return b->o->rc;
}

/* The entry's bytes as a hex blob, streamed (a view straight from the
 * mapping, zstd chunks decoded once each) and checked against the entry's
 * XXH3 when ar was opened with WPACK_OPEN_VERIFY_READS. */
static int write_blob(wpk_out *o, const wpack_archive *ar, uint64_t entry)
{
    if (o->counting) { /* "0x", the alignment, 2 digits a byte, quotes */
        wpack_tensor t;
        if (wpack_tensor_at(ar, entry, &t) != WPACK_OK)
            return o->rc;
        wpk_emit_count(o, 3 + 8 + 1);
        wpk_emit_count(o, t.nbytes);
        wpk_emit_count(o, t.nbytes);
        return o->rc;
    }
    blob_job b = {o, malloc(2 * CHUNK)};
    if (!b.hex) {
        wpk_fmt(o->err, o->errlen, "out of memory");
        return o->rc = WPACK_E_NOMEM;
    }
    unsigned char align[4];
    wpk_st32(align, INLINE_ALIGNMENT);
    wpk_emit_out(o, "\"0x", 3);
    hex_encode(b.hex, align, 4);
    wpk_emit_out(o, b.hex, 8);
    int rc = wpack_read_stream(ar, entry, put_hex, &b, 0);
    if (rc && !o->rc) { /* a read failed, not the output: the message names the entry */
        wpk_fmt(o->err, o->errlen, "%s [%s]", wpack_errmsg(ar), wpack_error_name(rc));
        o->rc = rc;
    }
    wpk_emit_out(o, "\"", 1);
    free(b.hex);
    return o->rc;
}

/* An item and the entry holding its bytes: an alias's target (same dtype
 * and shape), else its own entry. */
typedef struct {
    uint64_t bytes_of;
    wpk_plan_item *it;
} blob_ref;

static int blob_ref_cmp(const void *x, const void *y)
{
    const blob_ref *a = x, *b = y;
    if (a->bytes_of != b->bytes_of)
        return a->bytes_of < b->bytes_of ? -1 : 1;
    return a->it->global < b->it->global ? -1 : a->it->global > b->it->global;
}

/* Give every item but the splats its resource key (items of one entry, or
 * of an entry and its aliases, share one: 2,000 aliases of one 1 MiB entry
 * were 4 GiB of hex); returns the items sorted by the entry holding their
 * bytes in *order for writing the blobs (one blob per key), and how many
 * blobs there are in *nblobs. */
static int assign_keys(wpk_emitter *e, key_set *keys, wpk_plan_item ***order, size_t *nblobs)
{
    const wpk_mlir_doc *doc = e->doc;
    for (size_t i = 0; i < doc->nresources; i++) {
        const wpk_resource *r = &doc->resources[i];
        size_t n;
        char *k = wpk_mlir_decode_string(doc->buf + r->key.off, r->key.len, &n);
        if (!k || !set_add(keys, k)) {
            free(k);
            return WPACK_E_NOMEM;
        }
    }
    wpk_plan_item **v = malloc((e->nitems ? e->nitems : 1) * sizeof *v);
    blob_ref *r = malloc((e->nitems ? e->nitems : 1) * sizeof *r);
    if (!v || !r) {
        free(v);
        free(r);
        return WPACK_E_NOMEM;
    }
    for (size_t i = 0; i < e->nitems; i++) {
        wpack_tensor t;
        uint64_t at = e->items[i].entry;
        if (wpack_tensor_at(e->ar, at, &t) == WPACK_OK && t.kind == WPACK_KIND_ALIAS)
            at = t.alias_target;
        r[i] = (blob_ref){at, &e->items[i]};
    }
    qsort(r, e->nitems, sizeof *r, blob_ref_cmp);
    for (size_t i = 0; i < e->nitems; i++)
        v[i] = r[i].it;
    for (size_t i = 0; i < e->nitems; i++) {
        wpack_tensor t;
        if (i && r[i].bytes_of == r[i - 1].bytes_of) {
            v[i]->key = v[i - 1]->key;
            continue;
        }
        if (splat_of(e->ar, v[i]->entry, &t)) { /* no blob: its value is the splat */
            v[i]->key = NULL;
            continue;
        }
        (*nblobs)++;
        v[i]->key = make_key(keys, v[i]->entry_name);
        if (!v[i]->key) {
            free(v);
            free(r);
            return WPACK_E_NOMEM;
        }
    }
    free(r);
    *order = v;
    return 0;
}


/* The state of --emit inline: the keys in the file and ours, and the
 * items sorted by the entry holding their bytes (one blob a key). */
typedef struct {
    key_set keys;
    wpk_plan_item **order;
    size_t n;
    size_t nblobs;              /* entries with a blob (not splats) */
} inline_state;

int wpk_inline_prepare(wpk_emitter *e, void **state)
{
    *state = NULL;
    if (!e->nitems)
        return 0;
    inline_state *s = calloc(1, sizeof *s);
    if (!s)
        return WPACK_E_NOMEM;
    s->n = e->nitems;
    *state = s;
    return assign_keys(e, &s->keys, &s->order, &s->nblobs);
}

void wpk_inline_append(wpk_out *o, void *state)
{
    const inline_state *s = state;
    const wpk_mlir_doc *doc = o->e->doc;
    if (!s || !s->nblobs || o->rc)
        return;
    if (doc->len && doc->buf[doc->len - 1] != '\n')
        wpk_emit_out(o, "\n", 1);
    static const char head[] = "\n{-#\n  dialect_resources: {\n    builtin: {\n";
    static const char tail[] = "\n    }\n  }\n#-}\n";
    wpk_emit_out(o, head, sizeof head - 1);
    int first = 1;
    for (size_t i = 0; i < s->n && !o->rc; i++) {
        if ((i && s->order[i]->key == s->order[i - 1]->key) || !s->order[i]->key)
            continue;
        wpk_emit_out(o, first ? "      " : ",\n      ", first ? 6 : 8);
        first = 0;
        wpk_emit_out(o, s->order[i]->key, strlen(s->order[i]->key));
        wpk_emit_out(o, ": ", 2);
        write_blob(o, o->e->ar, s->order[i]->entry);
    }
    wpk_emit_out(o, tail, sizeof tail - 1);
}

void wpk_inline_release(void *state)
{
    inline_state *s = state;
    if (!s)
        return;
    set_free(&s->keys);
    free(s->order);
    free(s);
}
