/*
 * make_meta_fanout.c - writes the "metadata fan-out" hostile archive of issue
 * 14 point 4: a valid archive whose string-array metadata "fanout" has N
 * elements that all reference one LEN-byte string (the value of "big").
 * Before the fix every open validated the string once per reference (N x LEN
 * bytes: 65,536 x 2 MiB = 128 GiB from a 3 MB file, about a minute).
 *
 *   tests/hostile/round2/inspect_meta_fanout.wpack.gz   N 65536, LEN 2 MiB (gzip -9)
 *   fuzz/corpus/fuzz_archive/r2-inspect-meta-fanout.wpack  N 1024, LEN 16 KiB
 *
 * Built by hand, from the repository root:
 *   make lib
 *   cc -std=c11 -D_GNU_SOURCE -Iinclude -Iformat -Itests tests/tools/make_meta_fanout.c \
 *       build/libwpack.a -lxxhash -lzstd -lm -lpthread -o build/make_meta_fanout
 *   build/make_meta_fanout OUT N LEN
 * The archive is made by the writer (N one-byte strings), then each array
 * element is pointed at the big string and the index re-sealed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/golden_content.h"

static void die(const char *what)
{
    fprintf(stderr, "make_meta_fanout: %s\n", what);
    exit(1);
}

int main(int argc, char **argv)
{
    if (argc != 4)
        die("usage: make_meta_fanout OUT N LEN");
    const char *out = argv[1];
    uint64_t n = strtoull(argv[2], NULL, 10), len = strtoull(argv[3], NULL, 10);
    if (!n || !len)
        die("N and LEN must be positive");
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.writer", out);

    wpack_writer_options opt;
    wpack_writer_options_init(&opt);
    opt.alignment = 64;
    opt.weight_stats = 0;
    wpack_writer *w = NULL;
    if (wpack_writer_open(&w, tmp, &opt))
        die(wpack_writer_errmsg(w));
    const char **elems = malloc(n * sizeof *elems);
    char *big = malloc(len + 1);
    if (!elems || !big)
        die("out of memory");
    for (uint64_t j = 0; j < n; j++)
        elems[j] = "a";
    memset(big, 'a', len);
    big[len] = 0;
    uint64_t d1[1] = {4};
    const float v[4] = {1, 2, 3, 4};
    char err[600];
    if (wpack_writer_add_tensor(w, "w", WPACK_DTYPE_F32, 1, d1, v, sizeof v) ||
        wpack_writer_set_string(w, "big", big) ||
        wpack_writer_set_array(w, "fanout", WPACK_META_STRING, n, elems))
        die(wpack_writer_errmsg(w));
    if (wpack_writer_finish(w, err, sizeof err))
        die(err);

    gimg m;
    m.p = test_slurp(tmp, &m.len);
    remove(tmp);
    if (!m.p)
        die("cannot read the writer's archive back");
    uint8_t *bigrec = gimg_meta(&m, "big"), *arr = gimg_meta(&m, "fanout");
    if (!bigrec || !arr)
        die("records not found");
    uint64_t soff = wpk_ld64(bigrec + WPK_M_VALUE_OFF), slen = wpk_ld64(bigrec + WPK_M_COUNT_OFF);
    uint8_t *p = gimg_aux(&m, wpk_ld64(arr + WPK_M_VALUE_OFF));
    for (uint64_t j = 0; j < n; j++) {
        wpk_st64(p + 16 * j, soff);
        wpk_st64(p + 16 * j + 8, slen);
    }
    gimg_seal_index(&m);

    wpack_archive *ar;
    if (wpack_open_memory(&ar, m.p, m.len, 0))
        die(wpack_errmsg(ar));
    wpack_close(ar);
    FILE *f = fopen(out, "wb");
    if (!f || fwrite(m.p, 1, m.len, f) != m.len || fclose(f))
        die("cannot write OUT");
    printf("%s: %zu bytes, %llu references to one %llu-byte string\n", out, m.len,
           (unsigned long long)n, (unsigned long long)slen);
    free(m.p);
    free(elems);
    free(big);
    return 0;
}
