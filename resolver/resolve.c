/*
 * resolve.c - wpack_resolve_buffer(): find the weight globals, map each to
 * an archive entry, check types, then hand the plan to the emitter.
 * Every problem is reported (not only the first) before anything is written.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "dense_decode.h"
#include "internal.h"
#include "mlir_lex.h"
#include "reader.h"
#include "resolve_int.h"

void wpack_resolve_options_init(wpack_resolve_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->emit = WPACK_EMIT_URI;
}

void wpk_diag_emit(wpk_diag *d, int severity, int code, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    wpk_vfmt(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* an error says which code it is, as every failure message does */
    if (severity == WPACK_DIAG_ERROR && code) {
        size_t n = strlen(msg), k = strlen(wpack_error_name(code)) + 3;
        if (n + k >= sizeof msg)
            n = sizeof msg - k - 1;
        wpk_fmt(msg + n, sizeof msg - n, " [%s]", wpack_error_name(code));
    }
    if (severity == WPACK_DIAG_ERROR) {
        d->errors++;
        if (!d->first_error)
            d->first_error = code;
    } else if (severity == WPACK_DIAG_WARNING) {
        d->warnings++;
    }
    if (d->fn)
        d->fn(d->user, severity, msg);
}

void wpk_global_where(char *buf, size_t len, const wpk_diag *d, const wpk_global *g)
{
    char q[300];
    wpk_quote(q, sizeof q, g->name, g->name_len);
    wpk_fmt(buf, len, "%s:%u:%u: global @%s", d->source, g->line, g->col, q);
}

/* "src:L:C: global @name", formatted only when a message needs it. */
typedef struct {
    wpk_diag *d;
    const wpk_global *g;
    int ready;
    char buf[400];
} lazy_where;

static const char *W(lazy_where *w)
{
    if (!w->ready) {
        wpk_global_where(w->buf, sizeof w->buf, w->d, w->g);
        w->ready = 1;
    }
    return w->buf;
}

/* Is this global a weight the resolver handles? */
static int is_weight_global(const wpk_global *g)
{
    if (g->value_kind == WPK_VAL_EXTERN || g->value_kind == WPK_VAL_PARAM)
        return 1;
    /* IREE: a util.global without an initial value is an extern */
    return (g->form == WPK_FORM_UTIL_PRETTY || g->form == WPK_FORM_UTIL_GENERIC) &&
           g->value_kind == WPK_VAL_NONE;
}

/* The key of #flow.parameter.named<["scope"::]"key">, decoded (heap). */
static char *param_key(const wpk_mlir_doc *doc, const wpk_global *g)
{
    wpk_lexer lx;
    wpk_span b = g->value_body;
    wpk_lex_init(&lx, doc->buf, b.off + b.len, b.off);
    wpk_lex_next(&lx); /* #flow.parameter.named */
    wpk_tok t = wpk_lex_next(&lx);
    if (!wpk_tok_is(&lx, t, '<'))
        return NULL;
    wpk_tok s = wpk_lex_next(&lx);
    if (s.kind != WPK_TOK_STRING)
        return NULL;
    wpk_tok c = wpk_lex_next(&lx);
    if (wpk_tok_is(&lx, c, ':')) {
        if (!wpk_tok_is(&lx, wpk_lex_next(&lx), ':'))
            return NULL;
        s = wpk_lex_next(&lx);
        if (s.kind != WPK_TOK_STRING)
            return NULL;
        c = wpk_lex_next(&lx);
    }
    if (!wpk_tok_is(&lx, c, '>'))
        return NULL;
    size_t n;
    return wpk_mlir_decode_string(doc->buf + s.off, s.len, &n);
}

typedef struct {
    const char *global, *entry;
} map_pair;

static int map_cmp(const void *a, const void *b)
{
    return strcmp(((const map_pair *)a)->global, ((const map_pair *)b)->global);
}

static const char *map_lookup(const map_pair *m, size_t n, const char *name)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, m[mid].global);
        if (!c)
            return m[mid].entry;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

static int name_cmp_idx(const void *a, const void *b, void *ctx)
{
    const wpk_global *g = ctx;
    const wpk_global *x = &g[*(const size_t *)a], *y = &g[*(const size_t *)b];
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp(x->name, y->name, n);
    if (c)
        return c;
    if (x->name_len != y->name_len)
        return x->name_len < y->name_len ? -1 : 1;
    return x->op.off < y->op.off ? -1 : 1;
}

static int entry_cmp_item(const void *a, const void *b)
{
    const wpk_plan_item *x = a, *y = b;
    if (x->entry != y->entry)
        return x->entry < y->entry ? -1 : 1;
    return x->global < y->global ? -1 : x->global > y->global;
}

static int global_cmp_item(const void *a, const void *b)
{
    const wpk_plan_item *x = a, *y = b;
    return x->global < y->global ? -1 : x->global > y->global;
}

/* A hash of a name for the tables below (8 bytes a step; not XXH3: the
 * library call costs more than the hashing for short names). */
static uint64_t name_hash(const char *s, size_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n, w = 0;
    if (n >= 8) {
        const char *end = s + n;
        for (; end - s > 8; s += 8) {
            memcpy(&w, s, 8);
            h = (h ^ w) * 0xFF51AFD7ED558CCDull;
            h ^= h >> 32;
        }
        memcpy(&w, end - 8, 8); /* the last 8 bytes (overlapping the previous word) */
    } else {
        for (size_t i = 0; i < n; i++)
            w |= (uint64_t)(unsigned char)s[i] << (8 * i);
    }
    /* murmur3's finalizer: every input bit reaches the low (index) and the
     * high (tag) bits */
    h ^= w;
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ull;
    return h ^ (h >> 33);
}

/* Slots of a hash table for n names: load <= 1/2 (short probes); for
 * 100,000 names 2 MiB, one huge page from wpk_big_calloc. 0: too many. */
static size_t table_cap(size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n) {
        if (cap > ((size_t)-1) / 16)
            return 0;
        cap *= 2;
    }
    return cap;
}

/* Globals' names in a growing hash set, for the duplicate check: a slot
 * is the global's index + 1 (0: empty) in the low 32 bits, the high 32
 * bits of its name's hash above (compared before the names). */
typedef struct {
    uint64_t *slot;
    size_t cap, n;
} name_set;

static void name_set_put(uint64_t *slot, size_t cap, uint64_t h, size_t i)
{
    size_t j = h & (cap - 1);
    while (slot[j])
        j = (j + 1) & (cap - 1);
    slot[j] = (h & 0xFFFFFFFF00000000ull) | (i + 1);
}

/* Add global i (i < 2^32 - 1): 1 its name was there already, 0 added,
 * -1 out of memory. */
static int name_set_add(name_set *s, const wpk_mlir_doc *doc, size_t i)
{
    if ((s->n + 1) * 2 > s->cap) {
        size_t c = s->cap ? s->cap * 2 : 64;
        uint64_t *ns = c <= ((size_t)-1) / 16 ? wpk_big_calloc(c * sizeof *ns) : NULL;
        if (!ns)
            return -1;
        for (size_t j = 0; j < s->cap; j++) {
            if (!s->slot[j])
                continue;
            const wpk_global *o = &doc->globals[(s->slot[j] & 0xFFFFFFFFu) - 1];
            name_set_put(ns, c, name_hash(o->name, o->name_len), (s->slot[j] & 0xFFFFFFFFu) - 1);
        }
        wpk_big_free(s->slot, s->cap * sizeof *s->slot);
        s->slot = ns;
        s->cap = c;
    }
    const wpk_global *g = &doc->globals[i];
    uint64_t h = name_hash(g->name, g->name_len), tag = h & 0xFFFFFFFF00000000ull;
    for (size_t j = h & (s->cap - 1); s->slot[j]; j = (j + 1) & (s->cap - 1)) {
        if ((s->slot[j] & 0xFFFFFFFF00000000ull) != tag)
            continue;
        const wpk_global *o = &doc->globals[(s->slot[j] & 0xFFFFFFFFu) - 1];
        if (o->name_len == g->name_len && memcmp(o->name, g->name, g->name_len) == 0)
            return 1;
    }
    name_set_put(s->slot, s->cap, h, i);
    s->n++;
    return 0;
}

/* The duplicate symbols in name order; dup from find_duplicates (0: none). */
static void report_duplicates(wpk_diag *d, const wpk_mlir_doc *doc, int dup)
{
    if (doc->nglobals < 2 || dup == 0)
        return;
    size_t *idx = malloc(doc->nglobals * sizeof *idx);
    if (!idx) {
        wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_NOMEM, "out of memory");
        return;
    }
    for (size_t i = 0; i < doc->nglobals; i++)
        idx[i] = i;
    qsort_r(idx, doc->nglobals, sizeof *idx, name_cmp_idx, doc->globals);
    size_t first = 0, times = 1; /* the run of one name: its first definition */
    for (size_t i = 1; i < doc->nglobals; i++) {
        const wpk_global *a = &doc->globals[idx[first]], *b = &doc->globals[idx[i]];
        if (a->name_len != b->name_len || memcmp(a->name, b->name, a->name_len) != 0) {
            first = i;
            times = 1;
            continue;
        }
        char w[400];
        wpk_global_where(w, sizeof w, d, b);
        times++;
        if (times == 2)
            wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_DUPLICATE,
                          "%s: symbol defined twice (first at %u:%u)", w, a->line, a->col);
        else
            wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_DUPLICATE,
                          "%s: symbol defined %zu times (first at %u:%u)", w, times, a->line, a->col);
    }
    free(idx);
}

static void report_unresolved(wpk_diag *d, const wpack_archive *ar, lazy_where *where,
                              const char *name, unsigned k, int severity, int suggest)
{
    char list[1200] = "";
    if (suggest) {
        uint64_t best[16];
        size_t n = wpk_closest_entries(ar, name, best, k);
        size_t o = 0;
        for (size_t i = 0; i < n && o < sizeof list - 300; i++) {
            wpack_tensor t;
            if (wpack_tensor_at(ar, best[i], &t) != WPACK_OK)
                continue;
            char q[260];
            wpk_quote(q, sizeof q, t.name, t.name_len);
            wpk_fmt(list + o, sizeof list - o, "%s'%s'", i ? ", " : "; closest entries: ", q);
            o += strlen(list + o);
        }
    }
    wpk_diag_emit(d, severity, WPACK_E_NOT_FOUND,
                  "%s: no archive entry, name-map name or --map entry for it%s%s", W(where),
                  list, severity == WPACK_DIAG_ERROR ? " (--allow-missing leaves it as it is)"
                                                     : "; left unresolved");
}

/*
 * Exact entry-name lookups, for documents that look up many entries: first
 * the entry after the last one found or the one after that (documents list
 * their weights largely in the archive's name order, or in runs of it: 90%
 * of bench/resolver's globals, from cache), then a hash table of all entry
 * names (one pass over the entries, then one probe a lookup instead of a
 * binary search of ~log2(count) name comparisons; built at the 32nd miss,
 * binary searches until then). A slot is the entry index + 1 (0: empty) in the low 32 bits
 * and the high 32 bits of its name's hash above. Names are compared whole
 * (n bytes); wpack_find (the name map, names up to a NUL) is the caller's
 * next step for a name not found.
 */
typedef struct {
    const wpack_archive *ar;
    uint64_t count;             /* < 2^31 (WPK_LIMIT_ENTRIES) */
    uint64_t next;              /* the entry after the last one found */
    uint64_t *slot;             /* the table once built (wpk_big_calloc) */
    size_t cap, misses;
    int no_table;               /* building it failed: binary searches */
} entry_index;

/* Name of entry i of an open (validated) archive: the index's own bytes,
 * read directly (reader.h): wpack_tensor_at would fill a whole
 * wpack_tensor for a name. */
static const char *entry_name_at(const wpack_archive *ar, uint64_t i, size_t *n)
{
    const uint8_t *r = wpk_rec(ar, WPK_SEC_ENTRIES, i, WPK_ENTRY_SIZE);
    *n = wpk_ld32(r + WPK_E_NAME_LEN_OFF);
    return wpk_str(ar, wpk_ld64(r + WPK_E_NAME_OFF));
}

static void entry_index_build(entry_index *x)
{
    size_t cap = table_cap((size_t)x->count);
    x->slot = cap ? wpk_big_calloc(cap * sizeof *x->slot) : NULL;
    if (!x->slot) {
        x->no_table = 1;
        return;
    }
    x->cap = cap;
    /* 16 entries a step: their slots are fetched while the next are hashed
     * (the table is larger than L2: each insert would wait on memory) */
    enum { STEP = 16 };
    uint64_t h[STEP];
    for (uint64_t i = 0; i < x->count; i += STEP) {
        size_t m = x->count - i < STEP ? (size_t)(x->count - i) : STEP;
        for (size_t k = 0; k < m; k++) {
            size_t n;
            const char *name = entry_name_at(x->ar, i + k, &n);
            h[k] = name_hash(name, n);
            __builtin_prefetch(&x->slot[h[k] & (cap - 1)], 1);
        }
        for (size_t k = 0; k < m; k++)
            name_set_put(x->slot, cap, h[k], (size_t)(i + k));
    }
}

static int entry_is(const entry_index *x, uint64_t i, const char *name, size_t n)
{
    size_t en;
    const char *e = entry_name_at(x->ar, i, &en);
    return en == n && wpk_same_bytes(e, name, n);
}

/* The entry named name (n bytes), or UINT64_MAX. */
static uint64_t entry_index_find(entry_index *x, const char *name, size_t n)
{
    /* the entry after the last one found, or the one after that (one
     * name in between, as p10009 p1001 p10010 sort) */
    for (uint64_t i = x->next; i < x->count && i < x->next + 2; i++) {
        if (entry_is(x, i, name, n)) {
            x->next = i + 1;
            return i;
        }
    }
    if (!x->slot && !x->no_table && ++x->misses >= 32)
        entry_index_build(x);
    uint64_t i = UINT64_MAX;
    if (x->slot) {
        uint64_t h = name_hash(name, n), tag = h & 0xFFFFFFFF00000000ull;
        size_t mask = x->cap - 1;
        for (size_t j = h & mask; x->slot[j]; j = (j + 1) & mask) {
            uint64_t k = (x->slot[j] & 0xFFFFFFFFu) - 1;
            if ((x->slot[j] & 0xFFFFFFFF00000000ull) == tag && entry_is(x, k, name, n)) {
                i = k;
                break;
            }
        }
    } else {
        uint64_t pos;
        if (wpk_search(x->ar, WPK_SEC_ENTRIES, WPK_ENTRY_SIZE, x->count, (const uint8_t *)name, n,
                       &pos))
            i = pos;
    }
    if (i != UINT64_MAX)
        x->next = i + 1;
    return i;
}

/*
 * Is any symbol defined twice? With ix, every global's symbol is looked up
 * as an entry name first (match[i] = entry + 1, 0 none, for the plan): two
 * globals on one entry's name are a duplicate, and only the names that are
 * no entry's go into the hash set. 1 yes, 0 no, -1 out of memory (the sort
 * in report_duplicates then decides).
 */
static int find_duplicates(const wpk_mlir_doc *doc, entry_index *ix, uint32_t *match)
{
    if (doc->nglobals >= UINT32_MAX - 1)
        return -1;
    unsigned char *seen = NULL;
    if (ix && !(seen = calloc((size_t)(ix->count / 8 + 1), 1)))
        ix = NULL; /* the hash set alone, and no match[] */
    name_set set = {NULL, 0, 0};
    int dup = 0, nomem = 0;
    for (size_t i = 0; i < doc->nglobals && (ix || !(dup || nomem)); i++) {
        const wpk_global *g = &doc->globals[i];
        if (ix) {
            uint64_t e = entry_index_find(ix, g->name, g->name_len);
            if (e != UINT64_MAX) {
                match[i] = (uint32_t)(e + 1);
                dup |= (seen[e / 8] >> (e % 8)) & 1;
                seen[e / 8] |= (unsigned char)(1u << (e % 8));
                continue;
            }
        }
        if (dup || nomem)
            continue;
        int r = name_set_add(&set, doc, i);
        if (r < 0)
            nomem = 1;
        dup |= r > 0;
    }
    free(seen);
    wpk_big_free(set.slot, set.cap * sizeof *set.slot);
    return dup ? 1 : nomem ? -1 : 0;
}

/* The entry name of a wpack: URI string value (with its quotes, as
 * written) into a heap string, and its archive id; NULL when the value is
 * no wpack: URI (or out of memory: *nomem). */
static char *uri_entry(const char *text, size_t len, uint64_t *id, int *nomem)
{
    *nomem = 0;
    if (len < 2 || text[0] != '"')
        return NULL;
    size_t n;
    char *u = wpk_mlir_decode_string(text, len, &n);
    if (!u) {
        *nomem = 1;
        return NULL;
    }
    uint64_t v = 0;
    int ok = n > 23 && memcmp(u, "wpack:", 6) == 0 && u[22] == '/';
    for (size_t i = 6; ok && i < 22; i++) {
        int h = wpk_hex_digit((unsigned char)u[i]);
        ok = h >= 0;
        v = v << 4 | (uint64_t)(h < 0 ? 0 : h);
    }
    size_t o = 0; /* percent-decoded in place */
    for (size_t i = 23; ok && i < n; i++) {
        if (u[i] != '%') {
            u[o++] = u[i];
            continue;
        }
        int hi = i + 2 < n ? wpk_hex_digit((unsigned char)u[i + 1]) : -1;
        int lo = hi >= 0 ? wpk_hex_digit((unsigned char)u[i + 2]) : -1;
        ok = lo >= 0 && (hi << 4 | lo) != 0;
        u[o++] = (char)(hi << 4 | (lo < 0 ? 0 : lo));
        i += 2;
    }
    if (!ok) {
        free(u);
        return NULL;
    }
    u[o] = 0;
    *id = v;
    return u;
}

/* Find g's entry (global gi; match from find_duplicates, or NULL): 1
 * found, 2 found through its wpack.uri (archive id in *uri_id), 0 not,
 * -1 an error reported. */
static int find_entry(const wpack_archive *ar, entry_index *ix, const uint32_t *match, size_t gi,
                      const wpk_mlir_doc *doc, const wpk_global *g, const map_pair *map,
                      size_t nmap, wpack_tensor *t, char **lookup_name, uint64_t *uri_id,
                      wpk_diag *d, lazy_where *where)
{
    *lookup_name = NULL;
    if (g->value_kind == WPK_VAL_PARAM) {
        char *key = param_key(doc, g);
        if (!key) {
            wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_INPUT,
                          "%s: cannot read the key of its #flow.parameter.named value", W(where));
            return -1;
        }
        *lookup_name = key;
        uint64_t e = ix ? entry_index_find(ix, key, strlen(key)) : UINT64_MAX;
        if (e != UINT64_MAX)
            return wpack_tensor_at(ar, e, t) == WPACK_OK;
        return wpack_find(ar, key, t) == WPACK_OK;
    }
    const char *m = nmap ? map_lookup(map, nmap, g->name) : NULL;
    /* an earlier --emit uri output: its URI names the entry (--map overrides) */
    if (g->uri_value.len && !m) {
        uint64_t id;
        int nomem;
        char *name = uri_entry(doc->buf + g->uri_value.off, g->uri_value.len, &id, &nomem);
        if (!name) {
            wpk_diag_emit(d, WPACK_DIAG_ERROR, nomem ? WPACK_E_NOMEM : WPACK_E_INPUT,
                          "%s: %s", W(where), nomem ? "out of memory" :
                          "its wpack.uri is not a wpack: URI (\"wpack:<16 hex>/<entry>\"); "
                          "remove it or name the entry with --map");
            return -1;
        }
        *uri_id = id;
        *lookup_name = name;
        uint64_t e = ix ? entry_index_find(ix, name, strlen(name)) : UINT64_MAX;
        if (e != UINT64_MAX ? wpack_tensor_at(ar, e, t) == WPACK_OK : wpack_find(ar, name, t) == WPACK_OK)
            return 2;
        char q[300];
        wpk_quote(q, sizeof q, name, strlen(name));
        wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_NOT_FOUND,
                      "%s: its wpack.uri names entry '%s', which is not in the archive "
                      "(--map can name another)", W(where), q);
        return -1;
    }
    if (match && match[gi])
        return wpack_tensor_at(ar, match[gi] - 1, t) == WPACK_OK;
    if (wpack_find(ar, g->name, t) == WPACK_OK) /* the name map (or a name with a NUL) */
        return 1;
    if (!m)
        return 0;
    if (wpack_find(ar, m, t) == WPACK_OK)
        return 1;
    char q[300];
    wpk_quote(q, sizeof q, m, strlen(m));
    wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_NOT_FOUND,
                  "%s: --map sends it to '%s', which is not in the archive", W(where), q);
    return -1;
}

/* The last type parsed well and the last element match, since globals
 * mostly repeat a few types: the same bytes parse to the same type. */
typedef struct {
    const char *text;
    size_t len;
    wpk_mlir_tensor type;
    int dtype, elem_ok;         /* elem_ok for type.elem and dtype; dtype -1: none */
} type_cache;

/* Check the global's types against the entry. */
static void check_types(wpk_diag *d, const wpk_mlir_doc *doc, const wpk_global *g,
                        const wpack_tensor *t, lazy_where *where, int *ok, type_cache *tc)
{
    char why[200];
    const char *buf = doc->buf;
    int rc = 0;
    wpk_mlir_tensor type_s, *type = &type_s;
    if (tc->text && tc->len == g->type_body.len &&
        wpk_same_bytes(tc->text, buf + g->type_body.off, tc->len)) {
        type = &tc->type;
    } else {
        rc = wpk_mlir_parse_tensor(buf + g->type_body.off, g->type_body.len, type, why,
                                   sizeof why);
        if (!rc) {
            tc->text = buf + g->type_body.off;
            tc->len = g->type_body.len;
            tc->type = *type;
            tc->dtype = -1;
            type = &tc->type;
        }
    }
    if (rc) {
        wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_UNSUPPORTED, "%s: type %.*s: %s", W(where),
                      (int)(g->type.len > 200 ? 200 : g->type.len), buf + g->type.off, why);
        *ok = 0;
        return;
    }
    /* the usual `#ml_program.extern : T) : T` spells T twice the same way */
    int same_text = g->extern_type.len == g->type_body.len &&
                    wpk_same_bytes(buf + g->extern_type.off, buf + g->type_body.off, g->type_body.len);
    if (g->value_kind == WPK_VAL_EXTERN && g->extern_type.len && !same_text) {
        wpk_mlir_tensor et;
        if (wpk_mlir_parse_tensor(buf + g->extern_type.off, g->extern_type.len, &et, why, sizeof why) ||
            !wpk_mlir_tensor_equal(&et, type)) {
            wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_SHAPE,
                          "%s: its #ml_program.extern says %.*s but the global's type is %.*s", W(where),
                          (int)(g->extern_type.len > 200 ? 200 : g->extern_type.len),
                          buf + g->extern_type.off, (int)(g->type_body.len > 200 ? 200 : g->type_body.len),
                          buf + g->type_body.off);
            *ok = 0;
            return;
        }
    }
    int same_dims = t->rank == type->rank;
    for (unsigned i = 0; same_dims && i < t->rank; i++)
        same_dims = t->dims[i] == type->dims[i];
    int elem_ok;
    if (tc->dtype == t->dtype && strcmp(tc->type.elem, type->elem) == 0) {
        elem_ok = tc->elem_ok;
    } else {
        elem_ok = wpk_mlir_elem_matches(type->elem, t->dtype);
        if (tc->text && strcmp(tc->type.elem, type->elem) == 0) {
            tc->dtype = t->dtype;
            tc->elem_ok = elem_ok;
        }
    }
    if (!elem_ok || !same_dims) {
        char q[300], et_s[200], shape[200];
        wpk_quote(q, sizeof q, t->name, t->name_len);
        wpk_mlir_format_tensor(et_s, sizeof et_s, t->dtype, t->rank, t->dims);
        const char *dn = wpack_dtype_name(t->dtype);
        size_t o = 0;
        shape[0] = 0;
        for (unsigned i = 0; i < t->rank && o < sizeof shape - 24; i++) {
            wpk_fmt(shape + o, sizeof shape - o, i ? ", %llu" : "%llu", (unsigned long long)t->dims[i]);
            o += strlen(shape + o);
        }
        wpk_diag_emit(d, WPACK_DIAG_ERROR, elem_ok ? WPACK_E_SHAPE : WPACK_E_DTYPE,
                      "%s: type %.*s does not match entry '%s' (%s [%s], i.e. %s): %s differ", W(where),
                      (int)(g->type_body.len > 200 ? 200 : g->type_body.len), buf + g->type_body.off,
                      q, dn ? dn : "block dtype", shape, et_s,
                      !elem_ok && !same_dims ? "element type and dims" : !elem_ok ? "element types" : "dims");
        *ok = 0;
        return;
    }
    size_t esz = wpack_dtype_size(t->dtype);
    uint64_t want;
    if (!esz || !wpk_mul(t->nelems, esz, &want) || want != t->nbytes) {
        char q[300];
        wpk_quote(q, sizeof q, t->name, t->name_len);
        wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_SIZE,
                      "%s: entry '%s' holds %llu bytes, not elements x size", W(where), q,
                      (unsigned long long)t->nbytes);
        *ok = 0;
    }
}

static int bad_iree_name(const char *s)
{
    return strchr(s, '"') || strchr(s, '\\');
}

/* Listing of entries no global used. */
static void report_unused(wpk_diag *d, const wpack_archive *ar, const unsigned char *used,
                          uint64_t count, uint64_t *unused)
{
    uint64_t n = 0;
    char list[1400] = "";
    size_t o = 0;
    for (uint64_t i = 0; i < count; i++) {
        if (used[i])
            continue;
        if (n < 20 && o < sizeof list - 300) {
            wpack_tensor t;
            if (wpack_tensor_at(ar, i, &t) == WPACK_OK) {
                char q[260];
                wpk_quote(q, sizeof q, t.name, t.name_len);
                wpk_fmt(list + o, sizeof list - o, "%s'%s'", n ? ", " : "", q);
                o += strlen(list + o);
            }
        }
        n++;
    }
    *unused = n;
    if (n)
        wpk_diag_emit(d, WPACK_DIAG_NOTE, 0, "%llu archive entr%s not used by any global: %s%s",
                      (unsigned long long)n, n == 1 ? "y" : "ies", list, n > 20 ? ", ..." : "");
}

/* The plan has room for every global (2 MiB steps of huge pages past 2 MiB). */
static size_t plan_bytes(const wpk_mlir_doc *doc)
{
    return (doc->nglobals ? doc->nglobals : 1) * sizeof(wpk_plan_item);
}

void wpk_plan_free(wpk_plan_item *items, const wpk_mlir_doc *doc)
{
    wpk_big_free(items, plan_bytes(doc));
}

int wpk_resolve_plan(const wpack_archive *ar, const wpk_mlir_doc *doc,
                     const wpack_resolve_options *opt, wpk_diag *d, wpk_plan_item **items_out,
                     size_t *nitems, wpack_resolve_result *res)
{
    *items_out = NULL;
    *nitems = 0;
    const char *scope = opt->scope ? opt->scope : "model";
    if (opt->emit == WPACK_EMIT_IREE && bad_iree_name(scope))
        wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_UNSUPPORTED,
                      "scope '%s' has a '\"' or '\\', which IREE prints unescaped", scope);
    uint64_t count = wpack_count(ar);
    /* many globals: every symbol is looked up as an entry name (for the
     * duplicate check and the plan), through the entry index (~170
     * instructions an entry to build, ~1000 a binary search saved) */
    entry_index index = {ar, count, 0, NULL, 0, 0, 0}, *ix = NULL;
    uint32_t *match = NULL;
    if (doc->nglobals >= 64 && doc->nglobals >= count / 4 && count < UINT32_MAX &&
        (match = wpk_big_calloc(doc->nglobals * sizeof *match)))
        ix = &index;
    report_duplicates(d, doc, doc->nglobals < 2 ? 0 : find_duplicates(doc, ix, match));

    map_pair *map = NULL;
    size_t nmap = opt->map_count;
    if (nmap) {
        map = malloc(nmap * sizeof *map);
        if (!map) {
            wpk_big_free(match, doc->nglobals * sizeof *match);
            wpk_big_free(index.slot, index.cap * sizeof *index.slot);
            wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_NOMEM, "out of memory");
            return d->first_error;
        }
        for (size_t i = 0; i < nmap; i++)
            map[i] = (map_pair){opt->map_globals[i], opt->map_entries[i]};
        qsort(map, nmap, sizeof *map, map_cmp);
    }
    unsigned char *used = calloc(count ? count : 1, 1);
    wpk_plan_item *items = wpk_big_calloc(plan_bytes(doc));
    if (!used || !items) {
        free(map);
        free(used);
        wpk_big_free(items, plan_bytes(doc));
        wpk_big_free(match, doc->nglobals * sizeof *match);
        wpk_big_free(index.slot, index.cap * sizeof *index.slot);
        wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_NOMEM, "out of memory");
        return d->first_error;
    }
    size_t n = 0, suggested = 0;
    int shared = 0; /* some entry serves more than one global */
    wpack_info info; /* its index checksum: the id in wpack: URIs */
    wpack_get_info(ar, &info);
    uint64_t other_id = 0;
    char other_where[400] = "";
    type_cache tc = {NULL, 0, {{0}, 0, {0}}, -1, 0};
    unsigned k = opt->max_suggestions ? opt->max_suggestions : 3;
    for (size_t i = 0; i < doc->nglobals; i++) {
        const wpk_global *g = &doc->globals[i];
        if (!is_weight_global(g))
            continue;
        res->globals++;
        lazy_where lw; /* its buf is formatted only when a message needs it */
        lw.d = d;
        lw.g = g;
        lw.ready = 0;
        lazy_where *where = &lw;
        wpack_tensor t;
        char *lookup = NULL;
        uint64_t uri_id = 0;
        int found = find_entry(ar, ix, match, i, doc, g, map, nmap, &t, &lookup, &uri_id, d, where);
        if (found == 2) {
            res->uri_reread++;
            if (uri_id != info.index_checksum && res->uri_other_archive++ == 0) {
                other_id = uri_id;
                wpk_fmt(other_where, sizeof other_where, "%s", W(where));
            }
            found = 1;
        }
        if (found == 0) {
            res->missing++;
            int sev = opt->allow_missing ? WPACK_DIAG_WARNING : WPACK_DIAG_ERROR;
            report_unresolved(d, ar, where, lookup ? lookup : g->name, k, sev, suggested++ < 50);
        }
        free(lookup);
        if (found != 1)
            continue;
        int ok = 1;
        wpk_plan_item *it = &items[n];
        memset(it, 0, sizeof *it);
        it->global = i;
        it->entry = t.index;
        it->entry_name = t.name;
        check_types(d, doc, g, &t, where, &ok, &tc);
        if (opt->emit == WPACK_EMIT_IREE && bad_iree_name(t.name)) {
            wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_UNSUPPORTED,
                          "%s: entry name has a '\"' or '\\', which IREE prints unescaped (use --emit uri)",
                          W(where));
            ok = 0;
        }
        if (g->is_mutable)
            wpk_diag_emit(d, WPACK_DIAG_WARNING, 0,
                          "%s: is mutable; the archive's bytes become its initial value only", W(where));
        if (t.index < count) {
            shared |= used[t.index];
            used[t.index] = 1;
        } else {
            shared = 1;
        }
        if (ok)
            n++;
    }
    /* several globals on one entry: their types must agree (items are in
     * file order already; they are sorted by entry only when one is shared) */
    if (n > 1 && shared) {
        qsort(items, n, sizeof *items, entry_cmp_item);
        for (size_t i = 1; i < n; i++) {
            if (items[i].entry != items[i - 1].entry)
                continue;
            const wpk_global *a = &doc->globals[items[i - 1].global];
            const wpk_global *b = &doc->globals[items[i].global];
            /* both parsed in check_types (they are in the plan) */
            wpk_mlir_tensor ta, tb;
            char why[8];
            if (!wpk_mlir_parse_tensor(doc->buf + a->type_body.off, a->type_body.len, &ta, why,
                                       sizeof why) &&
                !wpk_mlir_parse_tensor(doc->buf + b->type_body.off, b->type_body.len, &tb, why,
                                       sizeof why) &&
                wpk_mlir_tensor_equal(&ta, &tb))
                continue;
            char where[400], q[300];
            wpk_global_where(where, sizeof where, d, b);
            wpk_quote(q, sizeof q, items[i].entry_name, strlen(items[i].entry_name));
            wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_SHAPE,
                          "%s: shares entry '%s' with the global at %u:%u but their types differ "
                          "(%.*s vs %.*s)", where, q, a->line, a->col,
                          (int)(b->type.len > 200 ? 200 : b->type.len), doc->buf + b->type.off,
                          (int)(a->type.len > 200 ? 200 : a->type.len), doc->buf + a->type.off);
        }
        qsort(items, n, sizeof *items, global_cmp_item);
    }
    if (res->uri_other_archive)
        wpk_diag_emit(d, opt->strict ? WPACK_DIAG_ERROR : WPACK_DIAG_NOTE,
                      opt->strict ? WPACK_E_NOT_FOUND : 0,
                      "%s%llu globals' wpack.uri name archive %016llx (first: %s), not this one "
                      "(%016llx); %s", opt->strict ? "--strict: " : "",
                      (unsigned long long)res->uri_other_archive, (unsigned long long)other_id,
                      other_where, (unsigned long long)info.index_checksum,
                      opt->strict ? "without --strict they are re-pointed at it by entry name"
                                  : "re-pointed at it by the entry names their URIs hold");
    report_unused(d, ar, used, count, &res->unused_entries);
    res->resolved = n;
    wpk_big_free(match, doc->nglobals * sizeof *match);
    wpk_big_free(index.slot, index.cap * sizeof *index.slot);
    free(map);
    free(used);
    if (d->first_error) {
        wpk_big_free(items, plan_bytes(doc));
        return d->first_error;
    }
    *items_out = items;
    *nitems = n;
    return 0;
}

int wpack_resolve_buffer(const wpack_archive *ar, const char *mlir, size_t len,
                         const wpack_resolve_options *opt, wpack_write_fn write, void *user,
                         wpack_resolve_result *res)
{
    return wpk_resolve_run(ar, mlir, len, opt, write, NULL, NULL, user, res);
}

int wpk_resolve_run(const wpack_archive *ar, const char *mlir, size_t len,
                    const wpack_resolve_options *opt_in, wpack_write_fn write,
                    int (*copy_input)(void *, size_t, size_t),
                    void (*write_error)(void *, char *, size_t), void *user,
                    wpack_resolve_result *res_out)
{
    wpack_resolve_options defaults;
    wpack_resolve_options_init(&defaults);
    const wpack_resolve_options *opt = opt_in ? opt_in : &defaults;
    wpack_resolve_result res = {0};
    wpk_diag d = {opt->diag, opt->diag_user, opt->source_name ? opt->source_name : "<input>", 0, 0, 0};
    if (!ar || !write || (!mlir && len) || opt->emit < WPACK_EMIT_URI || opt->emit > WPACK_EMIT_INLINE) {
        wpk_diag_emit(&d, WPACK_DIAG_ERROR, WPACK_E_INVALID_ARGUMENT, "wpack_resolve: bad arguments");
        return WPACK_E_INVALID_ARGUMENT;
    }
    char err[600];
    wpk_mlir_doc *doc;
    int rc = wpk_mlir_scan_buffer(mlir, len, opt->annotate ? WPK_SCAN_OPS : 0, &doc, err, sizeof err);
    if (rc) {
        wpk_diag_emit(&d, WPACK_DIAG_ERROR, rc, "%s:%s", d.source, err);
        return rc;
    }
    wpk_plan_item *items;
    size_t n;
    rc = wpk_resolve_plan(ar, doc, opt, &d, &items, &n, &res);
    const char *prefix = opt->attr_prefix && opt->attr_prefix[0] ? opt->attr_prefix : "wpack";
    wpk_strbuf text = {0};
    wpk_patch *patches = NULL;
    size_t npatches = 0;
    if (!rc && opt->annotate)
        rc = wpk_annotate_plan(ar, doc, opt, prefix, &d, items, n, &text, &patches, &npatches, &res);
    if (!rc) {
        wpk_emitter e = {.doc = doc, .ar = ar, .emit = opt->emit,
                         .scope = opt->scope ? opt->scope : "model", .items = items, .nitems = n,
                         .write = write, .user = user, .patches = patches, .npatches = npatches,
                         .attr_prefix = opt->annotate ? prefix : NULL, .copy_input = copy_input,
                         .write_error = write_error};
        rc = wpk_emit_document(&e, err, sizeof err);
        if (rc)
            wpk_diag_emit(&d, WPACK_DIAG_ERROR, rc, "%s", err);
    }
    free(patches);
    free(text.p);
    wpk_plan_free(items, doc);
    wpk_mlir_doc_free(doc);
    res.warnings = d.warnings;
    if (res_out)
        *res_out = res;
    return rc;
}
