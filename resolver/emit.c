/*
 * emit.c - write the scanned document with the plan applied: the input is
 * copied through byte for byte (emit_out.c) except for one edit per
 * resolved global, made as its emit mode says (emit_modes.c: an attribute
 * for uri, the initial value for iree and inline), and the caller's
 * patches; the mode may add to the end (inline: emit_inline.c).
 */
#include <stdlib.h>
#include <string.h>

#include "emit_int.h"
#include "internal.h"

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
    /* wpk_emit_room for every byte as %XX */
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
    if (g->form == WPK_FORM_UTIL_PRETTY && !e->mode->edits_value) {
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
        e->mode->put_value(a, e, it);
        if (typed) {
            puts_(a, " : ");
            put(a, doc->buf + g->type.off, g->type.len);
        }
    } else if (g->form == WPK_FORM_UTIL_PRETTY) {
        ed.off = g->value_insert;
        puts_(a, "= ");
        e->mode->put_value(a, e, it);
        puts_(a, " ");
    } else {
        /* generic util.global without initial_value: add one to its dict */
        ed.off = g->value_insert;
        puts_(a, ", initial_value = ");
        e->mode->put_value(a, e, it);
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
    int uri = !e->mode->edits_value; /* the reference is wpack.uri */
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

/* Patches that sort before edit x (the order of edit_cmp: by offset,
 * insertions first, the globals' edits before patches). */
static void write_patches_before(wpk_out *o, size_t *pos, const wpk_patch **pp, size_t np,
                                 size_t *next, const edit *x)
{
    while (*next < np && !o->rc) {
        const wpk_patch *p = pp[*next];
        if (x && (p->off > x->off ||
                  (p->off == x->off && !((p->len == 0) && (x->len != 0)))))
            break;
        wpk_emit_edit(o, pos, p->off, p->len, p->text, p->text_len);
        (*next)++;
    }
}

/* The text every plain edit starts with (the mode's plain_head), copied
 * as one fixed-size block; len 0: no plain edits. */
typedef struct {
    char text[96];
    size_t len;
} edit_head;

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
static int plain_edit(wpk_out *o, size_t *pos, const wpk_plan_item *it, const edit_head *h)
{
    const wpk_emitter *e = o->e;
    const wpk_mlir_doc *doc = e->doc;
    const wpk_global *g = &doc->globals[it->global];
    int uri = !e->mode->edits_value;
    size_t off, len = 0, tail = 0;
    if (it->attr_text)
        return 0;
    if (uri && !g->uri_value.len && !g->attrs.len) {
        off = g->attrs_insert;
    } else if (!uri && g->value.len) {
        off = g->value.off;
        len = g->value.len;
        tail = 3 + g->type.len; /* at most " : T" after the value */
    } else {
        return 0;
    }
    if (off < *pos || off - *pos > (64u << 10)) /* a long run: wpk_emit_input may copy it */
        return 0;
    size_t gap = off - *pos, n = strlen(it->entry_name);
    if (n > (16u << 10) || tail > (16u << 10))
        return 0;
    char *d0 = wpk_emit_room(o, gap + sizeof h->text + 3 * n + 2 + tail);
    if (!d0)
        return 0; /* failed already: the general path stops too */
    char *d = d0;
    memcpy(d, doc->buf + *pos, gap);
    d += gap;
    memcpy(d, h->text, sizeof h->text); /* fixed size: a few vector moves */
    d += h->len;
    d = e->mode->plain_rest(d, e, g, it->entry_name, n);
    o->used += (size_t)(d - d0);
    *pos = off + len;
    return 1;
}

/* What one pass over the document needs: the sorted patches, the fast
 * path's head, the arena for one item's edit text. */
typedef struct {
    const wpk_patch **pp;
    edit_head eh;
    int plain;
    arena a;
    void *mode_state;
} pass_ctx;

/* Write (or, o->counting, count) the whole output once. */
static void emit_pass(wpk_out *o, pass_ctx *c)
{
    wpk_emitter *e = o->e;
    size_t pos = 0, next_patch = 0;
    for (size_t i = 0; i < e->nitems && !o->rc; i++) {
        if (c->plain && plain_edit(o, &pos, &e->items[i], &c->eh))
            continue;
        edit ed[2];
        c->a.n = 0;
        size_t n = edits_for(&c->a, e, &e->items[i], ed);
        if (c->a.failed) {
            o->rc = WPACK_E_NOMEM;
            wpk_fmt(o->err, o->errlen, "out of memory");
            break;
        }
        if (n == 2 && edit_cmp(&ed[0], &ed[1]) > 0) {
            edit t = ed[0];
            ed[0] = ed[1];
            ed[1] = t;
        }
        for (size_t k = 0; k < n && !o->rc; k++) {
            write_patches_before(o, &pos, c->pp, e->npatches, &next_patch, &ed[k]);
            wpk_emit_edit(o, &pos, ed[k].off, ed[k].len, c->a.p + ed[k].text, ed[k].text_len);
        }
    }
    if (!o->rc)
        write_patches_before(o, &pos, c->pp, e->npatches, &next_patch, NULL);
    if (!o->rc)
        wpk_emit_input(o, pos, e->doc->len - pos);
    if (!o->rc && e->mode->append)
        e->mode->append(o, c->mode_state);
    wpk_emit_flush(o);
}

int wpk_emit_document(wpk_emitter *e, char *err, size_t errlen)
{
    const wpk_mlir_doc *doc = e->doc;
    e->mode = wpk_emit_mode_of(e->emit);
    if (!e->mode) {
        wpk_fmt(err, errlen, "internal error: no emit mode %d", e->emit);
        return WPACK_E_INVALID_ARGUMENT;
    }
    pass_ctx c;
    memset(&c, 0, sizeof c);
    size_t cap = doc->len < WPK_STAGE_MIN ? WPK_STAGE_MIN : doc->len < WPK_STAGE_BYTES ? doc->len : WPK_STAGE_BYTES;
    wpk_out o = {e, 0, err, errlen, wpk_big_calloc(cap), 0, cap, 0, 0};
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
    if (e->mode->prepare && (o.rc = e->mode->prepare(e, &c.mode_state)))
        wpk_fmt(err, errlen, "out of memory");
    if (!o.rc && e->npatches) {
        c.pp = malloc(e->npatches * sizeof *c.pp);
        if (!c.pp) {
            o.rc = WPACK_E_NOMEM;
            wpk_fmt(err, errlen, "out of memory");
        } else {
            for (size_t i = 0; i < e->npatches; i++)
                c.pp[i] = &e->patches[i];
            qsort(c.pp, e->npatches, sizeof *c.pp, patch_cmp);
        }
    }
    set_uri_head(e);
    /* one item's edit text at a time: the arena stays small and warm */
    if (e->mode->plain_head)
        c.eh.len = e->mode->plain_head(e, c.eh.text, sizeof c.eh.text);
    c.plain = c.eh.len && !e->npatches && !e->replace_with_extern;
    if (!o.rc && e->max_output) {
        /* the output's size first, from the edits and the blobs' sizes
         * (no blob is read): above the cap, nothing is written */
        o.counting = 1;
        emit_pass(&o, &c);
        o.counting = 0;
        if (!o.rc && o.counted > e->max_output) {
            wpk_fmt(err, errlen,
                    "the output would be %llu bytes, above the output cap of %llu bytes%s: "
                    "nothing written",
                    (unsigned long long)o.counted, (unsigned long long)e->max_output,
                    e->mode->flags & WPACK_EMIT_READS_BYTES
                        ? " (the entries' bytes are written as hex, 2 digits a byte)"
                        : "");
            o.rc = WPACK_E_TOO_LARGE;
        }
    }
    if (!o.rc)
        emit_pass(&o, &c);
    wpk_big_free(o.buf, o.cap);
    free(c.pp);
    free(c.a.p);
    if (e->mode->release)
        e->mode->release(c.mode_state);
    return o.rc;
}
