/*
 * resolve.c - wpack_resolve_buffer(): find the weight globals, map each to
 * an archive entry (entry_lookup.c, name_index.c), check types
 * (type_check.c), then hand the plan to the emitter (emit.c). Every
 * problem is reported (not only the first) before anything is written.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "resolve_plan.h"

void wpack_resolve_options_init(wpack_resolve_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->emit = WPACK_EMIT_URI;
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
    const wpk_emit_mode *mode = wpk_emit_mode_of(opt->emit);
    const char *unescaped = mode ? mode->unescaped_printer : NULL;
    if (unescaped && (mode->flags & WPACK_EMIT_HAS_SCOPE) && wpk_name_needs_escape(scope))
        wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_UNSUPPORTED,
                      "scope '%s' has a '\"' or '\\', which %s prints unescaped", scope, unescaped);
    uint64_t count = wpack_count(ar);
    /* many globals: every symbol is looked up as an entry name (for the
     * duplicate check and the plan), through the entry index (~170
     * instructions an entry to build, ~1000 a binary search saved) */
    wpk_entry_index index, *ix = NULL;
    wpk_entry_index_init(&index, ar, count);
    uint32_t *match = NULL;
    if (doc->nglobals >= 64 && doc->nglobals >= count / 4 && count < UINT32_MAX &&
        (match = wpk_big_calloc(doc->nglobals * sizeof *match)))
        ix = &index;
    wpk_report_duplicates(d, doc, doc->nglobals < 2 ? 0 : wpk_find_duplicates(doc, ix, match));

    wpk_map_pair *map = NULL;
    size_t nmap = opt->map_count;
    if (nmap) {
        map = malloc(nmap * sizeof *map);
        if (!map) {
            wpk_big_free(match, doc->nglobals * sizeof *match);
            wpk_entry_index_free(&index);
            wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_NOMEM, "out of memory");
            return d->first_error;
        }
        for (size_t i = 0; i < nmap; i++)
            map[i] = (wpk_map_pair){opt->map_globals[i], opt->map_entries[i]};
        qsort(map, nmap, sizeof *map, wpk_map_cmp);
    }
    unsigned char *used = calloc(count ? count : 1, 1);
    wpk_plan_item *items = wpk_big_calloc(plan_bytes(doc));
    if (!used || !items) {
        free(map);
        free(used);
        wpk_big_free(items, plan_bytes(doc));
        wpk_big_free(match, doc->nglobals * sizeof *match);
        wpk_entry_index_free(&index);
        wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_NOMEM, "out of memory");
        return d->first_error;
    }
    size_t n = 0, suggested = 0;
    int shared = 0; /* some entry serves more than one global */
    wpack_info info; /* its index checksum: the id in wpack: URIs */
    wpack_get_info(ar, &info);
    uint64_t other_id = 0;
    char other_where[400] = "";
    wpk_type_cache tc = {NULL, 0, {{0}, 0, {0}}, -1, 0};
    unsigned k = opt->max_suggestions ? opt->max_suggestions : 3;
    uint64_t budget = wpk_suggest_budget(ar);
    for (size_t i = 0; i < doc->nglobals; i++) {
        const wpk_global *g = &doc->globals[i];
        if (!is_weight_global(g))
            continue;
        res->globals++;
        wpk_lazy_where lw; /* its buf is formatted only when a message needs it */
        lw.d = d;
        lw.g = g;
        lw.ready = 0;
        wpk_lazy_where *where = &lw;
        wpack_tensor t;
        char *lookup = NULL;
        uint64_t uri_id = 0;
        int found = wpk_find_entry(ar, ix, match, i, doc, g, map, nmap, &t, &lookup, &uri_id, d, where);
        if (found == 2) {
            res->uri_reread++;
            if (uri_id != info.index_checksum && res->uri_other_archive++ == 0) {
                other_id = uri_id;
                wpk_fmt(other_where, sizeof other_where, "%s", wpk_where(where));
            }
            found = 1;
        }
        if (found == 0) {
            res->missing++;
            int sev = opt->allow_missing ? WPACK_DIAG_WARNING : WPACK_DIAG_ERROR;
            wpk_report_unresolved(d, ar, where, lookup ? lookup : g->name, k, sev,
                                  suggested++ < 50 ? &budget : NULL);
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
        wpk_check_types(d, doc, g, &t, where, &ok, &tc);
        if (unescaped && wpk_name_needs_escape(t.name)) {
            wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_UNSUPPORTED,
                          "%s: entry name has a '\"' or '\\', which %s prints unescaped (use --emit uri)",
                          wpk_where(where), unescaped);
            ok = 0;
        }
        if (g->is_mutable)
            wpk_diag_emit(d, WPACK_DIAG_WARNING, 0,
                          "%s: is mutable; the archive's bytes become its initial value only", wpk_where(where));
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
    wpk_entry_index_free(&index);
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
    char why[300];
    if (WPK_RESERVED_CHECK(opt, "wpack_resolve_options", "wpack_mlir.h", why, sizeof why)) {
        wpk_diag_emit(&d, WPACK_DIAG_ERROR, WPACK_E_INVALID_ARGUMENT, "%s", why);
        return WPACK_E_INVALID_ARGUMENT;
    }
    if (!ar || !write || (!mlir && len) || !wpk_emit_mode_of(opt->emit) ||
        (opt->annotate_form != WPACK_ANNOTATE_ATTRS && opt->annotate_form != WPACK_ANNOTATE_QUANT)) {
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
                         .write_error = write_error, .max_output = opt->max_output};
        rc = wpk_emit_document(&e, err, sizeof err);
        if (rc == WPACK_E_TOO_LARGE)
            wpk_diag_emit(&d, WPACK_DIAG_ERROR, rc, "%s: %s", d.source, err);
        else if (rc)
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
