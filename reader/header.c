/* header.c - open steps 1-4: superblock, trailer, regions (spec: Open procedure). */
#include <string.h>

#include "bytes.h"
#include "reader.h"

typedef struct {
    uint16_t major, minor;
    uint32_t endian, header_size, alignment;
    uint64_t required, optional, generation;
    uint64_t data_offset, data_length, index_offset, index_length, index_checksum;
    uint64_t file_length, entry_count;
} header_fields;

static void decode(const uint8_t *h, header_fields *f)
{
    f->major = wpk_ld16(h + WPK_H_MAJOR_OFF);
    f->minor = wpk_ld16(h + WPK_H_MINOR_OFF);
    f->endian = wpk_ld32(h + WPK_H_ENDIAN_OFF);
    f->header_size = wpk_ld32(h + WPK_H_HEADER_SIZE_OFF);
    f->alignment = wpk_ld32(h + WPK_H_ALIGNMENT_OFF);
    f->required = wpk_ld64(h + WPK_H_REQUIRED_OFF);
    f->optional = wpk_ld64(h + WPK_H_OPTIONAL_OFF);
    f->generation = wpk_ld64(h + WPK_H_GENERATION_OFF);
    f->data_offset = wpk_ld64(h + WPK_H_DATA_OFFSET_OFF);
    f->data_length = wpk_ld64(h + WPK_H_DATA_LENGTH_OFF);
    f->index_offset = wpk_ld64(h + WPK_H_INDEX_OFFSET_OFF);
    f->index_length = wpk_ld64(h + WPK_H_INDEX_LENGTH_OFF);
    f->index_checksum = wpk_ld64(h + WPK_H_INDEX_CHECKSUM_OFF);
    f->file_length = wpk_ld64(h + WPK_H_FILE_LENGTH_OFF);
    f->entry_count = wpk_ld64(h + WPK_H_ENTRY_COUNT_OFF);
}

static int checksum_ok(const uint8_t *h)
{
    return wpk_xxh3(h, WPK_H_CHECKSUM_OFF) == wpk_ld64(h + WPK_H_CHECKSUM_OFF);
}

/* The checks on one header's own fields (superblock or a candidate trailer). */
static int check_fields(wpack_archive *ar, const uint8_t *h, const header_fields *f,
                        const char *what)
{
    if (f->endian != WPK_ENDIAN_MARKER) {
        if (f->endian == 0x04030201u)
            return wpk_fail(ar, WPACK_E_ENDIAN,
                            "%s: endianness marker is byte-swapped (written big-endian)", what);
        return wpk_fail(ar, WPACK_E_ENDIAN, "%s: endianness marker 0x%08x is not 0x01020304",
                        what, f->endian);
    }
    if (f->major != WPACK_FORMAT_MAJOR)
        return wpk_fail(ar, WPACK_E_VERSION, "%s: format version %u.%u, this reader reads %u.x",
                        what, f->major, f->minor, WPACK_FORMAT_MAJOR);
    if (f->header_size != WPK_HEADER_SIZE)
        return wpk_fail(ar, WPACK_E_LAYOUT, "%s: header size %u, must be 128", what,
                        f->header_size);
    uint64_t unknown = f->required & ~WPK_REQUIRED_KNOWN;
    if (unknown)
        return wpk_fail(ar, WPACK_E_FEATURE,
                        "%s: unknown required feature bits 0x%016llx", what,
                        (unsigned long long)unknown);
    if (!wpk_is_pow2(f->alignment) || f->alignment < WPACK_MIN_ALIGNMENT ||
        f->alignment > WPACK_MAX_ALIGNMENT)
        return wpk_fail(ar, WPACK_E_ALIGNMENT,
                        "%s: alignment %u is not a power of two from 64 to 2097152", what,
                        f->alignment);
    if (f->minor <= WPACK_FORMAT_MINOR && !wpk_all_zero(h + WPK_H_RESERVED_OFF, WPK_H_RESERVED_LEN))
        return wpk_fail(ar, WPACK_E_RESERVED, "%s: reserved bytes 104..119 are not zero", what);
    if (f->generation == 0)
        return wpk_fail(ar, WPACK_E_LAYOUT, "%s: generation 0 (must be >= 1)", what);
    uint64_t want_data = 0;
    wpk_align_up(WPK_HEADER_SIZE, f->alignment, &want_data);
    if (f->data_offset != want_data)
        return wpk_fail(ar, WPACK_E_LAYOUT, "%s: data offset %llu, must be %llu", what,
                        (unsigned long long)f->data_offset, (unsigned long long)want_data);
    uint64_t data_end, index_end, file_end;
    if (!wpk_add(f->data_offset, f->data_length, &data_end) ||
        !wpk_add(f->index_offset, f->index_length, &index_end) ||
        !wpk_add(index_end, WPK_HEADER_SIZE, &file_end))
        return wpk_fail(ar, WPACK_E_LAYOUT, "%s: region offsets overflow 64 bits", what);
    if (f->index_offset % 8 || f->index_length % 8)
        return wpk_fail(ar, WPACK_E_LAYOUT, "%s: index offset %llu or length %llu not a multiple of 8",
                        what, (unsigned long long)f->index_offset,
                        (unsigned long long)f->index_length);
    if (f->index_length < WPK_INDEX_HEADER_SIZE)
        return wpk_fail(ar, WPACK_E_LAYOUT, "%s: index length %llu below the 256-byte index header",
                        what, (unsigned long long)f->index_length);
    if (f->index_offset < data_end)
        return wpk_fail(ar, WPACK_E_LAYOUT, "%s: index at %llu starts inside the data region (ends %llu)",
                        what, (unsigned long long)f->index_offset, (unsigned long long)data_end);
    if (f->generation == 1) {
        uint64_t want_index;
        if (!wpk_align_up(data_end, 8, &want_index) || f->index_offset != want_index)
            return wpk_fail(ar, WPACK_E_LAYOUT,
                            "%s: index at %llu, must follow the data region at %llu", what,
                            (unsigned long long)f->index_offset, (unsigned long long)data_end);
    }
    if (file_end != f->file_length)
        return wpk_fail(ar, WPACK_E_LAYOUT,
                        "%s: file length %llu, index end + trailer is %llu", what,
                        (unsigned long long)f->file_length, (unsigned long long)file_end);
    return WPACK_OK;
}

/* A trailer valid on its own: magic and checksum. */
static int trailer_valid(const uint8_t *t)
{
    return memcmp(t, WPK_TRAILER_MAGIC, 8) == 0 && checksum_ok(t);
}

/* A trailer that continues superblock sf as its next generation (open rule 4a). */
static int is_next_generation(const header_fields *sf, const header_fields *tf, uint64_t len)
{
    return tf->generation == sf->generation + 1 && tf->major == sf->major &&
           tf->minor == sf->minor && tf->endian == sf->endian &&
           tf->header_size == sf->header_size && tf->alignment == sf->alignment &&
           tf->required == sf->required && tf->optional == sf->optional &&
           tf->data_offset == sf->data_offset && tf->data_length == sf->data_length &&
           tf->file_length == len && tf->index_offset >= sf->file_length;
}

static void fill_info(wpack_archive *ar, const header_fields *f, int recovered)
{
    wpack_info *in = &ar->info;
    in->format_major = f->major;
    in->format_minor = f->minor;
    in->alignment = f->alignment;
    in->required_features = f->required;
    in->optional_features = f->optional;
    in->generation = f->generation;
    in->file_length = f->file_length;
    in->data_offset = f->data_offset;
    in->data_length = f->data_length;
    in->index_offset = f->index_offset;
    in->index_length = f->index_length;
    in->index_checksum = f->index_checksum;
    in->entry_count = f->entry_count;
    in->recovered = recovered;
}

int wpk_check_header(wpack_archive *ar)
{
    const uint8_t *sb = ar->base;
    uint64_t len = ar->len;
    if (len < 2 * WPK_HEADER_SIZE) {
        /* The start of the magic: a cut archive; anything else: not one. An
         * empty file has no mapping (sb NULL), which memcmp must not get. */
        if (len == 0 || memcmp(sb, WPK_SUPERBLOCK_MAGIC, len < 8 ? (size_t)len : 8) == 0)
            return wpk_fail(ar, WPACK_E_TRUNCATED,
                            "file is %llu bytes, too short for a superblock and trailer",
                            (unsigned long long)len);
        return wpk_fail(ar, WPACK_E_BAD_MAGIC, "not a wpack archive (%llu bytes, bad magic)",
                        (unsigned long long)len);
    }
    if (memcmp(sb, WPK_SUPERBLOCK_MAGIC, 8) != 0) {
        if (memcmp(sb + 1, "WPK", 3) == 0)
            return wpk_fail(ar, WPACK_E_BAD_MAGIC,
                            "superblock magic damaged (mangled by a text-mode transfer?)");
        return wpk_fail(ar, WPACK_E_BAD_MAGIC, "not a wpack archive (bad magic)");
    }
    /* The endian marker comes before the checksum: a byte-swapped writer also
     * swaps the checksum, and ENDIAN says what really happened. */
    if (wpk_ld32(sb + WPK_H_ENDIAN_OFF) == 0x04030201u)
        return wpk_fail(ar, WPACK_E_ENDIAN,
                        "superblock: endianness marker is byte-swapped (written big-endian)");
    if (!checksum_ok(sb))
        return wpk_fail(ar, WPACK_E_HEADER_CHECKSUM, "superblock checksum mismatch");
    header_fields sf;
    decode(sb, &sf);
    int rc = check_fields(ar, sb, &sf, "superblock");
    if (rc)
        return rc;
    if (len < sf.file_length)
        return wpk_fail(ar, WPACK_E_TRUNCATED, "file is %llu bytes, superblock says %llu",
                        (unsigned long long)len, (unsigned long long)sf.file_length);
    /* data_offset < file_length <= len: the padding is inside the file. */
    if (!wpk_all_zero(sb + WPK_HEADER_SIZE, sf.data_offset - WPK_HEADER_SIZE))
        return wpk_fail(ar, WPACK_E_PADDING, "padding after the superblock is not zero");
    const header_fields *use = &sf;
    header_fields tf;
    int recovered = 0;
    if (len > sf.file_length) {
        /* An in-place update: finished but superblock not rewritten (4a), or interrupted (4b). */
        const uint8_t *t = sb + len - WPK_HEADER_SIZE;
        int next = 0;
        if (trailer_valid(t)) {
            decode(t, &tf);
            /* Its index must be intact too: a crash can leave the trailer
             * on disk but not all of the index before it. */
            next = is_next_generation(&sf, &tf, len) &&
                   check_fields(ar, t, &tf, "trailer") == WPACK_OK &&
                   wpk_xxh3(sb + tf.index_offset, (size_t)tf.index_length) == tf.index_checksum;
        }
        if (next) {
            use = &tf;
        } else {
            const uint8_t *old = sb + sf.file_length - WPK_HEADER_SIZE;
            if (!trailer_valid(old) ||
                memcmp(old + 8, sb + 8, WPK_H_CHECKSUM_OFF - 8) != 0)
                return wpk_fail(ar, WPACK_E_TRAILER,
                                "file is %llu bytes, superblock says %llu, and no trailer "
                                "matches either",
                                (unsigned long long)len, (unsigned long long)sf.file_length);
            recovered = 1;
        }
    } else {
        const uint8_t *t = sb + len - WPK_HEADER_SIZE;
        if (memcmp(t, WPK_TRAILER_MAGIC, 8) != 0)
            return wpk_fail(ar, WPACK_E_TRAILER, "no trailer at offset %llu (bad magic)",
                            (unsigned long long)(len - WPK_HEADER_SIZE));
        if (!checksum_ok(t))
            return wpk_fail(ar, WPACK_E_HEADER_CHECKSUM, "trailer checksum mismatch");
        if (memcmp(t + 8, sb + 8, WPK_H_CHECKSUM_OFF - 8) != 0)
            return wpk_fail(ar, WPACK_E_TRAILER, "trailer disagrees with the superblock");
    }
    fill_info(ar, use, recovered);
    if (use->generation == 1 && use->index_offset > use->data_offset + use->data_length &&
        !wpk_all_zero(sb + use->data_offset + use->data_length,
                  use->index_offset - (use->data_offset + use->data_length)))
        return wpk_fail(ar, WPACK_E_PADDING, "padding before the index is not zero");
    return WPACK_OK;
}
