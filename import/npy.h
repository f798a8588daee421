/*
 * npy.h - NumPy .npy files: a strict header parser, a streaming packer into a
 * wpack writer, and a header formatter for `wpack extract`.
 *
 * The .npy format: "\x93NUMPY", major and minor version bytes, the header
 * length (u16 LE for 1.0, u32 LE for 2.0 and 3.0), then the header: a Python
 * dict literal {'descr': ..., 'fortran_order': ..., 'shape': ...} padded with
 * spaces and a '\n', then the array bytes. 3.0 only differs in that the
 * header is UTF-8 (1.0 and 2.0 are latin-1).
 *
 * The parser lives in npy.c (needs only format/fmt.c); npy_pack_file lives in
 * npy_pack.c (also needs the writer).
 */
#ifndef WPACK_PACKER_NPY_H
#define WPACK_PACKER_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "wpack.h"

/* Header bytes we accept. numpy itself refuses headers above 10000 bytes
 * unless max_header_size is raised; we allow more (a rank-8 header with
 * 20-digit dims is still under 400 bytes) but cap it so that a hostile
 * length cannot make us read or allocate much. */
#define NPY_MAX_HEADER_LEN (1u << 20)

/* Bytes before the header dict: magic, version and the length field. */
#define NPY_PREAMBLE_V1 10u
#define NPY_PREAMBLE_V2 12u

typedef struct npy_header {
    int dtype;                 /* WPACK_DTYPE_* */
    size_t elem_size;
    int byteswap;              /* stored big-endian and elem_size > 1: bytes must be swapped */
    int fortran_order;
    unsigned rank;
    uint64_t dims[WPACK_MAX_RANK];
    uint64_t nelems, nbytes;   /* checked products */
    uint64_t data_offset;      /* where the array bytes start in the file */
    int major, minor;          /* npy format version 1.0 / 2.0 / 3.0 */
    /* 1 when dtype came from a "# wpack dtype NAME (raw bits)" comment that
     * npy_format_header writes after the dict (bf16, f8e4m3fn, f8e5m2 stored
     * as '<u2' / '|u1'); numpy itself sees the raw integer type. */
    int dtype_from_comment;
} npy_header;

/*
 * Parse the header at the start of buf (len bytes available; the whole file
 * or at least the header). Returns WPACK_OK or WPACK_E_INPUT /
 * WPACK_E_UNSUPPORTED with a message in err ("header length 70000 above the
 * 65535 limit", "descr '|O' (object arrays) not supported", "shape dim -3 is
 * negative", ...). Never reads outside buf. *h is only meaningful on success.
 */
int npy_parse_header(const void *buf, size_t len, npy_header *h, char *err, size_t errlen);

/*
 * The first step of npy_parse_header on its own: check the magic, version
 * and header length and store in *data_offset where the header ends (so the
 * caller knows how many bytes to read before calling npy_parse_header).
 * Needs only the first NPY_PREAMBLE_V2 bytes (fewer for a short file).
 */
int npy_header_extent(const void *buf, size_t len, uint64_t *data_offset, char *err,
                      size_t errlen);

/*
 * Stream a whole .npy file into the writer as tensor `name`. C order is read
 * in 4 MiB chunks and byte-swapped to little-endian when needed; Fortran
 * order is mapped and transposed in bands of rows into a 4 MiB buffer (memory
 * does not grow with the array beyond the mapping). The file must hold
 * exactly data_offset + nbytes bytes. progress (may be NULL) is called with
 * the array bytes done so far, about every 4 MiB and once at the end.
 *
 * Everything about the input is checked before the tensor is begun, so an
 * input error leaves the writer as it was. An I/O or writer error after that
 * leaves the writer inside the tensor: abort the writer then. Messages start
 * with the file path; writer errors carry the writer's message.
 */
typedef void (*npy_progress_fn)(void *user, uint64_t bytes_done);
#define NPY_BUFFER_BYTES (4u << 20) /* npy_pack_file's buffer */
int npy_pack_file(wpack_writer *w, const char *name, const char *path, npy_progress_fn progress,
                  void *user, char *err, size_t errlen);

/* npy_pack_file with a chosen buffer size (rounded down to a multiple of 8,
 * at least 8): lets tests drive the chunk and band logic with small files. */
int npy_pack_file_buffered(wpack_writer *w, const char *name, const char *path,
                           npy_progress_fn progress, void *user, size_t buffer_bytes,
                           char *err, size_t errlen);
/* The same from fd, a regular file the caller opened (wpk_open_input) and
 * closes; st its fstat, path only for messages. */
struct stat;
int npy_pack_fd(wpack_writer *w, const char *name, const char *path, int fd,
                const struct stat *st, npy_progress_fn progress, void *user, size_t buffer_bytes,
                char *err, size_t errlen);

/*
 * Write a v1.0 header (v2.0 if it does not fit in 65535 bytes) for a C-order
 * little-endian array of dtype/rank/dims to buf; returns the header length
 * (a multiple of 64, ending in '\n': the array bytes follow it) or 0 when buf
 * is too small, dtype is not a built-in dtype, rank > WPACK_MAX_RANK, or
 * the product of the non-zero dims and the element size overflows 64 bits
 * (a shape numpy and npy_parse_header refuse, even with a zero dim).
 * bf16 is written as '<u2', f8e4m3fn and f8e5m2 as '|u1', with a comment
 * after the dict naming the real dtype ("  # wpack dtype bf16 (raw bits)"),
 * which numpy ignores and npy_parse_header reads back. bool is '|b1', which
 * is exactly numpy's bool, so it needs no comment. dims may be NULL for
 * rank 0.
 */
size_t npy_format_header(char *buf, size_t buflen, int dtype, unsigned rank,
                         const uint64_t *dims);
/* Why npy_format_header refused a built-in dtype's tensor, for messages. */
#define NPY_NO_HEADER_WHY "its shape has non-zero dims whose product overflows 64 bits " \
                          "(numpy refuses such a shape even with a zero dim)"

/* The descr npy_format_header writes for a dtype ("<f4", "|b1", ...), or NULL. */
const char *npy_descr_for(int dtype);

#endif
