/*
 * emit.c - write the scanned document with the plan applied: the input is
 * copied through byte for byte except for one edit per resolved global
 * (an attribute for uri, the initial value for iree and inline) and, for
 * inline, a new {-# dialect_resources #-} section at the end whose blobs
 * stream from the archive.
 */
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "internal.h"
#include "resolve_int.h"

/* Blob alignment written into inline resources (power of two). */
#define INLINE_ALIGNMENT 64u

typedef struct {
    size_t off, len;            /* input range replaced (len 0: insertion) */
    size_t text, text_len;      /* replacement in the arena */
} edit;

typedef wpk_strbuf arena;

static void put(arena *a, const char *s, size_t n)
{
    wpk_sb_put(a, s, n);
}

static void puts_(arena *a, const char *s)
{
    wpk_sb_put(a, s, strlen(s));
}

/* Output goes through a staging buffer of up to this size: one write call
 * per 256 KiB instead of two a global (the buffer stays in L2 cache); a
 * small document gets a small one. */
#define STAGE_BYTES ((size_t)256 << 10)
#define STAGE_MIN ((size_t)16 << 10)

typedef struct {
    wpk_emitter *e;
    int rc;
    char *err;
    size_t errlen;
    char *buf;                  /* staging buffer */
    size_t used, cap;
} out_ctx;

static int write_failed(out_ctx *o)
{
    if (o->e->write_error)
        o->e->write_error(o->e->user, o->err, o->errlen);
    else
        wpk_fmt(o->err, o->errlen, "writing the output failed");
    return o->rc = WPACK_E_IO;
}

static int flush(out_ctx *o)
{
    if (!o->rc && o->used && o->e->write(o->e->user, o->buf, o->used))
        write_failed(o);
    o->used = 0;
    return o->rc;
}

static int out(out_ctx *o, const void *p, size_t n)
{
    if (o->rc || !n)
        return o->rc;
    if (n <= o->cap - o->used) {
        memcpy(o->buf + o->used, p, n);
        o->used += n;
        return 0;
    }
    if (flush(o))
        return o->rc;
    if (n < o->cap) {
        memcpy(o->buf, p, n);
        o->used = n;
        return 0;
    }
    if (o->e->write(o->e->user, p, n))
        write_failed(o);
    return o->rc;
}

/* Room for n bytes at o->buf + o->used (the caller adds what it wrote to
 * o->used), or NULL: failed already, or n larger than the buffer. */
static char *room(out_ctx *o, size_t n)
{
    if (o->rc || n > o->cap || (n > o->cap - o->used && flush(o)))
        return NULL;
    return o->buf + o->used;
}

/* Copy input bytes through: large runs by copy_file_range when the sink
 * can, else by write. */
static int out_input(out_ctx *o, size_t off, size_t n)
{
    if (o->rc || !n)
        return o->rc;
    if (n >= (1u << 20) && o->e->copy_input) {
        if (flush(o))
            return o->rc;
        int r = o->e->copy_input(o->e->user, off, n);
        if (r == 0)
            return 0;
        if (r < 0) {
            if (o->e->write_error)
                return write_failed(o);
            wpk_fmt(o->err, o->errlen, "copying the input to the output failed");
            return o->rc = WPACK_E_IO;
        }
    }
    return out(o, o->e->doc->buf + off, n);
}

/* ------------------------------------------------------------ keys */

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

/* -------------------------------------------------------- replacement */

/* "\"wpack:<archive id>/": the same for every URI, made once per document. */
static void set_uri_head(wpk_emitter *e)
{
    wpack_info info;
    wpack_get_info(e->ar, &info);
    wpk_fmt(e->uri_head, sizeof e->uri_head, "\"wpack:%016llx/", (unsigned long long)info.index_checksum);
}

/* "wpack:ID/ENTRY" in quotes, then the n bytes of tail (one reserve:
 * this runs once a global). */
static void put_uri_then(arena *a, const wpk_emitter *e, const char *entry, const char *tail,
                         size_t tail_n)
{
    size_t n = strlen(entry), head = strlen(e->uri_head);
    /* room for every byte as %XX */
    char *d = wpk_sb_reserve(a, head + 3 * n + 2 + tail_n);
    if (!d)
        return;
    memcpy(d, e->uri_head, head);
    size_t k = (size_t)(wpk_uri_put(d + head, entry, n) - d);
    d[k++] = '"';
    memcpy(d + k, tail, tail_n);
    a->n += k + tail_n;
    a->p[a->n] = 0;
}

static void put_uri(arena *a, const wpk_emitter *e, const char *entry)
{
    put_uri_then(a, e, entry, "", 0);
}

/* The new value attribute (without its type). */
static void put_value(arena *a, const wpk_emitter *e, const wpk_plan_item *it)
{
    if (e->emit == WPACK_EMIT_IREE) {
        puts_(a, "#flow.parameter.named<\"");
        puts_(a, e->scope);
        puts_(a, "\"::\"");
        puts_(a, it->entry_name);
        puts_(a, "\">");
    } else if (e->emit == WPACK_EMIT_INLINE) {
        puts_(a, "dense_resource<");
        puts_(a, it->key);
        puts_(a, ">");
    } else {
        puts_(a, "#ml_program.extern");
    }
}

static int dict_is_empty(const wpk_mlir_doc *doc, wpk_span attrs)
{
    wpk_dict_entry one[1];
    size_t n = 1, close;
    if (wpk_mlir_parse_dict(doc->buf, doc->len, attrs.off, one, 1, &n, &close))
        return 0;
    return n == 0;
}

/* The value edit of item it (iree, inline, externalize). */
static edit value_edit(arena *a, const wpk_emitter *e, const wpk_plan_item *it)
{
    const wpk_mlir_doc *doc = e->doc;
    const wpk_global *g = &doc->globals[it->global];
    edit ed = {0, 0, a->n, 0};
    if (g->form == WPK_FORM_UTIL_PRETTY && e->emit == WPACK_EMIT_URI) {
        /* externalize, uri: a util.global without a value is the extern;
         * drop "= VALUE " (the '=' is the last non-blank before the value) */
        size_t eq = g->value.off;
        while (eq > g->op.off && doc->buf[eq - 1] != '=')
            eq--;
        size_t end = g->value.off + g->value.len;
        if (end < doc->len && doc->buf[end] == ' ')
            end++;
        ed.off = eq ? eq - 1 : eq;
        ed.len = end - ed.off;
        ed.text_len = 0;
        return ed;
    }
    int typed = g->form != WPK_FORM_UTIL_PRETTY; /* util pretty shares the global's type */
    if (g->value.len) {
        ed.off = g->value.off;
        ed.len = g->value.len;
        put_value(a, e, it);
        if (typed) {
            puts_(a, " : ");
            put(a, doc->buf + g->type.off, g->type.len);
        }
    } else if (g->form == WPK_FORM_UTIL_PRETTY) {
        ed.off = g->value_insert;
        puts_(a, "= ");
        put_value(a, e, it);
        puts_(a, " ");
    } else {
        /* generic util.global without initial_value: add one to its dict */
        ed.off = g->value_insert;
        puts_(a, ", initial_value = ");
        put_value(a, e, it);
        puts_(a, " : ");
        put(a, doc->buf + g->type.off, g->type.len);
    }
    ed.text_len = a->n - ed.text;
    return ed;
}

/* The wpack.uri attribute alone, as resolve has always written it: an
 * existing value replaced in place, else first in the dictionary. */
static edit uri_edit(arena *a, const wpk_emitter *e, const wpk_plan_item *it)
{
    const wpk_mlir_doc *doc = e->doc;
    const wpk_global *g = &doc->globals[it->global];
    edit ed = {0, 0, a->n, 0};
    if (g->uri_value.len) {
        ed.off = g->uri_value.off;
        ed.len = g->uri_value.len;
        put_uri(a, e, it->entry_name);
    } else if (g->attrs.len) {
        ed.off = g->attrs.off + 1;
        puts_(a, "wpack.uri = ");
        put_uri(a, e, it->entry_name);
        if (!dict_is_empty(doc, g->attrs))
            puts_(a, ", ");
    } else {
        ed.off = g->attrs_insert;
        put(a, " {wpack.uri = ", 14);
        put_uri_then(a, e, it->entry_name, "}", 1);
    }
    ed.text_len = a->n - ed.text;
    return ed;
}

/* The edits for item it (at most two: value, attributes) into ed[]. */
static size_t edits_for(arena *a, const wpk_emitter *e, const wpk_plan_item *it, edit *ed)
{
    const wpk_mlir_doc *doc = e->doc;
    const wpk_global *g = &doc->globals[it->global];
    int uri = e->emit == WPACK_EMIT_URI;
    size_t n = 0;
    if (!uri || e->replace_with_extern)
        ed[n++] = value_edit(a, e, it);
    if (uri && !it->attr_text) {
        ed[n++] = uri_edit(a, e, it);
    } else if (it->attr_text) {
        wpk_strbuf ours = {0};
        if (uri) {
            wpk_sb_puts(&ours, "wpack.uri = ");
            put_uri(&ours, e, it->entry_name);
            wpk_sb_puts(&ours, ", ");
        }
        wpk_sb_puts(&ours, it->attr_text);
        edit x = {0, 0, a->n, 0};
        if (ours.failed ||
            wpk_attr_merge(doc->buf, doc->len, g->attrs, g->attrs_insert, " ", "", ours.p, ours.n,
                           e->attr_prefix, uri, a, &x.off, &x.len)) {
            a->failed = 1;
        }
        x.text_len = a->n - x.text;
        free(ours.p);
        ed[n++] = x;
    }
    return n;
}

static int edit_cmp(const void *x, const void *y)
{
    const edit *a = x, *b = y;
    if (a->off != b->off)
        return a->off < b->off ? -1 : 1;
    if ((a->len == 0) != (b->len == 0))
        return a->len == 0 ? -1 : 1; /* insertions before a replacement at the same byte */
    return a->text < b->text ? -1 : a->text > b->text;
}

/* ---------------------------------------------------------- blobs */

static const char hexdig[] = "0123456789ABCDEF";

static void hex_encode(char *dst, const unsigned char *src, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        dst[2 * i] = hexdig[src[i] >> 4];
        dst[2 * i + 1] = hexdig[src[i] & 15];
    }
}

typedef struct {
    out_ctx *o;
    char *hex;                      /* 2 x CHUNK */
} blob_job;

enum { CHUNK = 1 << 18 };

static int put_hex(void *user, const void *p, size_t n)
{
    blob_job *b = user;
    for (size_t done = 0; done < n && !b->o->rc; done += CHUNK) {
        size_t k = n - done < CHUNK ? n - done : CHUNK;
        hex_encode(b->hex, (const unsigned char *)p + done, k);
        out(b->o, b->hex, 2 * k);
    }
    return b->o->rc;
}

/* The entry's bytes as a hex blob, streamed (a view straight from the
 * mapping, zstd chunks decoded once each) and checked against the entry's
 * XXH3 when ar was opened with WPACK_OPEN_VERIFY_READS. */
static int write_blob(out_ctx *o, const wpack_archive *ar, uint64_t entry)
{
    blob_job b = {o, malloc(2 * CHUNK)};
    if (!b.hex) {
        wpk_fmt(o->err, o->errlen, "out of memory");
        return o->rc = WPACK_E_NOMEM;
    }
    unsigned char align[4];
    wpk_st32(align, INLINE_ALIGNMENT);
    out(o, "\"0x", 3);
    hex_encode(b.hex, align, 4);
    out(o, b.hex, 8);
    int rc = wpack_read_stream(ar, entry, put_hex, &b, 0);
    if (rc && !o->rc) { /* a read failed, not the output: the message names the entry */
        wpk_fmt(o->err, o->errlen, "%s [%s]", wpack_errmsg(ar), wpack_error_name(rc));
        o->rc = rc;
    }
    out(o, "\"", 1);
    free(b.hex);
    return o->rc;
}

static int item_entry_cmp(const void *x, const void *y)
{
    const wpk_plan_item *a = *(wpk_plan_item *const *)x, *b = *(wpk_plan_item *const *)y;
    if (a->entry != b->entry)
        return a->entry < b->entry ? -1 : 1;
    return a->global < b->global ? -1 : a->global > b->global;
}

/* Give every item its resource key (shared entries share one); returns
 * the items sorted by entry in *order for writing the blobs. */
static int assign_keys(wpk_emitter *e, key_set *keys, wpk_plan_item ***order)
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
    if (!v)
        return WPACK_E_NOMEM;
    for (size_t i = 0; i < e->nitems; i++)
        v[i] = &e->items[i];
    qsort(v, e->nitems, sizeof *v, item_entry_cmp);
    for (size_t i = 0; i < e->nitems; i++) {
        if (i && v[i]->entry == v[i - 1]->entry) {
            v[i]->key = v[i - 1]->key;
            continue;
        }
        v[i]->key = make_key(keys, v[i]->entry_name);
        if (!v[i]->key) {
            free(v);
            return WPACK_E_NOMEM;
        }
    }
    *order = v;
    return 0;
}

static int patch_cmp(const void *x, const void *y)
{
    const wpk_patch *a = *(const wpk_patch *const *)x, *b = *(const wpk_patch *const *)y;
    if (a->off != b->off)
        return a->off < b->off ? -1 : 1;
    if ((a->len == 0) != (b->len == 0))
        return a->len == 0 ? -1 : 1;
    return a < b ? -1 : a > b; /* as given */
}

static int global_order_cmp(const void *x, const void *y)
{
    const wpk_plan_item *a = x, *b = y;
    return a->global < b->global ? -1 : a->global > b->global;
}

/* Write one edit: the input up to it, then its text. */
static void write_edit(out_ctx *o, size_t *pos, size_t off, size_t len, const char *text,
                       size_t text_len)
{
    if (o->rc)
        return;
    if (off < *pos) {
        wpk_fmt(o->err, o->errlen, "internal error: overlapping edits at byte %zu", off);
        o->rc = WPACK_E_STATE;
        return;
    }
    out_input(o, *pos, off - *pos);
    out(o, text, text_len);
    *pos = off + len;
}

/* Patches that sort before edit x (the order of edit_cmp: by offset,
 * insertions first, the globals' edits before patches). */
static void write_patches_before(out_ctx *o, size_t *pos, const wpk_patch **pp, size_t np,
                                 size_t *next, const edit *x)
{
    while (*next < np && !o->rc) {
        const wpk_patch *p = pp[*next];
        if (x && (p->off > x->off ||
                  (p->off == x->off && !((p->len == 0) && (x->len != 0)))))
            break;
        write_edit(o, pos, p->off, p->len, p->text, p->text_len);
        (*next)++;
    }
}

/* The text every plain edit starts with: " {wpack.uri = \"wpack:<id>/"
 * (uri) or "#flow.parameter.named<\"<scope>\"::\"" (iree), copied as one
 * fixed-size block; len 0: no plain edits (inline, or a long scope). */
typedef struct {
    char text[96];
    size_t len;
} edit_head;

static void make_edit_head(const wpk_emitter *e, edit_head *h)
{
    memset(h, 0, sizeof *h);
    size_t n = strlen(e->uri_head), sl = e->scope ? strlen(e->scope) : sizeof h->text;
    if (e->emit == WPACK_EMIT_URI && 14 + n <= sizeof h->text) {
        memcpy(h->text, " {wpack.uri = ", 14);
        memcpy(h->text + 14, e->uri_head, n);
        h->len = 14 + n;
    } else if (e->emit == WPACK_EMIT_IREE && 27 + sl <= sizeof h->text) {
        memcpy(h->text, "#flow.parameter.named<\"", 23);
        memcpy(h->text + 23, e->scope, sl);
        memcpy(h->text + 23 + sl, "\"::\"", 4);
        h->len = 27 + sl;
    }
}

/*
 * The usual edit of a global, written straight into the output buffer
 * with the input before it (a short run: a line) in one reserve, without
 * edits_for's text: uri, a global with no attribute dictionary gets
 * " {wpack.uri = "..."}" after its type; iree, the value becomes the
 * parameter (and its type, but for util.global's pretty form). The same
 * bytes as edits_for. Only without patches, extern replacement or
 * attribute text (the caller checks the document's part). 1 written, 0
 * not this case (nothing written; edits_for then).
 */
static int plain_edit(out_ctx *o, size_t *pos, const wpk_plan_item *it, const edit_head *h)
{
    const wpk_mlir_doc *doc = o->e->doc;
    const wpk_global *g = &doc->globals[it->global];
    int uri = o->e->emit == WPACK_EMIT_URI;
    size_t off, len = 0, tail = 0;
    if (it->attr_text)
        return 0;
    if (uri && !g->uri_value.len && !g->attrs.len) {
        off = g->attrs_insert;
    } else if (!uri && g->value.len) {
        off = g->value.off;
        len = g->value.len;
        if (g->form != WPK_FORM_UTIL_PRETTY) /* typed: " : T" after the value */
            tail = 3 + g->type.len;
    } else {
        return 0;
    }
    if (off < *pos || off - *pos > (64u << 10)) /* a long run: out_input may copy it */
        return 0;
    size_t gap = off - *pos, n = strlen(it->entry_name);
    if (n > (16u << 10) || tail > (16u << 10))
        return 0;
    char *d0 = room(o, gap + sizeof h->text + 3 * n + 2 + tail);
    if (!d0)
        return 0; /* failed already: the general path stops too */
    char *d = d0;
    memcpy(d, doc->buf + *pos, gap);
    d += gap;
    memcpy(d, h->text, sizeof h->text); /* fixed size: a few vector moves */
    d += h->len;
    if (uri) {
        d = wpk_uri_put(d, it->entry_name, n);
        d[0] = '"';
        d[1] = '}';
        d += 2;
    } else {
        memcpy(d, it->entry_name, n);
        d[n] = '"';
        d[n + 1] = '>';
        d += n + 2;
        if (tail) {
            memcpy(d, " : ", 3);
            memcpy(d + 3, doc->buf + g->type.off, g->type.len);
            d += tail;
        }
    }
    o->used += (size_t)(d - d0);
    *pos = off + len;
    return 1;
}

int wpk_emit_document(wpk_emitter *e, char *err, size_t errlen)
{
    const wpk_mlir_doc *doc = e->doc;
    key_set keys = {0};
    wpk_plan_item **order = NULL;
    const wpk_patch **pp = NULL;
    size_t cap = doc->len < STAGE_MIN ? STAGE_MIN : doc->len < STAGE_BYTES ? doc->len : STAGE_BYTES;
    out_ctx o = {e, 0, err, errlen, wpk_big_calloc(cap), 0, cap};
    if (!o.buf) {
        wpk_fmt(err, errlen, "out of memory");
        return WPACK_E_NOMEM;
    }
    /* the edits are written in one pass in file order: the items in the
     * order of their globals (disjoint ops), the patches sorted */
    for (size_t i = 1; i < e->nitems; i++) {
        if (e->items[i].global < e->items[i - 1].global) {
            qsort(e->items, e->nitems, sizeof *e->items, global_order_cmp);
            break;
        }
    }
    if (e->emit == WPACK_EMIT_INLINE && e->nitems) {
        int rc = assign_keys(e, &keys, &order);
        if (rc) {
            set_free(&keys);
            wpk_big_free(o.buf, o.cap);
            wpk_fmt(err, errlen, "out of memory");
            return rc;
        }
    }
    if (e->npatches) {
        pp = malloc(e->npatches * sizeof *pp);
        if (!pp) {
            free(order);
            wpk_big_free(o.buf, o.cap);
            set_free(&keys);
            wpk_fmt(err, errlen, "out of memory");
            return WPACK_E_NOMEM;
        }
        for (size_t i = 0; i < e->npatches; i++)
            pp[i] = &e->patches[i];
        qsort(pp, e->npatches, sizeof *pp, patch_cmp);
    }
    set_uri_head(e);
    /* one item's edit text at a time: the arena stays small and warm */
    arena a = {0};
    size_t pos = 0, next_patch = 0;
    edit_head eh;
    make_edit_head(e, &eh);
    int plain = eh.len && !e->npatches && !e->replace_with_extern;
    for (size_t i = 0; i < e->nitems && !o.rc; i++) {
        if (plain && plain_edit(&o, &pos, &e->items[i], &eh))
            continue;
        edit ed[2];
        a.n = 0;
        size_t n = edits_for(&a, e, &e->items[i], ed);
        if (a.failed) {
            o.rc = WPACK_E_NOMEM;
            wpk_fmt(err, errlen, "out of memory");
            break;
        }
        if (n == 2 && edit_cmp(&ed[0], &ed[1]) > 0) {
            edit t = ed[0];
            ed[0] = ed[1];
            ed[1] = t;
        }
        for (size_t k = 0; k < n && !o.rc; k++) {
            write_patches_before(&o, &pos, pp, e->npatches, &next_patch, &ed[k]);
            write_edit(&o, &pos, ed[k].off, ed[k].len, a.p + ed[k].text, ed[k].text_len);
        }
    }
    write_patches_before(&o, &pos, pp, e->npatches, &next_patch, NULL);
    if (!o.rc)
        out_input(&o, pos, doc->len - pos);
    if (e->emit == WPACK_EMIT_INLINE && e->nitems && !o.rc) {
        if (doc->len && doc->buf[doc->len - 1] != '\n')
            out(&o, "\n", 1);
        static const char head[] = "\n{-#\n  dialect_resources: {\n    builtin: {\n";
        static const char tail[] = "\n    }\n  }\n#-}\n";
        out(&o, head, sizeof head - 1);
        int first = 1;
        for (size_t i = 0; i < e->nitems && !o.rc; i++) {
            if (i && order[i]->entry == order[i - 1]->entry)
                continue;
            out(&o, first ? "      " : ",\n      ", first ? 6 : 8);
            first = 0;
            out(&o, order[i]->key, strlen(order[i]->key));
            out(&o, ": ", 2);
            write_blob(&o, e->ar, order[i]->entry);
        }
        out(&o, tail, sizeof tail - 1);
    }
    flush(&o);
    wpk_big_free(o.buf, o.cap);
    free(pp);
    free(a.p);
    free(order);
    set_free(&keys);
    return o.rc;
}
