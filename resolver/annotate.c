/*
 * annotate.c - --annotate: calibration stats as discardable attributes.
 *
 * The rule (spec appendix B, "Annotations"): the op that produces module
 * path P's output is the LAST op in program order that
 *   - sits directly in a function body (one region below the innermost
 *     module body, or below the top level outside any module; ops in
 *     nested regions do not count),
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

/* One module-path rewrite: IR path `from` (and the paths under it) is the
 * archive's `to` (and the paths under that). */
typedef struct {
    const char *from, *to;
    size_t from_len, to_len, order; /* order: the archive's pairs first */
} mod_pair;

/* A string that names' prefixes are matched against (a record's key, a
 * pair's from), in an array sorted by bytes (a prefix before the longer). */
typedef struct {
    const char *s;
    size_t n, ix;               /* ix: the record or pair it is */
} sorted_key;

typedef struct {
    act_rec *recs;
    size_t n;
    sorted_key *rkeys;          /* the records' keys, sorted */
    size_t cur_op;
    /* the remapping (opt->strip_prefixes, wpack.module_names, opt->module_map_*) */
    const char *const *strips;
    size_t nstrips;
    mod_pair *mods;             /* sorted by from, then order */
    sorted_key *mkeys;          /* mods' from, in mods' order */
    size_t nmods;
    wpk_strbuf scratch;         /* a rewritten name */
    /* the current op: did a name match, did it have any, its longest name */
    int matched, named;
    char sample[160];
    size_t sample_len;
} act_table;

static int mod_cmp(const void *a, const void *b)
{
    const mod_pair *x = a, *y = b;
    int c = wpk_bytes_cmp(x->from, x->from_len, y->from, y->from_len);
    return c ? c : x->order < y->order ? -1 : x->order > y->order;
}

static int key_cmp(const void *a, const void *b)
{
    const sorted_key *x = a, *y = b;
    int c = wpk_bytes_cmp(x->s, x->n, y->s, y->n);
    return c ? c : x->ix < y->ix ? -1 : x->ix > y->ix;
}

/* The first of k[lo, hi) (all starting with the same pos bytes) whose byte
 * pos is c or more; a key of pos bytes counts as byte -1. */
static size_t byte_bound(const sorted_key *k, size_t lo, size_t hi, size_t pos, int c)
{
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int b = k[mid].n > pos ? (unsigned char)k[mid].s[pos] : -1;
        if (b < c)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* fn for the first key equal to each "."-prefix of s[0..n) (s[0..len) with
 * len == n or s[len] == '.'), shortest first. The keys starting with
 * s[0..len) are a range of the sorted array, narrowed one byte at a time:
 * O(min(n, the longest key) x log nk). (Hashing each prefix was n^2 / 2
 * bytes for a name with a '.' every other byte: 16 KB names took 2.4 ms
 * each, 33 ms with a module map's binary search per prefix.) */
static void dotted_prefixes(const sorted_key *k, size_t nk, const char *s, size_t n,
                            void (*fn)(void *, const sorted_key *), void *user)
{
    size_t lo = 0, hi = nk;
    for (size_t pos = 0; lo < hi; pos++) {
        if (pos && (pos == n || s[pos] == '.') && k[lo].n == pos)
            fn(user, &k[lo]); /* the range's first is the prefix itself, if any has it */
        if (pos == n)
            break;
        int c = (unsigned char)s[pos];
        if (k[lo].n > pos && (unsigned char)k[lo].s[pos] == c && k[hi - 1].n > pos &&
            (unsigned char)k[hi - 1].s[pos] == c)
            continue; /* the first and the last have it: all do */
        lo = byte_bound(k, lo, hi, pos, c);
        hi = byte_bound(k, lo, hi, pos, c + 1);
    }
}

static void mark_rec(void *user, const sorted_key *k)
{
    act_table *t = user;
    t->recs[k->ix].op = t->cur_op;
    t->matched = 1;
}

static void keep_longest(void *user, const sorted_key *k)
{
    *(const sorted_key **)user = k;
}

/* Each "."-prefix of s[0..n) (and s itself) that is a key gets the op. */
static void match_path(act_table *t, const char *s, size_t n)
{
    dotted_prefixes(t->rkeys, t->n, s, n, mark_rec, t);
}

/* s as written, then rewritten by the longest mapped "."-prefix. */
static void match_mapped(act_table *t, const char *s, size_t n)
{
    match_path(t, s, n);
    const sorted_key *best = NULL;
    dotted_prefixes(t->mkeys, t->nmods, s, n, keep_longest, &best);
    if (!best)
        return;
    const mod_pair *m = &t->mods[best->ix];
    t->scratch.n = 0;
    wpk_sb_put(&t->scratch, m->to, m->to_len);
    wpk_sb_put(&t->scratch, s + best->n, n - best->n);
    if (!t->scratch.failed)
        match_path(t, t->scratch.p, t->scratch.n);
}

/* Every name of the op's location: as written, and with each --strip-prefix
 * P that it starts with removed ("P." or P ending in '.'; the name P alone
 * is the wrapper itself and names no key). */
static void on_name(void *user, const char *s, size_t n)
{
    act_table *t = user;
    t->named = 1;
    if (n > t->sample_len || !t->sample_len) {
        t->sample_len = n < sizeof t->sample - 1 ? n : sizeof t->sample - 1;
        memcpy(t->sample, s, t->sample_len);
        t->sample[t->sample_len] = 0;
    }
    match_mapped(t, s, n);
    for (size_t k = 0; k < t->nstrips; k++) {
        const char *p = t->strips[k];
        size_t pn = p ? strlen(p) : 0;
        if (!pn || n <= pn || memcmp(s, p, pn) != 0)
            continue;
        if (p[pn - 1] != '.') {
            if (s[pn] != '.')
                continue;
            pn++;
        }
        if (n > pn)
            match_mapped(t, s + pn, n - pn);
    }
}

/* The archive's wpack.module_names pairs and opt's module map into t->mods. */
static int load_mods(act_table *t, const wpack_archive *ar, const wpack_resolve_options *opt,
                     wpk_diag *d)
{
    wpack_meta m;
    uint64_t npairs = 0;
    int have = wpack_meta_find(ar, "wpack.module_names", &m) == WPACK_OK;
    if (have && (m.type != WPACK_META_ARRAY || m.elem_type != WPACK_META_STRING || m.count % 2)) {
        wpk_diag_emit(d, WPACK_DIAG_WARNING, 0,
                      "the archive's metadata 'wpack.module_names' is not an array of string "
                      "pairs; ignored");
        have = 0;
    }
    if (have)
        npairs = m.count / 2;
    size_t nmap = opt->module_map_ir && opt->module_map_keys ? opt->module_map_count : 0;
    t->mods = malloc((size_t)(npairs + nmap + 1) * sizeof *t->mods);
    if (!t->mods)
        return WPACK_E_NOMEM;
    for (uint64_t j = 0; j < npairs; j++) {
        wpack_meta a, b;
        if (wpack_meta_elem(ar, &m, 2 * j, &a) || wpack_meta_elem(ar, &m, 2 * j + 1, &b) ||
            !a.count || !b.count)
            continue;
        t->mods[t->nmods] = (mod_pair){a.str, b.str, a.count, b.count, t->nmods};
        t->nmods++;
    }
    for (size_t j = 0; j < nmap; j++) {
        const char *a = opt->module_map_ir[j], *b = opt->module_map_keys[j];
        if (!a || !b || !*a || !*b)
            continue;
        t->mods[t->nmods] = (mod_pair){a, b, strlen(a), strlen(b), t->nmods};
        t->nmods++;
    }
    qsort(t->mods, t->nmods, sizeof *t->mods, mod_cmp);
    t->mkeys = malloc((t->nmods + 1) * sizeof *t->mkeys);
    if (!t->mkeys)
        return WPACK_E_NOMEM;
    for (size_t j = 0; j < t->nmods; j++)
        t->mkeys[j] = (sorted_key){t->mods[j].from, t->mods[j].from_len, j};
    t->strips = opt->strip_prefixes;
    t->nstrips = opt->strip_prefixes ? opt->strip_count : 0;
    return 0;
}

/* "'a', 'b', 'c'" (up to 5, then ", ...") into list. */
static void add_to_list(char *list, size_t len, size_t *o, size_t i, const char *s, size_t n)
{
    if (i >= 5 || *o + 100 >= len) {
        if (i == 5 && *o + 6 < len) {
            memcpy(list + *o, ", ...", 6);
            *o += 5;
        }
        return;
    }
    char q[80];
    wpk_quote(q, sizeof q, s, n > 60 ? 60 : n);
    wpk_fmt(list + *o, len - *o, "%s'%s%s'", i ? ", " : "", q, n > 60 ? "..." : "");
    *o += strlen(list + *o);
}

static int tok_word(const wpk_lexer *lx, wpk_tok t, const char *w)
{
    return t.kind == WPK_TOK_BAREID && wpk_span_is(lx->buf, (wpk_span){t.off, t.len}, w);
}

static int map_reduce_name(const wpk_lexer *lx, wpk_tok t)
{
    return tok_word(lx, t, "linalg.map") || tok_word(lx, t, "linalg.reduce");
}

/* Skip the bracket group that open starts; the offset just past its closer,
 * or (size_t)-1 when the op ends first. */
static size_t skip_group(wpk_lexer *lx, wpk_tok open)
{
    unsigned depth = 0;
    for (wpk_tok t = open; t.kind != WPK_TOK_EOF && t.kind != WPK_TOK_ERROR; t = wpk_lex_next(lx)) {
        if (t.kind != WPK_TOK_PUNCT)
            continue;
        char c = lx->buf[t.off];
        depth += c == '(' || c == '[' || c == '{' || c == '<';
        if (c == ')' || c == ']' || c == '}' || c == '>')
            if (--depth == 0)
                return t.off + 1;
    }
    return (size_t)-1;
}

/* linalg.map and linalg.reduce read a '{' after their name as the short
 * form's payload op (`linalg.reduce { arith.addf } ins(..)`): their
 * attr-dict follows `outs(...)` and reduce's `dimensions = [...]`, before
 * the region's `(%in: T, ...)`. The offset it goes at, or (size_t)-1. */
static size_t map_reduce_place(wpk_lexer *lx)
{
    wpk_tok t = wpk_lex_next(lx);
    if (wpk_tok_is(lx, t, '{') && skip_group(lx, t) != (size_t)-1)
        t = wpk_lex_next(lx); /* the short form's payload */
    while (t.kind == WPK_TOK_BAREID && !tok_word(lx, t, "outs")) { /* ins(...) */
        t = wpk_lex_next(lx);
        if (!wpk_tok_is(lx, t, '(') || skip_group(lx, t) == (size_t)-1)
            return (size_t)-1;
        t = wpk_lex_next(lx);
    }
    if (!tok_word(lx, t, "outs") || !wpk_tok_is(lx, t = wpk_lex_next(lx), '('))
        return (size_t)-1;
    size_t end = skip_group(lx, t);
    wpk_tok p = wpk_lex_peek(lx);
    if (end != (size_t)-1 && tok_word(lx, p, "dimensions")) {
        wpk_lex_next(lx);
        if (!wpk_tok_is(lx, wpk_lex_next(lx), '=') || !wpk_tok_is(lx, t = wpk_lex_next(lx), '['))
            return (size_t)-1;
        end = skip_group(lx, t);
    }
    return end;
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
    /* printers that put the attr-dict first: arith.constant, the HLO
     * constants (`stablehlo.constant {attrs} dense<...> : T`: the ':' there
     * is the value's, an attr-dict before it does not parse), linalg.* */
    int map_reduce = map_reduce_name(&lx, t);
    int after_name = t.kind == WPK_TOK_BAREID && !map_reduce &&
                     (tok_word(&lx, t, "arith.constant") || tok_word(&lx, t, "stablehlo.constant") ||
                      tok_word(&lx, t, "mhlo.constant") || tok_word(&lx, t, "chlo.constant") ||
                      (t.len > 7 && memcmp(doc->buf + t.off, "linalg.", 7) == 0));
    if (after_name || map_reduce) {
        *insert = map_reduce ? map_reduce_place(&lx) : t.off + t.len;
        if (*insert == (size_t)-1)
            return -1;
        *lead = " ";
        *trail = "";
        /* a dict there (after map/reduce's outs, a region would follow its args) */
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

/* After the op choice: records no op names and ops naming no key (errors
 * with opt->strict, else a note for the ops: the records were warned about
 * one by one), and no op annotated at all (an error unless opt->allow_none). */
static void report_unmatched(wpk_diag *d, const wpack_resolve_options *opt, const act_table *t,
                             const wpack_resolve_result *res, size_t unnamed,
                             const char *recs_list, const char *ops_list)
{
    const char *how = opt->strip_count || opt->module_map_count || t->nmods
                          ? " (after --strip-prefix / --module-map / wpack.module_names)" : "";
    if (opt->strict && unnamed)
        wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_NOT_FOUND,
                      "--strict: %zu of %zu activation stats records are named by no op's "
                      "location%s: %s", unnamed, t->n, how, recs_list);
    int empty = !res->annotated_ops && !opt->allow_none; /* the error below lists the ops */
    if (res->unmatched_ops && (opt->strict || !empty))
        wpk_diag_emit(d, opt->strict ? WPACK_DIAG_ERROR : WPACK_DIAG_NOTE,
                      opt->strict ? WPACK_E_NOT_FOUND : 0,
                      "%s%llu ops in function bodies have locations naming only module paths "
                      "without activation stats%s: %s:%s%s", opt->strict ? "--strict: " : "",
                      (unsigned long long)res->unmatched_ops, how, d->source, ops_list,
                      opt->strict ? "" : " (--strict makes this an error)");
    if (res->annotated_ops || opt->allow_none)
        return;
    if (!t->n) {
        wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_EMPTY,
                      "--annotate: the archive has no activation stats, so no op was annotated "
                      "(--allow-none accepts this)");
        return;
    }
    char keys[600];
    size_t o = 0;
    keys[0] = 0;
    for (size_t i = 0; i < t->n; i++)
        add_to_list(keys, sizeof keys, &o, i, t->recs[i].key, t->recs[i].key_len);
    wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_EMPTY,
                  "--annotate: no op annotated: the archive's %zu activation keys (%s) match no "
                  "op's location%s%s%s; map the IR's paths with --strip-prefix P or --module-map "
                  "FILE.json, or accept this with --allow-none", t->n, keys, how,
                  res->unmatched_ops ? ", which name " : "", res->unmatched_ops ? ops_list : "");
}

/* --form quant: the records !quant.calibrated cannot hold, which keep the
 * attrs form; one note for all of them (it is the documented rule, not a
 * problem of this file). */
typedef struct {
    uint64_t n, channel, empty, other;
    char first[120];
} quant_fallbacks;

static void quant_fallback(quant_fallbacks *qf, const wpack_resolve_options *opt,
                           const wpack_stats *st)
{
    const char *why = opt->annotate_form == WPACK_ANNOTATE_QUANT ? wpk_stats_quant_unfit(st) : NULL;
    if (!why)
        return;
    if (!qf->n++) {
        char q[100];
        size_t n = strlen(st->key);
        wpk_quote(q, sizeof q, st->key, n > 60 ? 60 : n);
        wpk_fmt(qf->first, sizeof qf->first, "'%s%s' (%s)", q, n > 60 ? "..." : "", why);
    }
    if (st->granularity != WPACK_GRAN_TENSOR)
        qf->channel++;
    else if (st->min == st->max)
        qf->empty++;
    else
        qf->other++;
}

static void report_quant_fallback(wpk_diag *d, const quant_fallbacks *qf, const char *prefix,
                                  wpack_resolve_result *res)
{
    res->annotated_as_attrs = qf->n;
    if (qf->n)
        wpk_diag_emit(d, WPACK_DIAG_NOTE, 0,
                      "--form quant: %llu stats records kept the attrs form (%s.min, %s.max, "
                      "%s.absmax): %llu per-channel, %llu with min == max, %llu not finite; "
                      "!quant.calibrated holds one range with min < max; the first is %s",
                      (unsigned long long)qf->n, prefix, prefix, prefix,
                      (unsigned long long)qf->channel,
                      (unsigned long long)qf->empty, (unsigned long long)qf->other, qf->first);
}

int wpk_annotate_plan(const wpack_archive *ar, const wpk_mlir_doc *doc,
                      const wpack_resolve_options *opt, const char *prefix, wpk_diag *d,
                      wpk_plan_item *items, size_t nitems, wpk_strbuf *text,
                      wpk_patch **patches_out, size_t *npatches, wpack_resolve_result *res)
{
    *patches_out = NULL;
    *npatches = 0;
    /* texts are offsets into text until the end (it may move while growing) */
    size_t *item_off = malloc((nitems + 1) * sizeof *item_off);
    uint64_t nstats = wpack_stats_count(ar);
    act_table t = {0};
    quant_fallbacks qf = {0};
    t.recs = malloc((nstats + 1) * sizeof *t.recs);
    if (!item_off || !t.recs)
        goto nomem;
    for (size_t i = 0; i < nitems; i++) {
        wpack_stats st;
        item_off[i] = (size_t)-1;
        if (wpack_stats_find(ar, items[i].entry_name, WPACK_STATS_WEIGHT, &st) != WPACK_OK)
            continue;
        item_off[i] = text->n;
        wpk_stats_attr_text(text, &st, prefix, opt->annotate_form);
        quant_fallback(&qf, opt, &st);
        wpk_sb_put(text, "", 1); /* keep the NUL */
        res->annotated_globals++;
    }
    for (uint64_t i = 0; i < nstats; i++) {
        wpack_stats st;
        if (wpack_stats_at(ar, i, &st) == WPACK_OK && st.kind == WPACK_STATS_ACTIVATION)
            t.recs[t.n++] = (act_rec){i, st.key, strlen(st.key), (size_t)-1};
    }
    t.rkeys = malloc((t.n + 1) * sizeof *t.rkeys);
    if (!t.rkeys)
        goto nomem;
    for (size_t i = 0; i < t.n; i++)
        t.rkeys[i] = (sorted_key){t.recs[i].key, t.recs[i].key_len, i};
    qsort(t.rkeys, t.n, sizeof *t.rkeys, key_cmp);
    if (load_mods(&t, ar, opt, d))
        goto nomem;
    /* ops whose location names module paths but no key: a count and the first few */
    char ops_list[900];
    size_t ops_o = 0;
    ops_list[0] = 0;
    wpk_line_cursor lc = WPK_LINE_CURSOR_INIT; /* ops come in file order */
    wpk_loc_walk lw;
    if (wpk_loc_walk_init(&lw, doc)) {
        wpk_loc_walk_free(&lw);
        goto nomem;
    }
    for (size_t i = 0; i < doc->nops; i++) {
        const wpk_located_op *op = &doc->ops[i];
        if (op->depth != 1 || doc->buf[op->op_start] != '%') /* a function body's, a result */
            continue;
        t.cur_op = i;
        t.matched = t.named = 0;
        t.sample_len = 0;
        wpk_loc_names(&lw, op->loc, on_name, &t);
        if (!t.named || t.matched)
            continue;
        if (res->unmatched_ops < 5 && ops_o + 300 < sizeof ops_list) {
            unsigned line, col;
            char q[200];
            wpk_line_cursor_at(&lc, doc->buf, doc->len, op->op_start, &line, &col);
            wpk_quote(q, sizeof q, t.sample, t.sample_len);
            wpk_fmt(ops_list + ops_o, sizeof ops_list - ops_o, "%s%u:%u '%s'",
                    res->unmatched_ops ? ", " : "", line, col, q);
            ops_o += strlen(ops_list + ops_o);
        } else if (res->unmatched_ops == 5) {
            wpk_fmt(ops_list + ops_o, sizeof ops_list - ops_o, ", ...");
            ops_o += strlen(ops_list + ops_o);
        }
        res->unmatched_ops++;
    }
    free(t.scratch.p);
    t.scratch.p = NULL;
    wpk_loc_walk_free(&lw);
    if (lw.over) /* annotating from some names only would pick other ops */
        wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_INPUT,
                      "%s: --annotate: the ops' locations read more than %llu bytes of location "
                      "aliases in all (aliases that refer to each other, or long ones shared by "
                      "many ops?); not annotated", d->source, (unsigned long long)lw.max_alias_bytes);
    if (t.scratch.failed)
        goto nomem;
    qsort(t.recs, t.n, sizeof *t.recs, rec_by_op);
    wpk_patch *patches = malloc((t.n + 1) * sizeof *patches);
    size_t *patch_text = malloc((t.n + 1) * sizeof *patch_text);
    if (!patches || !patch_text) {
        free(patches);
        free(patch_text);
        goto nomem;
    }
    size_t np = 0, unnamed = 0, recs_o = 0;
    char recs_list[900];
    recs_list[0] = 0;
    /* when no record is named at all, the error of report_unmatched says it
     * once: no warning per record (nor the note on the ops) */
    int none_named = 1;
    for (size_t i = 0; i < t.n && none_named; i++)
        none_named = t.recs[i].op == (size_t)-1;
    int one_message = opt->strict || (none_named && !opt->allow_none);
    /* the records are in op order now, and so in file order: one cursor
     * counts the lines of all (a count from the start for each was
     * records x file: 40,000 records on as many lines took 12 s) */
    lc = (wpk_line_cursor)WPK_LINE_CURSOR_INIT;
    for (size_t i = 0; i < t.n; i++) {
        act_rec *r = &t.recs[i];
        char q[300];
        wpk_quote(q, sizeof q, r->key, r->key_len);
        if (r->op == (size_t)-1) {
            res->unplaced_stats++;
            add_to_list(recs_list, sizeof recs_list, &recs_o, unnamed++, r->key, r->key_len);
            if (!one_message)
                wpk_diag_emit(d, WPACK_DIAG_WARNING, 0,
                              "activation stats '%s': no op in a function body has a location "
                              "naming it or a path under it; not annotated", q);
            continue;
        }
        const wpk_located_op *op = &doc->ops[r->op];
        unsigned line, col;
        wpk_line_cursor_at(&lc, doc->buf, doc->len, op->op_start, &line, &col);
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
        wpk_stats_attr_text(&ours, &st, prefix, opt->annotate_form);
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
        quant_fallback(&qf, opt, &st);
    }
    if (text->failed) {
        free(patches);
        free(patch_text);
        goto nomem;
    }
    report_unmatched(d, opt, &t, res, unnamed, recs_list, ops_list);
    report_quant_fallback(d, &qf, prefix, res);
    for (size_t i = 0; i < np; i++)
        patches[i].text = text->p + patch_text[i];
    for (size_t i = 0; i < nitems; i++)
        items[i].attr_text = item_off[i] == (size_t)-1 ? NULL : text->p + item_off[i];
    free(patch_text);
    free(item_off);
    free(t.recs);
    free(t.rkeys);
    free(t.mods);
    free(t.mkeys);
    if (d->first_error) {
        free(patches);
        return d->first_error;
    }
    *patches_out = patches;
    *npatches = np;
    return 0;
nomem:
    free(item_off);
    free(t.recs);
    free(t.rkeys);
    free(t.mods);
    free(t.mkeys);
    free(t.scratch.p);
    wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_NOMEM, "out of memory while annotating");
    return WPACK_E_NOMEM;
}
