/* api_example.c - the README's C API example, built and run by the tests.
 * Writes an archive with two tensors and a name-map entry, reopens it,
 * looks a tensor up by the name a compiler uses, and verifies it. */
#include <stdio.h>
#include <wpack.h>

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "example.wpack";

    /* Write: the file appears only when finish succeeds. */
    wpack_writer *w;
    if (wpack_writer_open(&w, path, NULL) != WPACK_OK) {
        fprintf(stderr, "%s\n", wpack_writer_errmsg(w));
        wpack_writer_abort(w);
        return 1;
    }
    float weight[2][3] = {{1, 2, 3}, {4, 5, 6}}, bias[2] = {0.5f, -0.5f};
    uint64_t wdims[2] = {2, 3}, bdims[1] = {2};
    char err[512];
    if (wpack_writer_add_tensor(w, "0.weight", WPACK_DTYPE_F32, 2, wdims, weight, sizeof weight) ||
        wpack_writer_add_tensor(w, "0.bias", WPACK_DTYPE_F32, 1, bdims, bias, sizeof bias) ||
        wpack_writer_add_name(w, "_param_constant0", "0.weight") ||
        wpack_writer_set_string(w, "model.name", "example")) {
        fprintf(stderr, "%s\n", wpack_writer_errmsg(w));
        wpack_writer_abort(w);
        return 1;
    }
    if (wpack_writer_finish(w, err, sizeof err) != WPACK_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }

    /* Read: mmap, whole index validated at open, zero-copy views. */
    wpack_archive *ar;
    if (wpack_open_file(&ar, path, 0) != WPACK_OK) {
        fprintf(stderr, "%s (%s)\n", wpack_errmsg(ar), wpack_error_name(wpack_errcode(ar)));
        wpack_close(ar);
        return 1;
    }
    wpack_tensor t;
    const void *bytes;
    uint64_t nbytes;
    /* the view points into the mapped file, checked against its XXH3 first */
    if (wpack_find(ar, "_param_constant0", &t) == WPACK_OK &&
        wpack_tensor_view(ar, t.index, &bytes, &nbytes) == WPACK_OK) {
        const float *v = bytes;
        printf("%s: %s [%llu, %llu], v[5] = %g\n", t.name, wpack_dtype_name(t.dtype),
               (unsigned long long)t.dims[0], (unsigned long long)t.dims[1], v[5]);
    }
    wpack_stats s; /* weight stats, filled by the writer */
    if (wpack_stats_find(ar, "0.weight", WPACK_STATS_WEIGHT, &s) == WPACK_OK)
        printf("min %g max %g mean %g\n", s.min, s.max, s.mean);
    int rc = wpack_verify_entry(ar, t.index);
    printf("checksum: %s\n", rc == WPACK_OK ? "ok" : wpack_errmsg(ar));
    wpack_close(ar);
    return rc == WPACK_OK ? 0 : 1;
}
