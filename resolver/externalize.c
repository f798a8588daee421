/*
 * externalize.c - wpack_externalize_file(): the reverse of resolve, like
 * IREE's export-parameters pass. Globals initialized inline (dense<...>
 * literals, hex, dense_resource blobs) of at least min_bytes move into a new
 * archive (entry named by the symbol), streamed from the mapped input
 * through a small buffer; then the IR is written with a reference in their
 * place and the moved blobs dropped from the resources section when
 * nothing else refers to them. The archive is written first (its index
 * checksum goes into the wpack: URIs), both outputs go to temporary files
 * and are put in place together only when everything succeeded
 * (output_commit.c: on a failure both paths keep what they held).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atomic_file.h"
#include "extern_int.h"
#include "mlir_literal.h"
#include "internal.h"
#include "mlir_lex.h"
#include "resolve_int.h"
#include "same_files.h"

void wpack_externalize_options_init(wpack_externalize_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->emit = WPACK_EMIT_URI;
    opt->min_bytes = 256;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static int writer_sink(void *user, const void *p, size_t n)
{
    return wpack_writer_write(user, p, n) != WPACK_OK;
}

/* The entry name of every candidate (extern_names.c); a module path in
 * one is checked as the symbols were. 0, or the first error. */
static int name_entries(const wpk_mlir_doc *doc, wpk_ext_cand *cand, size_t n, wpk_diag *d,
                        const char *unescaped, char ***names_out)
{
    size_t *gix = malloc((n + 1) * sizeof *gix), *lens = malloc((n + 1) * sizeof *lens);
    char **names = calloc(n + 1, sizeof *names);
    *names_out = names;
    if (!gix || !lens || !names) {
        free(gix);
        free(lens);
        return WPACK_E_NOMEM;
    }
    for (size_t i = 0; i < n; i++)
        gix[i] = cand[i].global;
    int rc = wpk_extern_names(doc, gix, n, names, lens, d);
    for (size_t i = 0; !rc && i < n; i++) {
        const wpk_global *g = &doc->globals[cand[i].global];
        cand[i].entry = names[i] ? names[i] : g->name;
        if (!names[i])
            continue;
        char where[400];
        wpk_global_where(where, sizeof where, d, g);
        const char *bad = wpk_name_problem((const uint8_t *)names[i], lens[i]);
        if (bad)
            wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_NAME,
                          "%s: its module path cannot be in an entry name: %s", where, bad);
        else if (unescaped && wpk_name_needs_escape(names[i]))
            wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_UNSUPPORTED,
                          "%s: its module path has a '\"' or '\\', which %s prints unescaped "
                          "(use --emit uri)", where, unescaped);
    }
    free(gix);
    free(lens);
    return rc ? rc : d->first_error;
}

/* Where a candidate's bytes come from: its blob, or its literal's text
 * (one text for every global naming an attribute alias `#w = dense<...>`). */
typedef struct {
    uint64_t src;
    size_t ix;
} src_ref;

static int by_src(const void *a, const void *b)
{
    const src_ref *x = a, *y = b;
    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    return (x->ix > y->ix) - (x->ix < y->ix);
}

/* Globals whose values are one blob or one literal's text are written once
 * for the type of the first of them: the others of that type become aliases
 * of its entry (alias_of). Copied per global, 2,000 globals of one 1 MiB
 * blob (MLIR shares one between equal constants) or of one `#w = dense<...>`
 * made a 2 GiB archive out of a 2.2 MB file; read as another type, a blob
 * is written again, and counts. 0, or WPACK_E_NOMEM. */
static int mark_shared(const wpk_mlir_doc *doc, wpk_ext_cand *cand, size_t n)
{
    src_ref *v = malloc((n + 1) * sizeof *v);
    if (!v)
        return WPACK_E_NOMEM;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!cand[i].splat) /* a splat entry costs nothing */
            v[k++] = (src_ref){cand[i].res ? 2 * (uint64_t)(cand[i].res - doc->resources) + 1
                                           : 2 * (uint64_t)doc->globals[cand[i].global].value_body.off,
                               i};
    qsort(v, k, sizeof *v, by_src);
    for (size_t i = 1, first = 0; i < k; i++) {
        if (v[i].src != v[first].src)
            first = i;
        else if (wpk_mlir_tensor_equal(&cand[v[first].ix].type, &cand[v[i].ix].type))
            cand[v[i].ix].alias_of = v[first].ix + 1;
    }
    free(v);
    return WPACK_OK;
}

/* --------------------------------------------------------- the call */

int wpack_externalize_file(const char *in_path, const char *out_path, const char *archive_path,
                           const wpack_externalize_options *opt_in,
                           wpack_externalize_result *res_out)
{
    wpack_externalize_options opt;
    if (opt_in)
        opt = *opt_in;
    else
        wpack_externalize_options_init(&opt);
    wpack_externalize_result res = {0};
    wpk_diag d = {opt.diag, opt.diag_user, opt.source_name ? opt.source_name : in_path, 0, 0, 0};
    char err[600];
    if (WPK_RESERVED_CHECK(&opt, "wpack_externalize_options", "wpack_mlir.h", err, sizeof err) ||
        (opt.writer &&
         WPK_RESERVED_CHECK(opt.writer, "wpack_externalize_options.writer", "wpack.h", err,
                            sizeof err))) {
        wpk_diag_emit(&d, WPACK_DIAG_ERROR, WPACK_E_INVALID_ARGUMENT, "%s", err);
        return WPACK_E_INVALID_ARGUMENT; /* before anything is opened */
    }
    const wpk_emit_mode *mode = wpk_emit_mode_of(opt.emit);
    if (!in_path || !out_path || !archive_path || !mode ||
        !(mode->flags & WPACK_EMIT_CAN_EXTERNALIZE)) {
        wpk_diag_emit(&d, WPACK_DIAG_ERROR, WPACK_E_INVALID_ARGUMENT,
                      "wpack_externalize_file: bad arguments (emit must be uri or iree)");
        return WPACK_E_INVALID_ARGUMENT;
    }
    if (!d.source)
        d.source = "<input>";
    const char *scope = opt.scope ? opt.scope : "model";
    const char *unescaped = mode->unescaped_printer;
    if (unescaped && (mode->flags & WPACK_EMIT_HAS_SCOPE) && wpk_name_needs_escape(scope)) {
        wpk_diag_emit(&d, WPACK_DIAG_ERROR, WPACK_E_UNSUPPORTED,
                      "scope '%s' has a '\"' or '\\', which %s prints unescaped", scope, unescaped);
        return WPACK_E_UNSUPPORTED;
    }
    /* three different files, before anything is read or written: the
     * archive or the MLIR renamed over IN, or the MLIR over the new
     * archive, would lose it */
    wpk_file_ref files[3] = {{.path = in_path, .kind = WPK_FILE_IN},
                             {.path = out_path, .kind = WPK_FILE_OUT},
                             {.path = archive_path, .kind = WPK_FILE_OUT_ARCHIVE}};
    int rc = wpk_files_check(files, 3, 0, NULL, err, sizeof err);
    if (rc) {
        wpk_diag_emit(&d, WPACK_DIAG_ERROR, rc, "%s", err);
        return rc;
    }
    const char *buf;
    size_t len;
    int in_fd;
    rc = wpk_rsv_map_file(in_path, &buf, &len, &in_fd, err, sizeof err);
    if (rc) {
        wpk_diag_emit(&d, WPACK_DIAG_ERROR, rc, "%s", err);
        return rc;
    }
    wpk_mlir_doc *doc = NULL;
    wpk_ext_cand *cand = NULL;
    wpk_plan_item *items = NULL;
    wpk_patch *patches = NULL;
    size_t *refs = NULL;
    unsigned char *drop = NULL;
    wpack_writer *w = NULL;
    wpack_archive *ar = NULL;
    wpk_fd_sink *sink = NULL;
    wpk_atomic out_tmp = {NULL, NULL, -1};
    size_t ncand = 0;
    uint64_t data_bytes = 0;
    wpk_res_index rkeys = {NULL, 0};
    char **names = NULL;
    wpk_ext_op *tc = NULL;
    size_t ntc = 0;
    char **texts = NULL;
    wpk_span *lits = NULL, *gvals = NULL;

    rc = wpk_mlir_scan_buffer(buf, len, 0, &doc, err, sizeof err);
    if (rc) {
        wpk_diag_emit(&d, WPACK_DIAG_ERROR, rc, "%s:%s", d.source, err);
        goto done;
    }
    cand = malloc((doc->nglobals + 1) * sizeof *cand);
    if (!cand || wpk_res_index_build(doc, &rkeys))
        goto nomem;
    wpk_line_cursor lc = WPK_LINE_CURSOR_INIT; /* the globals come in file order */
    for (size_t i = 0; i < doc->nglobals; i++) {
        const wpk_global *g = &doc->globals[i];
        if (g->value_kind != WPK_VAL_DENSE && g->value_kind != WPK_VAL_RESOURCE)
            continue;
        res.globals++;
        char where[400], why[200];
        wpk_global_where(where, sizeof where, &d, g);
        wpk_ext_cand c = {.global = i};
        if (wpk_mlir_parse_tensor(buf + g->type_body.off, g->type_body.len, &c.type, why, sizeof why)) {
            res.kept++;
            wpk_diag_emit(&d, WPACK_DIAG_NOTE, 0, "%s: kept inline (type %.*s: %s)", where,
                          (int)(g->type.len > 200 ? 200 : g->type.len), buf + g->type.off, why);
            continue;
        }
        int ok;
        c.nbytes = wpk_literal_nbytes(&c.type, &ok);
        c.dtype = wpk_literal_dtype(c.type.elem);
        if (!ok) {
            res.kept++;
            wpk_diag_emit(&d, WPACK_DIAG_NOTE, 0, "%s: kept inline (element type %s is not taken)",
                          where, c.type.elem);
            continue;
        }
        if (c.nbytes < opt.min_bytes) {
            res.kept++;
            continue;
        }
        if (g->form == WPK_FORM_UTIL_GENERIC && !mode->edits_value) {
            res.kept++;
            wpk_diag_emit(&d, WPACK_DIAG_WARNING, 0,
                          "%s: kept inline (a generic util.global becomes an extern only with --emit iree)",
                          where);
            continue;
        }
        /* the symbol becomes the entry's name: checked with its length, as
         * the writer would see it cut at a NUL (@"w\00x" named entry "w") */
        const char *bad_name = wpk_name_problem((const uint8_t *)g->name, g->name_len);
        if (bad_name) {
            wpk_diag_emit(&d, WPACK_DIAG_ERROR, WPACK_E_NAME,
                          "%s: the symbol cannot be an entry name: %s", where, bad_name);
            continue;
        }
        /* `dense<...> : T2) : T`: T2 is what MLIR reads the literal as (MLIR
         * does not check it against T); taking it as T would store other
         * values (dense<1> : tensor<4xi32> in an f32 global as 1.0f) */
        if (g->value_type.len &&
            !(g->value_type.len == g->type_body.len &&
              memcmp(buf + g->value_type.off, buf + g->type_body.off, g->type_body.len) == 0)) {
            wpk_mlir_tensor vt;
            if (wpk_mlir_parse_tensor(buf + g->value_type.off, g->value_type.len, &vt, why,
                                      sizeof why) || !wpk_mlir_tensor_equal(&vt, &c.type)) {
                wpk_diag_emit(&d, WPACK_DIAG_ERROR, WPACK_E_SHAPE,
                              "%s: its value's type %.*s is not the global's type %.*s", where,
                              (int)(g->value_type.len > 200 ? 200 : g->value_type.len),
                              buf + g->value_type.off,
                              (int)(g->type_body.len > 200 ? 200 : g->type_body.len),
                              buf + g->type_body.off);
                continue;
            }
        }
        if (unescaped && wpk_name_needs_escape(g->name)) {
            wpk_diag_emit(&d, WPACK_DIAG_ERROR, WPACK_E_UNSUPPORTED,
                          "%s: symbol has a '\"' or '\\', which %s prints unescaped (use --emit uri)",
                          where, unescaped);
            continue;
        }
        if (g->value_kind == WPK_VAL_RESOURCE) {
            size_t kn;
            char *key = wpk_resource_key(buf, g->value_body, &kn);
            c.res = key ? wpk_find_resource(doc, &rkeys, key, kn) : NULL;
            if (!c.res) {
                char q[300];
                wpk_quote(q, sizeof q, key ? key : "?", key ? kn : 1);
                wpk_diag_emit(&d, WPACK_DIAG_ERROR, WPACK_E_INPUT,
                              "%s: dense_resource<%s> has no blob in the file's builtin resources",
                              where, q);
                free(key);
                continue;
            }
            free(key);
        } else {
            size_t at;
            int e = wpk_literal_splat(buf, g->value_body, &c.type, c.fill, &c.splat, why,
                                      sizeof why, &at);
            if (e) {
                unsigned l, col;
                wpk_line_cursor_at(&lc, buf, len, at, &l, &col);
                wpk_diag_emit(&d, WPACK_DIAG_ERROR, e, "%s:%u:%u: global @%s: %s", d.source, l,
                              col, g->name, why);
                continue;
            }
        }
        cand[ncand++] = c;
    }
    if (mark_shared(doc, cand, ncand))
        goto nomem;
    for (size_t i = 0; i < ncand; i++) /* what the archive's data will hold (a splat,
                                          an alias: nothing) */
        if (!cand[i].splat && !cand[i].alias_of)
            data_bytes = sat_add(data_bytes, cand[i].nbytes);
    if (!d.first_error && (rc = name_entries(doc, cand, ncand, &d, unescaped, &names))) {
        if (rc == WPACK_E_NOMEM)
            goto nomem;
    }
    if (!d.first_error &&
        wpk_extern_collect_ops(doc, &rkeys, opt.min_bytes, &d, &res, cand, ncand, unescaped, &tc, &ntc))
        goto nomem;
    for (size_t i = 0; i < ntc; i++)
        if (tc[i].writes && !tc[i].splat)
            data_bytes = sat_add(data_bytes, tc[i].nbytes);
    if (d.first_error) {
        rc = d.first_error;
        goto done;
    }

    /* 1. the archive, under a temporary name beside NEW */
    rc = wpack_writer_open(&w, archive_path, opt.writer);
    if (rc) {
        /* the writer's message names the archive where it is about it */
        wpk_diag_emit(&d, WPACK_DIAG_ERROR, rc, "%s", w ? wpack_writer_errmsg(w) : "out of memory");
        goto done;
    }
    /* the writer's output cap (max_data_bytes), asked once for all before
     * any byte is written */
    char what[400];
    wpk_fmt(what, sizeof what, "the inline weights of %s", d.source);
    if ((rc = wpack_writer_room(w, what, data_bytes))) {
        wpk_diag_emit(&d, WPACK_DIAG_ERROR, rc, "%s: %s: nothing written", archive_path,
                      wpack_writer_errmsg(w));
        goto done;
    }
    for (size_t i = 0; i < ncand; i++) {
        wpk_ext_cand *c = &cand[i];
        const wpk_global *g = &doc->globals[c->global];
        char where[400], why[300];
        wpk_global_where(where, sizeof where, &d, g);
        if (c->splat || c->alias_of) { /* one element, however many it stands for;
                                           or another name of an entry */
            rc = c->alias_of ? wpack_writer_add_alias(w, c->entry, cand[c->alias_of - 1].entry)
                             : wpack_writer_add_splat(w, c->entry, c->dtype, c->type.rank,
                                                      c->type.dims, c->fill,
                                                      wpack_dtype_size(c->dtype));
            if (rc) {
                wpk_diag_emit(&d, WPACK_DIAG_ERROR, rc, "%s: %s", where, wpack_writer_errmsg(w));
                goto done;
            }
            res.moved++;
            res.bytes_moved = sat_add(res.bytes_moved, c->nbytes);
            continue;
        }
        rc = wpack_writer_begin_tensor(w, c->entry, c->dtype, c->type.rank, c->type.dims);
        if (rc) {
            wpk_diag_emit(&d, WPACK_DIAG_ERROR, rc, "%s: %s", where, wpack_writer_errmsg(w));
            goto done;
        }
        size_t at = g->value_body.off;
        if (c->res)
            rc = wpk_literal_blob_decode(buf, c->res, &c->type, writer_sink, w, why, sizeof why);
        else
            rc = wpk_literal_decode(buf, g->value_body, &c->type, writer_sink, w, why, sizeof why, &at);
        if (rc == WPACK_E_IO) {
            rc = wpack_writer_errcode(w) ? wpack_writer_errcode(w) : rc;
            wpk_diag_emit(&d, WPACK_DIAG_ERROR, rc, "%s: %s", where, wpack_writer_errmsg(w));
            goto done;
        }
        if (rc) {
            unsigned l, col;
            wpk_mlir_line_col(buf, len, at, &l, &col);
            wpk_diag_emit(&d, WPACK_DIAG_ERROR, rc, "%s:%u:%u: global @%s: %s", d.source, l, col,
                          g->name, why);
            goto done;
        }
        rc = wpack_writer_end_tensor(w);
        if (rc) {
            wpk_diag_emit(&d, WPACK_DIAG_ERROR, rc, "%s: %s", where, wpack_writer_errmsg(w));
            goto done;
        }
        res.moved++;
        res.bytes_moved = sat_add(res.bytes_moved, c->nbytes);
    }
    for (size_t i = 0; i < ntc; i++) {
        wpk_ext_op *c = &tc[i];
        char why[300];
        res.moved++;
        res.bytes_moved = sat_add(res.bytes_moved, c->nbytes);
        if (!c->writes)
            continue;
        size_t at;
        if (c->splat) { /* one element, however many it stands for */
            if ((rc = wpack_writer_add_splat(w, c->key, c->dtype, c->type.rank, c->type.dims, c->fill,
                                             wpack_dtype_size(c->dtype))))
                wpk_fmt(why, sizeof why, "%s", wpack_writer_errmsg(w));
        } else if ((rc = wpack_writer_begin_tensor(w, c->key, c->dtype, c->type.rank, c->type.dims))) {
            wpk_fmt(why, sizeof why, "%s", wpack_writer_errmsg(w));
        } else {
            rc = c->res ? wpk_literal_blob_decode(buf, c->res, &c->type, writer_sink, w, why, sizeof why)
                        : wpk_literal_decode(buf, c->lit.value, &c->type, writer_sink, w, why,
                                             sizeof why, &at);
            if (rc == WPACK_E_IO && wpack_writer_errcode(w)) {
                rc = wpack_writer_errcode(w);
                wpk_fmt(why, sizeof why, "%s", wpack_writer_errmsg(w));
            }
            if (!rc && (rc = wpack_writer_end_tensor(w)))
                wpk_fmt(why, sizeof why, "%s", wpack_writer_errmsg(w));
        }
        if (rc) {
            wpk_diag_emit(&d, WPACK_DIAG_ERROR, rc, "%s:%u:%u: %s: %s", d.source,
                          c->line, c->col, wpk_ext_op_label(c), why);
            goto done;
        }
    }
    rc = wpack_writer_prepare(w); /* complete and durable, not yet in place */
    if (rc) {
        /* the writer's message names the file already, most of them */
        const char *wm = wpack_writer_errmsg(w);
        size_t al = strlen(archive_path);
        int named = strncmp(wm, archive_path, al) == 0 && wm[al] == ':';
        wpk_diag_emit(&d, WPACK_DIAG_ERROR, rc, "%s%s%s", named ? "" : archive_path, named ? "" : ": ", wm);
        goto done;
    }
    rc = wpack_open_file(&ar, wpack_writer_prepared_path(w), 0);
    if (rc) {
        wpk_diag_emit(&d, WPACK_DIAG_ERROR, rc, "%s: reopening the new archive: %s", archive_path,
                      ar ? wpack_errmsg(ar) : "out of memory");
        goto done;
    }

    /* 2. the plan: every moved global points at its entry */
    items = calloc(ncand + 1, sizeof *items);
    refs = calloc(doc->nresources + 1, sizeof *refs);
    drop = calloc(doc->nresources + 1, 1);
    patches = malloc((doc->nresources + 1 + 3 * ntc) * sizeof *patches);
    texts = calloc(3 * ntc + 1, sizeof *texts);
    lits = malloc((ntc + 1) * sizeof *lits);
    gvals = malloc((ncand + 1) * sizeof *gvals);
    if (!items || !refs || !drop || !patches || !texts || !lits || !gvals)
        goto nomem;
    for (size_t i = 0; i < ncand; i++) {
        wpack_tensor t;
        if (wpack_find(ar, cand[i].entry, &t) != WPACK_OK) {
            rc = WPACK_E_STATE;
            wpk_diag_emit(&d, WPACK_DIAG_ERROR, rc, "internal error: entry '%s' missing from the new archive",
                          cand[i].entry);
            goto done;
        }
        items[i] = (wpk_plan_item){.global = cand[i].global, .entry = t.index,
                                   .entry_name = t.name};
    }
    for (size_t i = 0; i < ntc; i++)
        lits[i] = tc[i].lit.value;
    for (size_t i = 0; i < ncand; i++) /* the globals' values, in file order */
        gvals[i] = doc->globals[cand[i].global].value;
    wpk_count_refs(doc, &rkeys, gvals, ncand, lits, ntc, refs);
    for (size_t i = 0; i < ncand; i++)
        if (cand[i].res && refs[cand[i].res - doc->resources] == 0 && !drop[cand[i].res - doc->resources]) {
            drop[cand[i].res - doc->resources] = 1;
            res.resources_dropped++;
        }
    for (size_t i = 0; i < ntc; i++)
        if (tc[i].res && refs[tc[i].res - doc->resources] == 0 && !drop[tc[i].res - doc->resources]) {
            drop[tc[i].res - doc->resources] = 1;
            res.resources_dropped++;
        }
    size_t npatches = wpk_drop_patches(doc, drop, patches);
    for (size_t i = 0; i < ntc; i++) {
        char *uri = NULL;
        if (opt.emit == WPACK_EMIT_URI) {
            size_t ul = 24 + 3 * tc[i].key_len;
            if (!(uri = malloc(ul)) || wpack_entry_uri(ar, tc[i].key, uri, ul)) {
                free(uri);
                goto nomem;
            }
        }
        size_t np;
        char ssa[40];
        wpk_fmt(ssa, sizeof ssa, "wpack.param.%zu", i);
        wpk_hoist_name hn = {tc[i].key, tc[i].key_len, tc[i].sym ? tc[i].sym : tc[i].key,
                             tc[i].sym ? tc[i].sym_len : tc[i].key_len};
        int e = tc[i].lit.arith
                    ? wpk_const_patches(buf, len, &tc[i].lit, &hn, uri, scope, tc[i].hoists,
                                        patches + npatches, &np, texts + 3 * i)
                : tc[i].hoisting
                    ? wpk_torch_param_patches(buf, len, &tc[i].lit, &hn, scope, tc[i].hoists, ssa,
                                              patches + npatches, &np, texts + 3 * i)
                    : wpk_torch_lit_patches(buf, len, &tc[i].lit, tc[i].key, tc[i].key_len, uri,
                                            patches + npatches, &np, texts + 3 * i);
        free(uri);
        if (e == WPACK_E_UNSUPPORTED) { /* checked before anything is written: cannot happen */
            rc = e;
            wpk_diag_emit(&d, WPACK_DIAG_ERROR, rc, "%s:%u:%u: torch.vtensor.literal: its form is not read",
                          d.source, tc[i].line, tc[i].col);
            goto done;
        }
        if (e)
            goto nomem;
        npatches += np;
    }

    /* 3. the IR */
    /* durable or not as the archive is (its writer options' no_sync) */
    rc = wpk_atomic_open(&out_tmp, out_path,
                         WPK_ATOMIC_FOLLOW_LINK |
                             (opt.writer && opt.writer->no_sync ? WPK_ATOMIC_NO_SYNC : 0),
                         err,
                         sizeof err);
    if (rc) {
        wpk_diag_emit(&d, WPACK_DIAG_ERROR, rc, "%s", err);
        goto done;
    }
    sink = malloc(sizeof *sink);
    if (!sink)
        goto nomem;
    wpk_fd_sink_init(sink, out_tmp.fd, in_fd, out_path);
    wpk_emitter e = {.doc = doc, .ar = ar, .emit = opt.emit, .scope = scope, .items = items,
                     .nitems = ncand, .write = wpk_fd_sink_write, .user = sink,
                     .patches = patches, .npatches = npatches, .replace_with_extern = 1,
                     .copy_input = wpk_fd_sink_copy, .write_error = wpk_fd_sink_describe};
    rc = wpk_emit_document(&e, err, sizeof err);
    if (!rc && wpk_fd_sink_flush(sink)) {
        rc = WPACK_E_IO;
        wpk_fd_sink_describe(sink, err, sizeof err);
    }
    if (rc) {
        wpk_diag_emit(&d, WPACK_DIAG_ERROR, rc, "%s", err);
        goto done;
    }
    /* 4. both into place: the archive, then the IR that names it */
    rc = wpk_commit_outputs(w, archive_path, &out_tmp, out_path, err, sizeof err);
    w = NULL;
    if (rc)
        wpk_diag_emit(&d, WPACK_DIAG_ERROR, rc, "%s", err);
    goto done;
nomem:
    rc = WPACK_E_NOMEM;
    wpk_diag_emit(&d, WPACK_DIAG_ERROR, rc, "out of memory");
done:
    if (w)
        wpack_writer_abort(w);
    wpack_close(ar);
    wpk_atomic_abort(&out_tmp);
    free(sink);
    free(patches);
    free(drop);
    free(refs);
    free(items);
    free(cand);
    wpk_res_index_free(&rkeys);
    for (size_t i = 0; names && i < ncand; i++)
        free(names[i]);
    for (size_t i = 0; i < ntc; i++) {
        free(tc[i].key);
        if (tc[i].sym_owned)
            free((char *)tc[i].sym);
        for (int k = 0; texts && k < 3; k++)
            free(texts[3 * i + k]);
    }
    free(tc);
    free(texts);
    free(lits);
    free(gvals);
    free(names);
    wpk_mlir_doc_free(doc);
    wpk_rsv_unmap_file(buf, len);
    if (in_fd >= 0)
        close(in_fd);
    res.warnings = d.warnings;
    if (res_out)
        *res_out = res;
    return rc;
}
