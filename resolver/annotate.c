/*
 * annotate.c - --annotate: calibration stats as discardable attributes.
 *
 * The rule (spec appendix B, "Annotations"): the op that produces module
 * path P's output is the LAST op in program order that
 *   - sits directly in a function body (region depth 2 under a top-level
 *     `module {`, 1 without one; ops in nested regions do not count),
 *   - defines at least one result (its statement starts with '%'), and
 *   - has a location that names P or a path under P ("P." prefix), where
 *     the names of a location are those annotate_loc.c reads.
 * When one op is chosen for several paths, the longest path wins (the
 * others are reported). The attributes go where MLIR's printers put the
 * attr-dict: right after the op name for arith.constant and linalg.* ops,
 * else before the op's last top-level ':' (its trailing type).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "mlir_lex.h"
#include "resolve_int.h"

typedef struct {
    uint64_t stats;             /* index for wpack_stats_at */
    const char *key;
    size_t key_len;
    size_t op;                  /* chosen op (index in doc->ops), or SIZE_MAX */
} act_rec;

typedef struct {
    act_rec *recs;
    size_t n;
    size_t *slots;              /* open addressing over recs, SIZE_MAX empty */
    size_t cap;
    size_t cur_op;
} act_table;

static size_t slot_of(const act_table *t, const char *s, size_t n)
{
    size_t i = wpk_xxh3(s, n) & (t->cap - 1);
    while (t->slots[i] != (size_t)-1) {
        const act_rec *r = &t->recs[t->slots[i]];
        if (r->key_len == n && memcmp(r->key, s, n) == 0)
            break;
        i = (i + 1) & (t->cap - 1);
    }
    return i;
}

/* Every name of the op's location and each of its "."-prefixes. */
static void on_name(void *user, const char *s, size_t n)
{
    act_table *t = user;
    for (size_t len = n; len > 0; len--) {
        if (len != n && s[len] != '.')
            continue;
        size_t i = slot_of(t, s, len);
        if (t->slots[i] != (size_t)-1)
            t->recs[t->slots[i]].op = t->cur_op;
    }
}

static int tok_word(const wpk_lexer *lx, wpk_tok t, const char *w)
{
    return t.kind == WPK_TOK_BAREID && wpk_span_is(lx->buf, (wpk_span){t.off, t.len}, w);
}

/* Where the attr-dict of op goes: *dict (len 0 if it has none) and, for
 * a new one, *insert with its lead/trail spacing. 0, or -1 when the op
 * has no place this reader knows. */
static int attr_place(const wpk_mlir_doc *doc, const wpk_located_op *op, wpk_span *dict,
                      size_t *insert, const char **lead, const char **trail)
{
    wpk_lexer lx;
    wpk_lex_init(&lx, doc->buf, op->attr_insert, op->op_start);
    wpk_tok t = wpk_lex_next(&lx);
    if (t.kind == WPK_TOK_PERCENT) { /* results: %a, %b:2 = */
        while (t.kind != WPK_TOK_EOF && t.kind != WPK_TOK_ERROR && !wpk_tok_is(&lx, t, '='))
            t = wpk_lex_next(&lx);
        t = wpk_lex_next(&lx);
    }
    *dict = (wpk_span){0, 0};
    if (t.kind != WPK_TOK_BAREID && t.kind != WPK_TOK_STRING)
        return -1;
    int after_name = t.kind == WPK_TOK_BAREID &&
                     (tok_word(&lx, t, "arith.constant") ||
                      (t.len > 7 && memcmp(doc->buf + t.off, "linalg.", 7) == 0));
    if (after_name) {
        *insert = t.off + t.len;
        *lead = " ";
        *trail = "";
        wpk_tok p = wpk_lex_peek(&lx);
        if (wpk_tok_is(&lx, p, '{')) {
            wpk_dict_entry e[1];
            size_t n, close;
            if (wpk_mlir_parse_dict(doc->buf, op->attr_insert, p.off, e, 1, &n, &close) == 0)
                *dict = (wpk_span){p.off, close + 1 - p.off};
        }
        return 0;
    }
    /* the last ':' at depth 0, and a {...} dict right before it */
    size_t colon = (size_t)-1, group_open = (size_t)-1, group_close = (size_t)-1;
    size_t cand_open = (size_t)-1, cand_close = (size_t)-1;
    unsigned depth = 0;
    for (;;) {
        t = wpk_lex_next(&lx);
        if (t.kind == WPK_TOK_EOF || t.kind == WPK_TOK_ERROR)
            break;
        if (t.kind != WPK_TOK_PUNCT)
            continue;
        char c = doc->buf[t.off];
        if (c == '(' || c == '[' || c == '{' || c == '<') {
            if (!depth && c == '{')
                group_open = t.off;
            depth++;
        } else if (c == ')' || c == ']' || c == '}' || c == '>') {
            if (depth)
                depth--;
            if (!depth && c == '}')
                group_close = t.off;
        } else if (c == ':' && !depth) {
            colon = t.off;
            int adjacent = group_close != (size_t)-1;
            for (size_t k = group_close + 1; adjacent && k < colon; k++)
                adjacent = doc->buf[k] == ' ' || doc->buf[k] == '\t';
            cand_open = adjacent ? group_open : (size_t)-1;
            cand_close = adjacent ? group_close : (size_t)-1;
        }
    }
    if (colon == (size_t)-1)
        return -1;
    *insert = colon;
    *lead = "";
    *trail = " ";
    if (cand_open != (size_t)-1) {
        wpk_dict_entry e[1];
        size_t n, close;
        if (wpk_mlir_parse_dict(doc->buf, op->attr_insert, cand_open, e, 1, &n, &close) == 0 &&
            close == cand_close)
            *dict = (wpk_span){cand_open, close + 1 - cand_open};
    }
    return 0;
}

static int rec_by_op(const void *a, const void *b)
{
    const act_rec *x = a, *y = b;
    if (x->op != y->op)
        return x->op < y->op ? -1 : 1;
    return x->key_len > y->key_len ? -1 : x->key_len < y->key_len; /* longest first */
}

int wpk_annotate_plan(const wpack_archive *ar, const wpk_mlir_doc *doc, const char *prefix,
                      wpk_diag *d, wpk_plan_item *items, size_t nitems, wpk_strbuf *text,
                      wpk_patch **patches_out, size_t *npatches, wpack_resolve_result *res)
{
    *patches_out = NULL;
    *npatches = 0;
    /* texts are offsets into text until the end (it may move while growing) */
    size_t *item_off = malloc((nitems + 1) * sizeof *item_off);
    uint64_t nstats = wpack_stats_count(ar);
    act_table t = {0};
    t.recs = malloc((nstats + 1) * sizeof *t.recs);
    if (!item_off || !t.recs)
        goto nomem;
    for (size_t i = 0; i < nitems; i++) {
        wpack_stats st;
        item_off[i] = (size_t)-1;
        if (wpack_stats_find(ar, items[i].entry_name, WPACK_STATS_WEIGHT, &st) != WPACK_OK)
            continue;
        item_off[i] = text->n;
        wpk_stats_attr_text(text, &st, prefix);
        wpk_sb_put(text, "", 1); /* keep the NUL */
        res->annotated_globals++;
    }
    for (uint64_t i = 0; i < nstats; i++) {
        wpack_stats st;
        if (wpack_stats_at(ar, i, &st) == WPACK_OK && st.kind == WPACK_STATS_ACTIVATION)
            t.recs[t.n++] = (act_rec){i, st.key, strlen(st.key), (size_t)-1};
    }
    t.cap = 16;
    while (t.cap < 2 * t.n + 2)
        t.cap *= 2;
    t.slots = malloc(t.cap * sizeof *t.slots);
    if (!t.slots)
        goto nomem;
    memset(t.slots, 0xff, t.cap * sizeof *t.slots);
    for (size_t i = 0; i < t.n; i++)
        t.slots[slot_of(&t, t.recs[i].key, t.recs[i].key_len)] = i;
    unsigned fdepth = doc->has_module ? 2 : 1;
    for (size_t i = 0; t.n && i < doc->nops; i++) {
        const wpk_located_op *op = &doc->ops[i];
        if (op->depth != fdepth || doc->buf[op->op_start] != '%')
            continue;
        t.cur_op = i;
        wpk_loc_names(doc, op->loc, on_name, &t);
    }
    qsort(t.recs, t.n, sizeof *t.recs, rec_by_op);
    wpk_patch *patches = malloc((t.n + 1) * sizeof *patches);
    size_t *patch_text = malloc((t.n + 1) * sizeof *patch_text);
    if (!patches || !patch_text) {
        free(patches);
        free(patch_text);
        goto nomem;
    }
    size_t np = 0;
    for (size_t i = 0; i < t.n; i++) {
        act_rec *r = &t.recs[i];
        char q[300];
        wpk_quote(q, sizeof q, r->key, r->key_len);
        if (r->op == (size_t)-1) {
            res->unplaced_stats++;
            wpk_diag_emit(d, WPACK_DIAG_WARNING, 0,
                          "activation stats '%s': no op in a function body has a location naming "
                          "it or a path under it; not annotated", q);
            continue;
        }
        const wpk_located_op *op = &doc->ops[r->op];
        unsigned line, col;
        wpk_mlir_line_col(doc->buf, doc->len, op->op_start, &line, &col);
        if (i && t.recs[i - 1].op == r->op) {
            char q2[300];
            wpk_quote(q2, sizeof q2, t.recs[i - 1].key, t.recs[i - 1].key_len);
            wpk_diag_emit(d, WPACK_DIAG_WARNING, 0,
                          "%s:%u:%u: the op ends both '%s' and '%s'; it gets the stats of '%s'",
                          d->source, line, col, q2, q, q2);
            continue;
        }
        wpk_span dict;
        size_t insert;
        const char *lead, *trail;
        if (attr_place(doc, op, &dict, &insert, &lead, &trail)) {
            res->unplaced_stats++;
            wpk_diag_emit(d, WPACK_DIAG_WARNING, 0,
                          "%s:%u:%u: activation stats '%s': the op producing it has no trailing "
                          "': type' to put attributes before; not annotated", d->source, line, col, q);
            continue;
        }
        wpack_stats st;
        wpack_stats_at(ar, r->stats, &st);
        wpk_strbuf ours = {0};
        wpk_stats_attr_text(&ours, &st, prefix);
        size_t off = text->n, eo, el;
        int rc = ours.failed ? WPACK_E_NOMEM
                             : wpk_attr_merge(doc->buf, doc->len, dict, insert, lead, trail, ours.p,
                                              ours.n, prefix, 0, text, &eo, &el);
        free(ours.p);
        if (rc == WPACK_E_NOMEM) {
            free(patches);
            free(patch_text);
            goto nomem;
        }
        if (rc) {
            wpk_diag_emit(d, WPACK_DIAG_WARNING, 0,
                          "%s:%u:%u: activation stats '%s': cannot read the op's attribute "
                          "dictionary; not annotated", d->source, line, col, q);
            continue;
        }
        patches[np] = (wpk_patch){eo, el, NULL, text->n - off};
        patch_text[np++] = off;
        res->annotated_ops++;
    }
    if (text->failed) {
        free(patches);
        free(patch_text);
        goto nomem;
    }
    for (size_t i = 0; i < np; i++)
        patches[i].text = text->p + patch_text[i];
    for (size_t i = 0; i < nitems; i++)
        items[i].attr_text = item_off[i] == (size_t)-1 ? NULL : text->p + item_off[i];
    free(patch_text);
    free(item_off);
    free(t.recs);
    free(t.slots);
    *patches_out = patches;
    *npatches = np;
    return 0;
nomem:
    free(item_off);
    free(t.recs);
    free(t.slots);
    wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_NOMEM, "out of memory while annotating");
    return WPACK_E_NOMEM;
}
