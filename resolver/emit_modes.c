/*
 * emit_modes.c - the table of emit modes (resolve_int.h, wpk_emit_mode):
 * for each, its name, what it can do, and how it writes the reference to an
 * entry. Everything that differs between uri, iree and inline is here or
 * reached from here; a new mode is one row and its functions.
 */
#include <string.h>

#include "emit_int.h"
#include "internal.h"

int wpk_name_needs_escape(const char *s)
{
    return strchr(s, '"') || strchr(s, '\\');
}

/* --------------------------------------------------------------- uri */

/* uri refers by attribute; its value is the extern (externalize writes it) */
static void uri_value(wpk_strbuf *a, const wpk_emitter *e, const wpk_plan_item *it)
{
    (void)e;
    (void)it;
    wpk_sb_puts(a, "#ml_program.extern");
}

/* " {wpack.uri = \"wpack:<id>/": the dictionary goes after the type */
static size_t uri_head(const wpk_emitter *e, char *text, size_t cap)
{
    size_t n = strlen(e->uri_head);
    if (14 + n > cap)
        return 0;
    memcpy(text, " {wpack.uri = ", 14);
    memcpy(text + 14, e->uri_head, n);
    return 14 + n;
}

static char *uri_rest(char *d, const wpk_emitter *e, const wpk_global *g, const char *name, size_t n)
{
    (void)e;
    (void)g;
    d = wpk_uri_put(d, name, n);
    d[0] = '"';
    d[1] = '}';
    return d + 2;
}

/* -------------------------------------------------------------- iree */

static void iree_value(wpk_strbuf *a, const wpk_emitter *e, const wpk_plan_item *it)
{
    wpk_sb_puts(a, "#flow.parameter.named<\"");
    wpk_sb_puts(a, e->scope);
    wpk_sb_puts(a, "\"::\"");
    wpk_sb_puts(a, it->entry_name);
    wpk_sb_puts(a, "\">");
}

/* "#flow.parameter.named<\"<scope>\"::\"" */
static size_t iree_head(const wpk_emitter *e, char *text, size_t cap)
{
    size_t sl = e->scope ? strlen(e->scope) : cap;
    if (27 + sl > cap)
        return 0;
    memcpy(text, "#flow.parameter.named<\"", 23);
    memcpy(text + 23, e->scope, sl);
    memcpy(text + 23 + sl, "\"::\"", 4);
    return 27 + sl;
}

/* the name as IREE prints it, then " : T" unless the pretty util.global
 * shares the global's type */
static char *iree_rest(char *d, const wpk_emitter *e, const wpk_global *g, const char *name,
                       size_t n)
{
    memcpy(d, name, n);
    d[n] = '"';
    d[n + 1] = '>';
    d += n + 2;
    if (g->form != WPK_FORM_UTIL_PRETTY) {
        memcpy(d, " : ", 3);
        memcpy(d + 3, e->doc->buf + g->type.off, g->type.len);
        d += 3 + g->type.len;
    }
    return d;
}

/* inline: its value and blobs are emit_inline.c's (wpk_inline_value) */

/* ------------------------------------------------------------- table */

static const wpk_emit_mode modes[] = {
    {WPACK_EMIT_URI, "uri", WPACK_EMIT_CAN_EXTERNALIZE, 0, NULL, uri_value, uri_head, uri_rest,
     NULL, NULL, NULL},
    {WPACK_EMIT_IREE, "iree", WPACK_EMIT_CAN_EXTERNALIZE | WPACK_EMIT_HAS_SCOPE, 1, "IREE",
     iree_value, iree_head, iree_rest, NULL, NULL, NULL},
    {WPACK_EMIT_INLINE, "inline", WPACK_EMIT_READS_BYTES, 1, NULL, wpk_inline_value, NULL, NULL,
     wpk_inline_prepare, wpk_inline_append, wpk_inline_release},
};

const wpk_emit_mode *wpk_emit_mode_of(int emit)
{
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (modes[i].emit == emit)
            return &modes[i];
    return NULL;
}

int wpack_emit_from_name(const char *name)
{
    for (size_t i = 0; name && i < sizeof modes / sizeof modes[0]; i++)
        if (strcmp(modes[i].name, name) == 0)
            return modes[i].emit;
    return -1;
}

unsigned wpack_emit_flags(int emit)
{
    const wpk_emit_mode *m = wpk_emit_mode_of(emit);
    return m ? m->flags : 0;
}
