/*
 * fuzz_npy.c - the .npy header parser (import/npy.c): npy_header_extent and
 * npy_parse_header on the input. A header that parses must describe a
 * consistent array, parse the same from exactly its own bytes, not parse
 * from fewer, and survive a trip through npy_format_header.
 *
 * npy.h has no packer that reads from memory (npy_pack_file takes a path),
 * so only the parser is fuzzed here.
 */
#include "fuzz.h"
#include "npy.h"

static void check_header(const uint8_t *buf, size_t len, const npy_header *h)
{
    FUZZ_ASSERT(h->major >= 1 && h->major <= 3 && h->minor == 0, "version %d.%d", h->major,
                h->minor);
    FUZZ_ASSERT(h->data_offset <= len && h->data_offset >= NPY_PREAMBLE_V1,
                "data offset %llu of %zu bytes", (unsigned long long)h->data_offset, len);
    FUZZ_ASSERT(wpack_dtype_name(h->dtype) && h->elem_size == wpack_dtype_size(h->dtype),
                "dtype %d with %zu-byte elements", h->dtype, h->elem_size);
    FUZZ_ASSERT(!h->byteswap || h->elem_size > 1, "byteswap of 1-byte elements");
    FUZZ_ASSERT(h->rank <= WPACK_MAX_RANK, "rank %u", h->rank);
    uint64_t ne = 1;
    for (unsigned k = 0; k < h->rank; k++)
        ne *= h->dims[k];
    FUZZ_ASSERT(ne == h->nelems && h->nbytes == h->nelems * h->elem_size,
                "nelems %llu nbytes %llu for the dims", (unsigned long long)h->nelems,
                (unsigned long long)h->nbytes);

    uint64_t off = 0;
    char err[256];
    int rc = npy_header_extent(buf, len, &off, err, sizeof err);
    FUZZ_ASSERT(rc == WPACK_OK && off == h->data_offset, "extent rc %d offset %llu, parse said %llu",
                rc, (unsigned long long)off, (unsigned long long)h->data_offset);

    /* Exactly the header's bytes are enough; one fewer is not. */
    size_t hl = (size_t)h->data_offset;
    uint8_t *exact = fuzz_copy(buf, hl);
    npy_header h2;
    rc = npy_parse_header(exact, hl, &h2, err, sizeof err);
    FUZZ_ASSERT(rc == WPACK_OK && h2.dtype == h->dtype && h2.rank == h->rank &&
                    h2.nbytes == h->nbytes && h2.fortran_order == h->fortran_order,
                "the header alone parses differently (rc %d: %s)", rc, err);
    rc = npy_parse_header(exact, hl - 1, &h2, err, sizeof err);
    FUZZ_ASSERT(rc != WPACK_OK, "a header one byte short parsed");
    fuzz_check_message("npy", err, sizeof err, rc);
    free(exact);

    /* What npy_format_header writes for this array parses back to it. */
    char out[4096];
    size_t n = npy_format_header(out, sizeof out, h->dtype, h->rank, h->dims);
    FUZZ_ASSERT(n > 0 && n % 64 == 0 && out[n - 1] == '\n', "format gave %zu bytes", n);
    uint8_t *again = fuzz_copy((const uint8_t *)out, n);
    rc = npy_parse_header(again, n, &h2, err, sizeof err);
    FUZZ_ASSERT(rc == WPACK_OK, "a formatted header does not parse: %s", err);
    FUZZ_ASSERT(h2.dtype == h->dtype && h2.rank == h->rank && h2.data_offset == n &&
                    !h2.fortran_order && !h2.byteswap && h2.nbytes == h->nbytes &&
                    memcmp(h2.dims, h->dims, sizeof h->dims) == 0,
                "a formatted header parses to another array");
    free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = fuzz_copy(data, size);
    npy_header h;
    char err[256];
    int rc = npy_parse_header(buf, size, &h, err, sizeof err);
    fuzz_check_message("npy", err, sizeof err, rc);
    FUZZ_ASSERT(rc == WPACK_OK || rc == WPACK_E_INPUT || rc == WPACK_E_UNSUPPORTED,
                "rc %d (%s)", rc, err);
    if (rc == WPACK_OK) {
        check_header(buf, size, &h);
    } else {
        /* Messages cut to small buffers stay terminated. */
        char tiny[8];
        int rc2 = npy_parse_header(buf, size, &h, tiny, sizeof tiny);
        FUZZ_ASSERT(rc2 == rc && strnlen(tiny, sizeof tiny) < sizeof tiny,
                    "rc %d with a small message buffer, %d with a large one", rc2, rc);
        FUZZ_ASSERT(npy_parse_header(buf, size, &h, tiny, 0) == rc, "rc differs with errlen 0");
    }
    free(buf);
    return 0;
}
