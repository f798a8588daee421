/*
 * fuzz_mlir.c - the MLIR scanner of the resolver (resolver/mlir_scan.c, mlir_*.c):
 * wpk_mlir_scan_buffer with WPK_SCAN_OPS on the input (a copy of the body
 * in resolver/fuzz_mlir.c). Invariants: every span of a scanned document
 * lies inside the input, and a failed scan gives an error with line:column.
 */
#include "fuzz.h"
#include "mlir_scan.h"

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
        wpk_mlir_doc_free(doc);
    }
    free(copy);
    return 0;
}
