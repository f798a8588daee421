/*
 * fuzz_mlir.c - the MLIR scanner of the resolver (resolver/mlir_scan.c, mlir_*.c):
 * wpk_mlir_scan_buffer with WPK_SCAN_OPS on the input (a copy of the body
 * in resolver/fuzz_mlir.c). Invariants: every span of a scanned document
 * lies inside the input, and a failed scan gives an error with line:column.
 * Then externalize's literal decoder (resolver/mlir_literal.c) on each
 * global's value with its tensor type, for tensors up to 1 MiB: a decode
 * that succeeds gives exactly the type's byte count, a failure points inside
 * the input, and a value taken as a splat decodes to its element repeated.
 * Externalize's torch.vtensor.literal and constant op (arith, stablehlo,
 * mhlo) reading (resolver/extern_torch.c): every span inside the input,
 * the insertion points of a load and a hoisted global before the op, and
 * a dense<...> value decoded as a global's. And --annotate's location names (resolver/annotate_loc.c) of every op:
 * alias reads stay within the walk's bound, each name within the input's
 * size (a libFuzzer timeout finds a walk that blows up).
 */
#include "fuzz.h"
#include "mlir_literal.h"
#include "mlir_scan.h"
#include "resolve_int.h"

typedef struct {
    uint64_t got;
    const unsigned char *splat; /* the element, when the value is a splat */
    size_t esize;
    int mismatch;
} decoded;

static int count_bytes(void *user, const void *data, size_t n)
{
    decoded *d = user;
    for (size_t i = 0; d->splat && i < n && !d->mismatch; i++)
        d->mismatch = ((const unsigned char *)data)[i] != d->splat[(d->got + i) % d->esize];
    d->got += n;
    return 0;
}

/* value (`dense<...> : T` as written) read as a tensor of type ty */
static void check_literal(const char *buf, size_t size, wpk_span value, wpk_span ty)
{
    wpk_mlir_tensor t;
    char why[300];
    int ok;
    if (!value.len || !ty.len || wpk_mlir_parse_tensor(buf + ty.off, ty.len, &t, why, sizeof why))
        return;
    uint64_t nbytes = wpk_literal_nbytes(&t, &ok);
    if (!ok || nbytes > (1u << 20) || !nbytes)
        return;
    unsigned char elem[8];
    int is_splat = 0;
    size_t where = 0;
    int src = wpk_literal_splat(buf, value, &t, elem, &is_splat, why, sizeof why, &where);
    FUZZ_ASSERT(where <= size, "splat check points at %zu of %zu", where, size);
    decoded d = {0, NULL, 1, 0};
    if (!src && is_splat) {
        d.splat = elem;
        int dt = wpk_literal_dtype(t.elem); /* i1 comes out one byte an element */
        d.esize = dt == WPACK_DTYPE_BOOL ? 1 : wpack_dtype_size(dt);
    }
    int rc = wpk_literal_decode(buf, value, &t, count_bytes, &d, why, sizeof why, &where);
    if (rc) {
        FUZZ_ASSERT(where <= size, "decode error points at %zu of %zu", where, size);
        FUZZ_ASSERT(why[0], "decode error %d without a reason", rc);
    } else {
        FUZZ_ASSERT(d.got == nbytes, "decoded %llu bytes of %llu", (unsigned long long)d.got,
                    (unsigned long long)nbytes);
        FUZZ_ASSERT(!d.mismatch, "a splat decoded to other bytes than its element");
    }
}

typedef struct {
    size_t size, names;
} name_check;

static void check_name(void *user, const char *s, size_t n)
{
    name_check *c = user;
    (void)s;
    FUZZ_ASSERT(n <= c->size, "a location name of %zu bytes in %zu", n, c->size);
    c->names++;
}

static void check_locs(const wpk_mlir_doc *doc, size_t size)
{
    wpk_loc_walk w;
    if (wpk_loc_walk_init(&w, doc) == 0) {
        for (size_t i = 0; i < doc->nops; i++) {
            name_check c = {size, 0};
            size_t n = wpk_loc_names(&w, doc->ops[i].loc, check_name, &c);
            FUZZ_ASSERT(n == c.names, "%zu names counted, %zu given", n, c.names);
        }
        FUZZ_ASSERT(w.alias_bytes <= w.max_alias_bytes, "alias bytes read past the bound");
    }
    wpk_loc_walk_free(&w);
}

static void check_span(wpk_span s, size_t len, const char *what)
{
    FUZZ_ASSERT(s.off <= len && s.len <= len - s.off, "%s span %zu+%zu outside %zu", what, s.off,
                s.len, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = fuzz_copy(data, size);
    char err[512];
    wpk_mlir_doc *doc = NULL;
    int rc = wpk_mlir_scan_buffer((const char *)copy, size, WPK_SCAN_OPS, &doc, err, sizeof err);
    if (rc) {
        FUZZ_ASSERT(doc == NULL, "failed scan returned a document");
        FUZZ_ASSERT(err[0] >= '1' && err[0] <= '9', "error without line:column: %s", err);
    } else {
        for (size_t i = 0; i < doc->nglobals; i++) {
            const wpk_global *g = &doc->globals[i];
            check_span(g->op, size, "op");
            check_span(g->sym, size, "sym");
            check_span(g->value, size, "value");
            check_span(g->value_body, size, "value_body");
            check_span(g->type, size, "type");
            check_span(g->type_body, size, "type_body");
            check_span(g->attrs, size, "attrs");
            check_span(g->uri_value, size, "uri");
            FUZZ_ASSERT(g->attrs_insert <= size && g->value_insert <= size, "insert points");
        }
        for (size_t i = 0; i < doc->naliases; i++) {
            check_span(doc->aliases[i].name, size, "alias name");
            check_span(doc->aliases[i].value, size, "alias value");
        }
        for (size_t i = 0; i < doc->nresources; i++)
            check_span(doc->resources[i].blob, size, "blob");
        for (size_t i = 0; i < doc->nops; i++)
            check_span(doc->ops[i].loc, size, "loc");
        for (size_t i = 0; i < doc->nmodules; i++)
            check_span(doc->modules[i].sym, size, "module sym");
        for (size_t i = 0; i < doc->ntorch_ops; i++) { /* externalize's torch literals */
            wpk_torch_lit l;
            if (!wpk_torch_lit_parse((const char *)copy, size, &doc->torch_ops[i], &l))
                continue;
            check_span(l.value, size, "torch value");
            check_span(l.type, size, "torch type");
            check_span(l.replace, size, "torch replace");
            check_span(l.entry, size, "torch entry");
            check_span(l.attrs, size, "torch attrs");
            FUZZ_ASSERT(l.attrs_insert <= size, "torch attrs insert point");
            /* where a load and a hoisted global go, and the rewritten type's ':' */
            FUZZ_ASSERT(l.stmt <= l.op.off && l.top_stmt <= l.op.off, "statement starts after the op");
            FUZZ_ASSERT(l.colon < size && l.fn_open < size, "torch ':' or '(' outside the input");
            check_span(l.result, size, "constant result type");
            if (l.dense) /* a dense<...> literal: decoded as a global's */
                check_literal((const char *)copy, size, l.value, l.type);
        }
        for (size_t i = 0; i < doc->nglobals; i++)
            check_literal((const char *)copy, size, doc->globals[i].value_body, doc->globals[i].type_body);
        check_locs(doc, size);
        wpk_mlir_doc_free(doc);
    }
    free(copy);
    return 0;
}
