/*
 * irpa.h - IREE parameter archives (.irpa), in and out.
 *
 * Layout (IREE runtime/src/iree/schemas/parameter_archive.h, version 0.0),
 * packed little-endian structs, every offset relative to the header:
 *   header (88 B): u32 magic "IRPA", u16 major, u16 minor, u64 header_size
 *     (= 88), u64 next_header_offset (0: none), u64 flags, u64 entry_count,
 *     {u64 offset, u64 length} entry_segment, metadata_segment, storage_segment
 *   entries, each starting 16-byte aligned in the entry segment, with a 60-byte
 *     common part: u64 entry_size, u32 type (0 skip, 1 splat, 2 data,
 *     3 external), u64 flags, {u64, u64} name and metadata (ranges in the
 *     metadata segment), u64 minimum_alignment; then
 *     splat (85 B): u64 length, u8 pattern[16], u8 pattern_length (1,2,4,8,16)
 *     data (76 B): {u64 offset, u64 length} in the storage segment
 * IREE's builder puts the entry segment at 96, the metadata segment right
 * after it, the storage segment 64-aligned after that with each data entry's
 * bytes 64-aligned (with no data entry, right after the metadata: the
 * segment takes its first data entry's alignment, else 1), and pads the
 * file to 4096 bytes.
 */
#ifndef WPACK_IMPORT_IRPA_H
#define WPACK_IMPORT_IRPA_H

#include <stddef.h>
#include <stdint.h>

#include "wpack.h"

#define IRPA_HEADER_SIZE 88u
#define IRPA_ENTRY_HEADER_SIZE 60u
#define IRPA_SPLAT_ENTRY_SIZE 85u
#define IRPA_DATA_ENTRY_SIZE 76u
#define IRPA_ENTRY_ALIGNMENT 16u
#define IRPA_DATA_ALIGNMENT 64u
#define IRPA_FILE_ALIGNMENT 4096u

enum { IRPA_SKIP = 0, IRPA_SPLAT = 1, IRPA_DATA = 2, IRPA_EXTERNAL = 3 };

typedef struct {
    const uint8_t *name, *meta;
    uint64_t name_len, meta_len;
    int type;                 /* IRPA_SPLAT or IRPA_DATA (skips are dropped) */
    uint64_t length;          /* bytes of the parameter */
    uint64_t offset;          /* data: absolute file offset of its bytes */
    uint8_t pattern[16];      /* splat */
    uint8_t pattern_len;
    uint64_t alias_of;        /* data: 1 + the index of the first entry with the very same
                               * bytes (offset and length), else 0 */
} irpa_entry;

typedef struct {
    irpa_entry *e;
    uint64_t n;
} irpa_file;

/* Parse and check every linked header and entry of a whole .irpa buffer;
 * on failure a code and "irpa: ..." in err. The entries of all headers
 * together fit in the file (60 bytes each: no K headers sharing one table of
 * K entries), so do their names (a name is a reference into the metadata
 * segment: entries naming the same bytes are refused, WPACK_E_LIMIT), and
 * no two data entries share part of their bytes: entries
 * naming the very same bytes are marked (alias_of), others that overlap are
 * refused (WPACK_E_OVERLAP). */
int irpa_parse(const uint8_t *p, size_t len, irpa_file *f, char *err, size_t errlen);
void irpa_free(irpa_file *f);

/* The dtype and dims wpack writes into an entry's metadata:
 * "wpack:DTYPE[D0,D1,...]" for a built-in dtype, "wpack:NAME/ELEMS/BYTES/HEX[...]"
 * for a block dtype (its name, block geometry and params in hex). */
typedef struct {
    int dtype;                 /* built-in dtype, or 0 for the block dtype below */
    unsigned rank;
    uint64_t dims[WPACK_MAX_RANK];
    char block[64];            /* block dtype name */
    uint32_t block_elems, block_bytes;
    uint8_t params[32];
    size_t params_len;
} irpa_meta;
/* Bytes of such metadata at most: the longest is "wpack:" + a 63-byte
 * name + "/4294967295/4294967295/" + 64 hex digits + "[" + 8 dims of up to
 * 20 digits and their commas + "]" = 325. */
#define IRPA_META_MAX 384
/* 1 when meta is well-formed wpack metadata (not yet checked against a length). */
int irpa_meta_parse(const uint8_t *meta, uint64_t len, irpa_meta *m);
/* Its logical size in bytes, or UINT64_MAX when it has none (overflow, a
 * block dtype whose last dim is not a multiple of its block). */
uint64_t irpa_meta_nbytes(const irpa_meta *m);

/* 1 when irpa_export writes entry t with no bytes in the storage segment:
 * a splat whose element is 1, 2, 4, 8 or 16 bytes (a splat entry) or an
 * alias (its target's splat, or a data entry sharing its target's bytes). */
int irpa_export_no_bytes(const wpack_tensor *t);

/* An archive written as an .irpa to fd (import/irpa_export.c); read_flags
 * for wpk_export_copy_fd. */
typedef void (*irpa_done_fn)(void *user, const wpack_tensor *t);
int irpa_export(const wpack_archive *ar, int fd, unsigned read_flags, irpa_done_fn done,
                void *user, char *err, size_t errlen);

#endif
