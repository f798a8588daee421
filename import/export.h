/*
 * export.h - archives back out to the formats other tools read:
 *   safetensors  a file strict readers accept (header padded to 8 bytes with
 *                spaces, tensors in name order, contiguous, no holes);
 *                metadata as __metadata__ strings (numbers in shortest
 *                round-trip form, booleans "true"/"false", arrays as JSON,
 *                bytes as hex). Aliases and splats are written out in full
 *                (safetensors has neither).
 *   npz          a zip of NAME.npy (stored), as numpy.savez writes
 *   tar          a tar of NAME.npy
 * In npz/tar names get extract's escapes ('/' -> %2F, '%' -> %25, a leading
 * '.' -> %2E). Output goes to a temporary file renamed into place, so a
 * failure leaves nothing at out. Block-quantized tensors have no equivalent
 * in safetensors/npz/tar: they are an error naming the tensor.
 *   gguf         GGUF v3 (gguf.h; ggml block dtypes go back to their GGML type)
 *   irpa         IREE parameter archive (irpa.h)
 */
#ifndef WPACK_PACKER_EXPORT_H
#define WPACK_PACKER_EXPORT_H

#include <stddef.h>

#include "wpack.h"

typedef enum {
    WPK_EXPORT_SAFETENSORS = 1,
    WPK_EXPORT_NPZ,
    WPK_EXPORT_TAR,
    WPK_EXPORT_GGUF, /* GGUF v3 (import/gguf_export.c) */
    WPK_EXPORT_IRPA  /* IREE parameter archive (import/irpa_export.c) */
} wpk_export_format;

/* done (may be NULL) is called with user after each tensor is written: a
 * progress display. */
typedef void (*wpk_export_done_fn)(void *user, const wpack_tensor *t);
int wpk_export(const wpack_archive *ar, int format, const char *out, wpk_export_done_fn done,
               void *user, char *err, size_t errlen);

/* Entry t's logical bytes to put (which returns non-zero on success), each
 * zstd chunk decoded once; a failure's message in err. */
int wpk_export_copy(const wpack_archive *ar, const wpack_tensor *t,
                    int (*put)(void *, const void *, size_t), void *ctx, char *err,
                    size_t errlen);

#endif
