/*
 * entry_lookup.c - which archive entry a weight global names: the key of
 * its #flow.parameter.named value, the entry its wpack.uri names, its
 * symbol (an entry name or a name-map name), or the --map entry for it;
 * and the message when none has it (with the closest entry names).
 */
#include <stdlib.h>
#include <string.h>

#include "mlir_literal.h"
#include "internal.h"
#include "mlir_lex.h"
#include "resolve_plan.h"

/* The key of #flow.parameter.named<["scope"::]"key">, decoded (heap), its
 * length in *n. */
static char *param_key(const wpk_mlir_doc *doc, const wpk_global *g, size_t *n)
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
    return wpk_mlir_decode_string(doc->buf + s.off, s.len, n);
}

int wpk_map_cmp(const void *a, const void *b)
{
    return strcmp(((const wpk_map_pair *)a)->global, ((const wpk_map_pair *)b)->global);
}

static const char *map_lookup(const wpk_map_pair *m, size_t n, const char *name)
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
    /* a NUL (written \00) would cut the name short: no URI */
    int ok = n > 23 && memcmp(u, "wpack:", 6) == 0 && u[22] == '/' && !memchr(u, 0, n);
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

int wpk_find_entry(const wpack_archive *ar, wpk_entry_index *ix, const uint32_t *match, size_t gi,
                   const wpk_mlir_doc *doc, const wpk_global *g, const wpk_map_pair *map,
                   size_t nmap, wpack_tensor *t, char **lookup_name, uint64_t *uri_id,
                   wpk_diag *d, wpk_lazy_where *where)
{
    *lookup_name = NULL;
    if (g->value_kind == WPK_VAL_PARAM) {
        size_t kn = 0;
        char *key = param_key(doc, g, &kn);
        if (!key || memchr(key, 0, kn)) { /* a NUL would cut the key short */
            wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_INPUT, "%s: %s", wpk_where(where),
                          key ? "the key of its #flow.parameter.named value holds a NUL byte, "
                                "which no entry name can"
                              : "cannot read the key of its #flow.parameter.named value");
            free(key);
            return -1;
        }
        *lookup_name = key;
        uint64_t e = ix ? wpk_entry_index_find(ix, key, kn) : UINT64_MAX;
        if (e != UINT64_MAX)
            return wpack_tensor_at(ar, e, t) == WPACK_OK;
        return wpack_find(ar, key, t) == WPACK_OK;
    }
    /* a symbol with a NUL (@"w\00x") names no entry, name-map name or
     * --map key (none has one); as a C string it would be cut to "w" */
    int has_nul = memchr(g->name, 0, g->name_len) != NULL;
    const char *m = nmap && !has_nul ? map_lookup(map, nmap, g->name) : NULL;
    /* an earlier --emit uri output: its URI names the entry (--map overrides) */
    if (g->uri_value.len && !m) {
        uint64_t id;
        int nomem;
        char *name = uri_entry(doc->buf + g->uri_value.off, g->uri_value.len, &id, &nomem);
        if (!name) {
            wpk_diag_emit(d, WPACK_DIAG_ERROR, nomem ? WPACK_E_NOMEM : WPACK_E_INPUT,
                          "%s: %s", wpk_where(where), nomem ? "out of memory" :
                          "its wpack.uri is not a wpack: URI (\"wpack:<16 hex>/<entry>\"); "
                          "remove it or name the entry with --map");
            return -1;
        }
        *uri_id = id;
        *lookup_name = name;
        uint64_t e = ix ? wpk_entry_index_find(ix, name, strlen(name)) : UINT64_MAX;
        if (e != UINT64_MAX ? wpack_tensor_at(ar, e, t) == WPACK_OK : wpack_find(ar, name, t) == WPACK_OK)
            return 2;
        char q[300];
        wpk_quote(q, sizeof q, name, strlen(name));
        wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_NOT_FOUND,
                      "%s: its wpack.uri names entry '%s', which is not in the archive "
                      "(--map can name another)", wpk_where(where), q);
        return -1;
    }
    if (match && match[gi])
        return wpack_tensor_at(ar, match[gi] - 1, t) == WPACK_OK;
    if (has_nul)
        return 0;
    if (wpack_find(ar, g->name, t) == WPACK_OK) /* the name map */
        return 1;
    if (!m)
        return 0;
    if (wpack_find(ar, m, t) == WPACK_OK)
        return 1;
    char q[300];
    wpk_quote(q, sizeof q, m, strlen(m));
    wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_NOT_FOUND,
                  "%s: --map sends it to '%s', which is not in the archive", wpk_where(where), q);
    return -1;
}

void wpk_report_unresolved(wpk_diag *d, const wpack_archive *ar, wpk_lazy_where *where,
                           const char *name, unsigned k, int severity, uint64_t *budget)
{
    char list[1200] = "";
    if (budget) {
        uint64_t best[16];
        size_t n = wpk_closest_entries(ar, name, best, k, budget);
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
                  "%s: no archive entry, name-map name or --map entry for it%s%s", wpk_where(where),
                  list, severity == WPACK_DIAG_ERROR ? " (--allow-missing leaves it as it is)"
                                                     : "; left unresolved");
}
