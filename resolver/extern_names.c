/*
 * extern_names.c - the entry names of the globals externalize moves. A
 * global's entry is named by its symbol; a symbol moved from two or more
 * modules (nested modules are symbol tables of their own, so
 * `module @a { @w } module @b { @w }` is two globals) is named by the path
 * of the named modules around it, '/'-joined, then the symbol: "a/w" and
 * "b/w". Unnamed modules add nothing to the path, so two such globals in
 * unnamed modules, or a path name that another moved global already has,
 * is an error that says so.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "resolve_int.h"

typedef struct {
    size_t i;          /* index into the caller's arrays */
    const char *name;  /* the final entry name */
    size_t n;
    const wpk_global *g;
} named;

static int by_name_scope(const void *a, const void *b)
{
    const named *x = a, *y = b;
    int c = wpk_bytes_cmp(x->name, x->n, y->name, y->n);
    if (c)
        return c;
    if (x->g->scope != y->g->scope)
        return x->g->scope < y->g->scope ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* "m1/m2/sym" for g (heap, NUL-terminated), or NULL (out of memory). */
static char *path_name(const wpk_mlir_doc *doc, const wpk_global *g, size_t *len)
{
    wpk_strbuf sb = {0};
    /* the modules from the innermost out; written outermost first */
    uint32_t chain[64];
    size_t depth = 0;
    for (uint32_t s = g->scope; s && s <= doc->nmodules && depth < 64; s = doc->modules[s - 1].parent)
        chain[depth++] = s;
    while (depth--) {
        wpk_span sym = doc->modules[chain[depth] - 1].sym;
        if (sym.len < 2)
            continue;
        size_t n;
        char *m = wpk_mlir_decode_string(doc->buf + sym.off + 1, sym.len - 1, &n);
        if (!m) {
            sb.failed = 1;
            break;
        }
        wpk_sb_put(&sb, m, n);
        wpk_sb_put(&sb, "/", 1);
        free(m);
    }
    wpk_sb_put(&sb, g->name, g->name_len);
    if (sb.failed) {
        free(sb.p);
        return NULL;
    }
    *len = sb.n;
    return sb.p;
}

int wpk_extern_names(const wpk_mlir_doc *doc, const size_t *globals, size_t n, char **names,
                     size_t *name_lens, wpk_diag *d)
{
    named *v = malloc((n + 1) * sizeof *v);
    if (!v)
        return WPACK_E_NOMEM;
    for (size_t i = 0; i < n; i++) {
        const wpk_global *g = &doc->globals[globals[i]];
        names[i] = NULL;
        name_lens[i] = g->name_len;
        v[i] = (named){i, g->name, g->name_len, g};
    }
    qsort(v, n, sizeof *v, by_name_scope);
    int rc = 0;
    for (size_t a = 0; a < n && !rc;) {
        size_t b = a + 1;
        while (b < n && wpk_bytes_cmp(v[b].name, v[b].n, v[a].name, v[a].n) == 0)
            b++;
        if (v[b - 1].g->scope != v[a].g->scope) /* one symbol, several modules */
            for (size_t k = a; k < b; k++) {
                size_t i = v[k].i;
                if (!(names[i] = path_name(doc, v[k].g, &name_lens[i])))
                    rc = WPACK_E_NOMEM;
            }
        a = b;
    }
    if (rc) {
        free(v);
        return rc;
    }
    /* no two moved globals may end up with one name (one symbol defined
     * twice in one module is the writer's "added twice", as before) */
    for (size_t i = 0; i < n; i++) {
        v[i].name = names[v[i].i] ? names[v[i].i] : v[i].g->name;
        v[i].n = name_lens[v[i].i];
    }
    qsort(v, n, sizeof *v, by_name_scope);
    for (size_t k = 0; k + 1 < n; k++) {
        const named *x = &v[k], *y = &v[k + 1];
        if (wpk_bytes_cmp(x->name, x->n, y->name, y->n) || x->g->scope == y->g->scope)
            continue;
        char wx[400], wy[400], q[300];
        wpk_global_where(wx, sizeof wx, d, x->g);
        wpk_global_where(wy, sizeof wy, d, y->g);
        wpk_quote(q, sizeof q, x->name, x->n);
        wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_EXISTS,
                      "%s and %s: both would be entry '%s' (a symbol in several modules is "
                      "named by the path of its named modules: give the modules names)",
                      wx, wy, q);
        rc = WPACK_E_EXISTS;
    }
    free(v);
    return rc;
}
