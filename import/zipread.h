/*
 * zipread.h - a strict reader for the central directory of a zip file held
 * in memory (a mapped file or a fuzzer's buffer). It is written for the
 * stored (uncompressed) entries that torch.save writes: their bytes can be
 * used in place, so a checkpoint is streamed straight from the mapping.
 * Deflated entries are listed (for detection) but their bytes are not
 * offered; .npz files go through libarchive instead (archive_in.h).
 *
 * Checked: end-of-central-directory record and its zip64 twin (used when
 * its locator is there: 0xffff entries without one are 65,535, as Python's
 * zipfile writes them), a central directory of exactly its count of entries, every
 * central and local header inside the buffer, sizes (zip64 extra fields
 * included) inside the buffer, no encrypted entries, no names that are empty,
 * absolute, hold "..", "\\" or NUL, no symlinks, no duplicate names, no
 * two entries sharing bytes (overlapping local header + data ranges), an
 * entry count and a name length bound.
 */
#ifndef WPACK_PACKER_ZIPREAD_H
#define WPACK_PACKER_ZIPREAD_H

#include <stddef.h>
#include <stdint.h>

#define WPK_ZIP_MAX_ENTRIES (1u << 22)  /* 4 M entries: far above any checkpoint */
#define WPK_ZIP_MAX_NAME 4096u

typedef struct {
    const char *name;          /* points into the buffer, NOT NUL-terminated */
    uint32_t name_len;
    uint16_t method;           /* 0 stored, 8 deflated, ... */
    uint32_t crc32;
    uint64_t comp_size, size;
    uint64_t local_offset;     /* local header */
    uint64_t data_offset;      /* first byte of the (possibly compressed) data */
} wpk_zip_entry;

typedef struct {
    const uint8_t *buf;
    size_t len;
    wpk_zip_entry *e;          /* sorted by name (bytewise) */
    size_t n;
} wpk_zip;

/* Parse the directory. Returns WPACK_OK, or WPACK_E_INPUT with a message
 * ("zip: central directory at offset X runs past the end of the file").
 * On failure z holds nothing to free. */
int wpk_zip_open(wpk_zip *z, const uint8_t *buf, size_t len, char *err, size_t errlen);

/* Reads n bytes at off of the file the buffer holds into dst: 0, or an
 * errno (ENODATA: the file ends first). A mapped file's local headers are
 * read so, not through the mapping: one per member, each a page fault that
 * maps a whole folio of the page cache (64 KiB to MiBs) and, on the 2-CPU
 * VM this was measured on, costs ~75 us of CPU (pread: ~3 us). */
typedef int (*wpk_zip_read_fn)(void *ctx, uint64_t off, void *dst, size_t n);
/* wpk_zip_open reading the local headers with read (when not NULL) instead
 * of from buf; buf is still where the directory, names and bounds are. */
int wpk_zip_open_ex(wpk_zip *z, const uint8_t *buf, size_t len, wpk_zip_read_fn read, void *ctx,
                    char *err, size_t errlen);
void wpk_zip_close(wpk_zip *z);

/* The entry called exactly name (len bytes), or NULL. O(log n). */
const wpk_zip_entry *wpk_zip_find(const wpk_zip *z, const char *name, size_t len);

/* Does the buffer look like a zip at all (local header or empty-zip magic)? */
int wpk_zip_sniff(const uint8_t *buf, size_t len);

/* CRC-32 (the zip / zlib polynomial), continued from crc (0 to start). */
uint32_t wpk_crc32(uint32_t crc, const void *data, size_t n);

#endif
