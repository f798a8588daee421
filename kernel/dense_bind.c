/* dense_bind.c - resolve a Linear module's archive entries into a wpack_linear. */
#include <stdio.h>
#include <string.h>

#include "dense.h"

static int bind_fail(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int bind_fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        wpk_vfmt(err, errlen, fmt, ap);
        va_end(ap);
        wpk_msg_escape(err, errlen); /* entry names and the prefix may hold anything */
    }
    return code;
}

static int host_is_little_endian(void)
{
    const uint16_t one = 1;
    uint8_t b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* A view of a data entry, or an error naming it. */
static int need_view(const wpack_tensor *t, const char *role, char *err, size_t errlen)
{
    if (t->kind == WPACK_KIND_SPLAT)
        return bind_fail(err, errlen, WPACK_E_NO_VIEW,
                         "%s '%s': a splat entry has no bytes to compute with (extract it first)",
                         role, t->name);
    if (!t->data) /* e.g. an archive read over HTTP: no mapping to compute from */
        return bind_fail(err, errlen, WPACK_E_NO_VIEW,
                         "%s '%s': the entry has no bytes in memory (a remote archive gives no "
                         "view); wpack_read() it into a buffer and describe that instead",
                         role, t->name);
    if (t->codec != WPACK_CODEC_NONE)
        return bind_fail(err, errlen, WPACK_E_CODEC, "%s '%s': compressed entries are not supported",
                         role, t->name);
    return WPACK_OK;
}

/* [out] or [out, 1] */
static int is_vector_of(const wpack_tensor *t, uint64_t n)
{
    return (t->rank == 1 && t->dims[0] == n) || (t->rank == 2 && t->dims[0] == n && t->dims[1] == 1);
}

int wpack_linear_from_tensors(const wpack_tensor *weight, const wpack_tensor *scale,
                              const wpack_tensor *bias, wpack_linear *out, char *err,
                              size_t errlen)
{
    if (!weight || !out)
        return bind_fail(err, errlen, WPACK_E_INVALID_ARGUMENT, "linear: weight or out is NULL");
    memset(out, 0, sizeof *out);
    if (!host_is_little_endian())
        return bind_fail(err, errlen, WPACK_E_UNSUPPORTED,
                         "linear '%s': the dense kernel needs a little-endian host", weight->name);
    int rc = need_view(weight, "weight", err, errlen);
    if (rc)
        return rc;
    int dt = weight->dtype;
    if (dt != WPACK_DTYPE_F32 && dt != WPACK_DTYPE_F16 && dt != WPACK_DTYPE_BF16 &&
        dt != WPACK_DTYPE_I8) {
        const char *n = wpack_dtype_name(dt);
        return bind_fail(err, errlen, WPACK_E_DTYPE,
                         "weight '%s': dtype %s not supported (f32, f16, bf16, i8)", weight->name,
                         n ? n : "(block dtype)");
    }
    if (weight->rank != 2)
        return bind_fail(err, errlen, WPACK_E_SHAPE, "weight '%s': rank %u, expected [out, in]",
                         weight->name, weight->rank);
    uint64_t o = weight->dims[0], i = weight->dims[1];
    if (o == 0 || i == 0)
        return bind_fail(err, errlen, WPACK_E_SHAPE, "weight '%s': zero dimension [%llu, %llu]",
                         weight->name, (unsigned long long)o, (unsigned long long)i);
    if (scale) {
        if ((rc = need_view(scale, "scale", err, errlen)))
            return rc;
        if (scale->dtype != WPACK_DTYPE_F32)
            return bind_fail(err, errlen, WPACK_E_DTYPE, "scale '%s': dtype %s, expected f32",
                             scale->name, wpack_dtype_name(scale->dtype) ? wpack_dtype_name(scale->dtype) : "?");
        if (!is_vector_of(scale, o))
            return bind_fail(err, errlen, WPACK_E_SHAPE,
                             "scale '%s': shape does not match [%llu] (weight '%s' has %llu outputs)",
                             scale->name, (unsigned long long)o, weight->name, (unsigned long long)o);
    } else if (dt == WPACK_DTYPE_I8) {
        return bind_fail(err, errlen, WPACK_E_DTYPE,
                         "weight '%s': i8 weights need a per-output-channel f32 scale entry '%s_scale'",
                         weight->name, weight->name);
    }
    if (bias) {
        if ((rc = need_view(bias, "bias", err, errlen)))
            return rc;
        if (bias->dtype != WPACK_DTYPE_F32 && bias->dtype != WPACK_DTYPE_F16 &&
            bias->dtype != WPACK_DTYPE_BF16)
            return bind_fail(err, errlen, WPACK_E_DTYPE, "bias '%s': dtype %s, expected f32, f16 or bf16",
                             bias->name, wpack_dtype_name(bias->dtype) ? wpack_dtype_name(bias->dtype) : "?");
        if (bias->rank != 1 || bias->dims[0] != o)
            return bind_fail(err, errlen, WPACK_E_SHAPE,
                             "bias '%s': shape is not [%llu] (weight '%s' has %llu outputs)",
                             bias->name, (unsigned long long)o, weight->name, (unsigned long long)o);
    }
    out->in_features = i;
    out->out_features = o;
    out->weight_dtype = dt;
    out->weight = weight->data;
    out->scale = scale ? scale->data : NULL;
    out->bias_dtype = bias ? bias->dtype : 0;
    out->bias = bias ? bias->data : NULL;
    return WPACK_OK;
}

/* Look PREFIX + suffix up; 0 found, WPACK_E_NOT_FOUND, or another error. */
static int find_part(const wpack_archive *ar, const char *prefix, const char *suffix,
                     wpack_tensor *t, char *name, size_t namelen)
{
    int n = snprintf(name, namelen, "%s%s", prefix, suffix);
    if (n < 0 || (size_t)n >= namelen)
        return WPACK_E_LIMIT;
    return wpack_find(ar, name, t);
}

int wpack_linear_bind(const wpack_archive *ar, const char *prefix, wpack_linear *out, char *err,
                      size_t errlen)
{
    if (!ar || !prefix || !out)
        return bind_fail(err, errlen, WPACK_E_INVALID_ARGUMENT, "linear: NULL argument");
    memset(out, 0, sizeof *out); /* a failed bind leaves no layer a forward call takes */
    char name[WPACK_MAX_NAME + 32];
    wpack_tensor w, s, b;
    int rc = find_part(ar, prefix, ".weight", &w, name, sizeof name);
    if (rc == WPACK_E_LIMIT)
        return bind_fail(err, errlen, WPACK_E_NAME, "linear '%.64s...': prefix too long", prefix);
    if (rc)
        return bind_fail(err, errlen, WPACK_E_NOT_FOUND, "linear '%s': no entry '%s'", prefix, name);
    int rs = find_part(ar, prefix, ".weight_scale", &s, name, sizeof name);
    int rb = find_part(ar, prefix, ".bias", &b, name, sizeof name);
    rc = wpack_linear_from_tensors(&w, rs == WPACK_OK ? &s : NULL, rb == WPACK_OK ? &b : NULL, out,
                                   err, errlen);
    /* The views the kernel will read: unless the archive was opened with
     * WPACK_OPEN_NO_VERIFY_READS, wpack_tensor_view checks each entry's
     * bytes once. */
    const wpack_tensor *used[3] = {&w, rs == WPACK_OK ? &s : NULL, rb == WPACK_OK ? &b : NULL};
    for (int k = 0; k < 3 && rc == WPACK_OK; k++) {
        const void *p;
        uint64_t n;
        if (used[k] && (rc = wpack_tensor_view(ar, used[k]->index, &p, &n)))
            bind_fail(err, errlen, rc, "%s", wpack_errmsg(ar));
    }
    return rc;
}
