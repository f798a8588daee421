/* export.h - what the exporters of import/ share (the public calls are in
 * include/wpack_import.h: wpack_export_file). */
#ifndef WPACK_IMPORT_EXPORT_H
#define WPACK_IMPORT_EXPORT_H

#include <stddef.h>

#include "wpack.h"

/* Entry t's logical bytes to put (which returns non-zero on success), each
 * zstd chunk decoded once and checked when the archive verifies reads; a
 * failure's message in err. */
int wpk_export_copy(const wpack_archive *ar, const wpack_tensor *t,
                    int (*put)(void *, const void *, size_t), void *ctx, char *err,
                    size_t errlen);

/* In the exporters' read_flags word beside WPACK_READ_*: a durable output,
 * so the bytes of each large tensor start their writeback as soon as they
 * are copied and the final fsync has little left (export.c). Never passed
 * on to wpack_read_to_fd. */
#define WPK_EXPORT_WRITEBACK (1u << 30)

/* Entry t's logical bytes to fd at its offset (wpack_read_to_fd with
 * read_flags: stored bytes copied file to file, checked when the archive
 * verifies reads); a failure's message in err. */
int wpk_export_copy_fd(const wpack_archive *ar, const wpack_tensor *t, int fd,
                       unsigned read_flags, char *err, size_t errlen);

/* The file name (or npz / tar member name) of entry name[0..n): '/', '%',
 * '\\' and a leading '.' written as %2F, %25, %5C, %2E, every other byte as
 * it is (README: extract), so no name is a path, "." or "..". Its length;
 * out is cut (never mid-escape) to fit len, so 3 * n + 1 bytes keep it
 * whole. */
size_t wpk_entry_file_name(const char *name, size_t n, char *out, size_t len);

/* Its inverse, in place on the NUL-terminated s: %2F, %25, %5C and %2E
 * (hex digits in either case) become '/', '%', '\\' and '.', in one pass;
 * any other '%' stays as it is. A name wpack_entry_file_name wrote comes
 * back exactly; the importers apply it to a .npy file's or bundle member's
 * name (README: create). */
void wpk_entry_name_unescape(char *s);

#endif
