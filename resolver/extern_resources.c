/*
 * extern_resources.c - externalize's builtin resources: the blobs by key
 * (every dense_resource<KEY> is looked up in a sorted index), the
 * references left to each once the moved values are gone, and the edits
 * removing the blobs nothing refers to (extern_int.h).
 */
#include <stdlib.h>
#include <string.h>

#include "extern_int.h"
#include "internal.h"
#include "mlir_lex.h"

/* The key of `dense_resource<KEY>` (as written, NUL-terminated, heap). */
char *wpk_resource_key(const char *buf, wpk_span v, size_t *n)
{
    wpk_lexer lx;
    wpk_lex_init(&lx, buf, v.off + v.len, v.off);
    wpk_lex_next(&lx); /* dense_resource */
    if (!wpk_tok_is(&lx, wpk_lex_next(&lx), '<'))
        return NULL;
    wpk_tok k = wpk_lex_next(&lx);
    if (k.kind != WPK_TOK_BAREID && k.kind != WPK_TOK_STRING)
        return NULL;
    return wpk_mlir_decode_string(buf + k.off, k.len, n);
}

/* The builtin resources by decoded key, sorted (equal keys in file
 * order): every dense_resource<KEY> is looked up here (decoding every key
 * for each lookup was globals x resources: 20,000 torch-mlir weights, each
 * with its blob, took 6.6 s). */

static int res_key_cmp(const void *a, const void *b)
{
    const wpk_res_key *x = a, *y = b;
    int c = wpk_bytes_cmp(x->key, x->n, y->key, y->n);
    return c ? c : x->ix < y->ix ? -1 : x->ix > y->ix;
}

int wpk_res_index_build(const wpk_mlir_doc *doc, wpk_res_index *x)
{
    x->n = 0;
    x->v = malloc((doc->nresources + 1) * sizeof *x->v);
    if (!x->v)
        return WPACK_E_NOMEM;
    for (size_t i = 0; i < doc->nresources; i++) {
        const wpk_resource *r = &doc->resources[i];
        size_t n;
        char *k = wpk_mlir_decode_string(doc->buf + r->key.off, r->key.len, &n);
        if (!k)
            return WPACK_E_NOMEM;
        x->v[x->n++] = (wpk_res_key){k, n, i};
    }
    qsort(x->v, x->n, sizeof *x->v, res_key_cmp);
    return 0;
}

void wpk_res_index_free(wpk_res_index *x)
{
    for (size_t i = 0; x->v && i < x->n; i++)
        free(x->v[i].key);
    free(x->v);
    x->v = NULL;
}

/* The resource of key (a later definition wins), or NULL. */
const wpk_resource *wpk_find_resource(const wpk_mlir_doc *doc, const wpk_res_index *x,
                                         const char *key, size_t n)
{
    size_t lo = 0, hi = x->n;
    while (lo < hi) { /* the first above every equal key */
        size_t mid = lo + (hi - lo) / 2;
        if (wpk_bytes_cmp(x->v[mid].key, x->v[mid].n, key, n) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo && wpk_bytes_cmp(x->v[lo - 1].key, x->v[lo - 1].n, key, n) == 0
               ? &doc->resources[x->v[lo - 1].ix] : NULL;
}

/* ------------------------------------------------ dropped resources */

/* Is byte off inside one of the spans v[0..n) (in file order)? */
static int in_spans(const wpk_span *v, size_t n, size_t off)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        wpk_span x = v[mid];
        if (off < x.off)
            hi = mid;
        else if (off >= x.off + x.len)
            lo = mid + 1;
        else
            return 1;
    }
    return 0;
}

/* Count the references to resource r outside moved values and blobs:
 * every "dense_resource<KEY" in the text (comments and strings included,
 * which only keeps a blob that could have gone). */
void wpk_count_refs(const wpk_mlir_doc *doc, const wpk_res_index *keys, const wpk_span *moved,
                    size_t nmoved, const wpk_span *lits, size_t nlits, size_t *refs)
{
    static const char pat[] = "dense_resource<";
    size_t pl = sizeof pat - 1, pos = 0;
    for (size_t ri = 0; ri <= doc->nresources; ri++) {
        size_t end = ri < doc->nresources ? doc->resources[ri].blob.off : doc->len;
        while (pos < end) {
            const char *hit = memmem(doc->buf + pos, end - pos, pat, pl);
            if (!hit)
                break;
            size_t at = (size_t)(hit - doc->buf);
            pos = at + pl;
            if (in_spans(moved, nmoved, at) || in_spans(lits, nlits, at))
                continue;
            wpk_lexer lx;
            wpk_lex_init(&lx, doc->buf, doc->len, pos);
            wpk_tok k = wpk_lex_next(&lx);
            if (k.kind != WPK_TOK_BAREID && k.kind != WPK_TOK_STRING)
                continue;
            size_t kn;
            char *key = wpk_mlir_decode_string(doc->buf + k.off, k.len, &kn);
            if (!key)
                continue;
            const wpk_resource *r = wpk_find_resource(doc, keys, key, kn);
            if (r)
                refs[r - doc->resources]++;
            free(key);
        }
        if (ri < doc->nresources)
            pos = doc->resources[ri].blob.off + doc->resources[ri].blob.len;
    }
}

static size_t blob_end(const wpk_resource *r)
{
    return r->blob.off + r->blob.len + 1; /* the closing quote */
}

/* Are resources i and i+1 neighbours in one dictionary (only blanks and
 * one ',' between them)? */
static int same_dict(const wpk_mlir_doc *doc, size_t i)
{
    size_t a = blob_end(&doc->resources[i]), b = doc->resources[i + 1].key.off;
    int commas = 0;
    for (size_t k = a; k < b; k++) {
        char c = doc->buf[k];
        if (c == ',')
            commas++;
        else if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            return 0;
    }
    return commas == 1;
}

/* Patches removing the resources marked in drop[] (with their commas). */
size_t wpk_drop_patches(const wpk_mlir_doc *doc, const unsigned char *drop, wpk_patch *out)
{
    size_t np = 0;
    for (size_t g0 = 0; g0 < doc->nresources;) {
        size_t g1 = g0;
        while (g1 + 1 < doc->nresources && same_dict(doc, g1))
            g1++;
        for (size_t a = g0; a <= g1;) {
            if (!drop[a]) {
                a++;
                continue;
            }
            size_t b = a;
            while (b + 1 <= g1 && drop[b + 1])
                b++;
            size_t from, to;
            if (b < g1) {
                from = doc->resources[a].key.off;
                to = doc->resources[b + 1].key.off;
            } else if (a > g0) {
                from = blob_end(&doc->resources[a - 1]);
                to = blob_end(&doc->resources[b]);
            } else {
                from = doc->resources[a].key.off;
                to = blob_end(&doc->resources[b]);
                /* the whole dictionary: its line goes too, so that no line
                 * of blanks is left between the braces */
                size_t k = from;
                while (k > 0 && (doc->buf[k - 1] == ' ' || doc->buf[k - 1] == '\t'))
                    k--;
                if (k > 0 && doc->buf[k - 1] == '\n')
                    from = k - 1 - (k >= 2 && doc->buf[k - 2] == '\r');
            }
            out[np++] = (wpk_patch){from, to - from, "", 0};
            a = b + 1;
        }
        g0 = g1 + 1;
    }
    return np;
}

