/* type_check.c - a resolved global's tensor type against its entry's
 * dtype, dims and size (and its #ml_program.extern type against its own). */
#include <string.h>

#include "bytes.h"
#include "internal.h"
#include "resolve_plan.h"

void wpk_check_types(wpk_diag *d, const wpk_mlir_doc *doc, const wpk_global *g,
                     const wpack_tensor *t, wpk_lazy_where *where, int *ok, wpk_type_cache *tc)
{
    char why[200];
    const char *buf = doc->buf;
    int rc = 0;
    wpk_mlir_tensor type_s, *type = &type_s;
    if (tc->text && tc->len == g->type_body.len &&
        wpk_same_bytes(tc->text, buf + g->type_body.off, tc->len)) {
        type = &tc->type;
    } else {
        rc = wpk_mlir_parse_tensor(buf + g->type_body.off, g->type_body.len, type, why,
                                   sizeof why);
        if (!rc) {
            tc->text = buf + g->type_body.off;
            tc->len = g->type_body.len;
            tc->type = *type;
            tc->dtype = -1;
            type = &tc->type;
        }
    }
    if (rc) {
        wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_UNSUPPORTED, "%s: type %.*s: %s", wpk_where(where),
                      (int)(g->type.len > 200 ? 200 : g->type.len), buf + g->type.off, why);
        *ok = 0;
        return;
    }
    /* the usual `#ml_program.extern : T) : T` spells T twice the same way */
    int same_text = g->value_type.len == g->type_body.len &&
                    wpk_same_bytes(buf + g->value_type.off, buf + g->type_body.off, g->type_body.len);
    if (g->value_kind == WPK_VAL_EXTERN && g->value_type.len && !same_text) {
        wpk_mlir_tensor et;
        if (wpk_mlir_parse_tensor(buf + g->value_type.off, g->value_type.len, &et, why, sizeof why) ||
            !wpk_mlir_tensor_equal(&et, type)) {
            wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_SHAPE,
                          "%s: its #ml_program.extern says %.*s but the global's type is %.*s", wpk_where(where),
                          (int)(g->value_type.len > 200 ? 200 : g->value_type.len),
                          buf + g->value_type.off, (int)(g->type_body.len > 200 ? 200 : g->type_body.len),
                          buf + g->type_body.off);
            *ok = 0;
            return;
        }
    }
    int same_dims = t->rank == type->rank;
    for (unsigned i = 0; same_dims && i < t->rank; i++)
        same_dims = t->dims[i] == type->dims[i];
    int elem_ok;
    if (tc->dtype == t->dtype && strcmp(tc->type.elem, type->elem) == 0) {
        elem_ok = tc->elem_ok;
    } else {
        elem_ok = wpk_mlir_elem_matches(type->elem, t->dtype);
        if (tc->text && strcmp(tc->type.elem, type->elem) == 0) {
            tc->dtype = t->dtype;
            tc->elem_ok = elem_ok;
        }
    }
    if (!elem_ok || !same_dims) {
        char q[300], et_s[200], shape[200];
        wpk_quote(q, sizeof q, t->name, t->name_len);
        wpk_mlir_format_tensor(et_s, sizeof et_s, t->dtype, t->rank, t->dims);
        const char *dn = wpack_dtype_name(t->dtype);
        size_t o = 0;
        shape[0] = 0;
        for (unsigned i = 0; i < t->rank && o < sizeof shape - 24; i++) {
            wpk_fmt(shape + o, sizeof shape - o, i ? ", %llu" : "%llu", (unsigned long long)t->dims[i]);
            o += strlen(shape + o);
        }
        wpk_diag_emit(d, WPACK_DIAG_ERROR, elem_ok ? WPACK_E_SHAPE : WPACK_E_DTYPE,
                      "%s: type %.*s does not match entry '%s' (%s [%s], i.e. %s): %s differ", wpk_where(where),
                      (int)(g->type_body.len > 200 ? 200 : g->type_body.len), buf + g->type_body.off,
                      q, dn ? dn : "block dtype", shape, et_s,
                      !elem_ok && !same_dims ? "element type and dims" : !elem_ok ? "element types" : "dims");
        *ok = 0;
        return;
    }
    size_t esz = wpack_dtype_size(t->dtype);
    uint64_t want;
    if (!esz || !wpk_mul(t->nelems, esz, &want) || want != t->nbytes) {
        char q[300];
        wpk_quote(q, sizeof q, t->name, t->name_len);
        wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_SIZE,
                      "%s: entry '%s' holds %llu bytes, not elements x size", wpk_where(where), q,
                      (unsigned long long)t->nbytes);
        *ok = 0;
    }
}
