/* header.c - open steps 1-4: superblock, trailer, regions (spec: Open procedure). */
#include <stdlib.h>
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

/* Reserved bytes 104..119 under the minor rule (M9). */
static int check_reserved(wpack_archive *ar, const uint8_t *h, const header_fields *f,
                          const char *what)
{
    if (f->minor <= WPACK_FORMAT_MINOR && !wpk_all_zero(h + WPK_H_RESERVED_OFF, WPK_H_RESERVED_LEN))
        return wpk_fail(ar, WPACK_E_RESERVED, "%s: reserved bytes 104..119 are not zero", what);
    return WPACK_OK;
}

/* The checks on one header's own fields (superblock or a candidate trailer;
 * reserved: with M9, which does not decide whether a trailer is taken). */
static int check_fields(wpack_archive *ar, const uint8_t *h, const header_fields *f,
                        const char *what, int reserved)
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
    int rc = reserved ? check_reserved(ar, h, f, what) : WPACK_OK;
    if (rc)
        return rc;
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

static int shrank(wpack_archive *ar)
{
    if (ar->src_rc) /* a caller's source failed: its message stands */
        return ar->src_rc;
    return wpk_fail(ar, WPACK_E_TRUNCATED,
                    "file shrank below %llu bytes while being opened (replaced in place?)",
                    (unsigned long long)ar->file_size);
}

/* 1 when the n bytes at off are zero, 0 when not, -1 when not readable. Read
 * in pieces: the padding before the data region can be 2 MiB. */
int wpk_zero_range(wpack_archive *ar, uint64_t off, uint64_t n)
{
    uint8_t buf[4096];
    while (n) {
        uint64_t k = n < sizeof buf ? n : sizeof buf;
        if (!wpk_read_at(ar, off, k, buf))
            return -1;
        if (!wpk_all_zero(buf, k))
            return 0;
        off += k;
        n -= k;
    }
    return 1;
}

/* The index bytes [off, off + n): in place in a buffer; for a file, read into
 * a new heap block handed back in *owned. NULL with *rc set when they cannot
 * be had. */
static const uint8_t *index_bytes(wpack_archive *ar, uint64_t off, uint64_t n, uint8_t **owned,
                                  int *rc)
{
    *owned = NULL;
    if (ar->fd < 0 && !wpk_unmapped(ar)) {
        if (wpk_in_bounds(off, n, ar->len))
            return ar->base + off;
        *rc = WPACK_E_TRUNCATED;
        return NULL;
    }
    uint8_t *p = wpk_index_alloc(n);
    if (!p) {
        *rc = WPACK_E_NOMEM;
        return NULL;
    }
    if (!wpk_read_at(ar, off, n, p)) {
        wpk_index_free(p, n);
        *rc = WPACK_E_TRUNCATED;
        return NULL;
    }
    *owned = p;
    return p;
}

int wpk_check_header(wpack_archive *ar)
{
    /* Every byte comes through wpk_read_at: a file that shrinks under us
     * gives a short read and TRUNCATED, never SIGBUS (issue 14 point 1). */
    uint8_t sb[WPK_HEADER_SIZE], t[WPK_HEADER_SIZE];
    uint64_t len = ar->file_size;
    if (len < 2 * WPK_HEADER_SIZE) {
        /* The start of the magic: a cut archive; anything else: not one. */
        size_t k = len < 8 ? (size_t)len : 8;
        if (k && !wpk_read_at(ar, 0, k, sb))
            return shrank(ar);
        if (len == 0 || memcmp(sb, WPK_SUPERBLOCK_MAGIC, k) == 0)
            return wpk_fail(ar, WPACK_E_TRUNCATED,
                            "file is %llu bytes, too short for a superblock and trailer",
                            (unsigned long long)len);
        return wpk_fail(ar, WPACK_E_BAD_MAGIC, "not a wpack archive (%llu bytes, bad magic)",
                        (unsigned long long)len);
    }
    if (!wpk_read_at(ar, 0, WPK_HEADER_SIZE, sb))
        return shrank(ar);
    memcpy(ar->super, sb, WPK_HEADER_SIZE);
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
    int rc = check_fields(ar, sb, &sf, "superblock", 1);
    if (rc)
        return rc;
    if (len < sf.file_length)
        return wpk_fail(ar, WPACK_E_TRUNCATED, "file is %llu bytes, superblock says %llu",
                        (unsigned long long)len, (unsigned long long)sf.file_length);
    /* data_offset < file_length <= len: the padding is inside the file. */
    int z = wpk_padding_zero(ar, WPK_HEADER_SIZE, sf.data_offset - WPK_HEADER_SIZE);
    if (z < 0)
        return shrank(ar);
    if (!z)
        return wpk_fail(ar, WPACK_E_PADDING, "padding after the superblock is not zero");
    const header_fields *use = &sf;
    header_fields tf;
    int recovered = 0;
    if (!wpk_read_at(ar, len - WPK_HEADER_SIZE, WPK_HEADER_SIZE, t))
        return shrank(ar);
    if (len > sf.file_length) {
        /* An update not yet committed by its superblock (4.1), or bytes past
         * the archive: an interrupted update or superseded generations (4.2). */
        int next = 0, valid = trailer_valid(t);
        uint8_t *owned = NULL;
        if (valid) {
            decode(t, &tf);
            /* Its index must be intact too: a crash can leave the trailer
             * on disk but not all of the index before it. */
            if (is_next_generation(&sf, &tf, len) &&
                check_fields(ar, t, &tf, "trailer", 0) == WPACK_OK) {
                int why = WPACK_OK;
                const uint8_t *ix = index_bytes(ar, tf.index_offset, tf.index_length, &owned, &why);
                if (!ix && why == WPACK_E_NOMEM)
                    return wpk_fail(ar, why, "out of memory reading the index");
                next = ix && wpk_xxh3(ix, (size_t)tf.index_length) == tf.index_checksum;
            }
        }
        if (next) {
            /* A whole new generation (its checksum and index hash hold):
             * non-zero reserved bytes were written so, as in the superblock,
             * and are RESERVED, not a reason to fall back (13.1 step 4.1). */
            if ((rc = check_reserved(ar, t, &tf, "trailer"))) {
                if (owned)
                    wpk_index_free(owned, tf.index_length);
                return rc;
            }
            use = &tf;
            memcpy(ar->head, t, WPK_HEADER_SIZE);
            ar->index_buf = owned;
            ar->index_buf_len = tf.index_length;
            ar->index = owned; /* NULL for a buffer: index.c points into it */
        } else {
            if (owned)
                wpk_index_free(owned, tf.index_length);
            uint8_t old[WPK_HEADER_SIZE];
            if (!wpk_read_at(ar, sf.file_length - WPK_HEADER_SIZE, WPK_HEADER_SIZE, old))
                return shrank(ar);
            if (!trailer_valid(old) || memcmp(old + 8, sb + 8, WPK_H_CHECKSUM_OFF - 8) != 0)
                return wpk_fail(ar, WPACK_E_TRAILER,
                                "file is %llu bytes, superblock says %llu, and no trailer "
                                "matches either",
                                (unsigned long long)len, (unsigned long long)sf.file_length);
            /* A file that ends with an earlier generation's trailer holds
             * space that updates reuse (spec 14), not an interrupted one. */
            recovered = !(valid && tf.generation < sf.generation);
        }
    } else {
        if (memcmp(t, WPK_TRAILER_MAGIC, 8) != 0)
            return wpk_fail(ar, WPACK_E_TRAILER, "no trailer at offset %llu (bad magic)",
                            (unsigned long long)(len - WPK_HEADER_SIZE));
        if (!checksum_ok(t))
            return wpk_fail(ar, WPACK_E_HEADER_CHECKSUM, "trailer checksum mismatch");
        if (memcmp(t + 8, sb + 8, WPK_H_CHECKSUM_OFF - 8) != 0)
            return wpk_fail(ar, WPACK_E_TRAILER, "trailer disagrees with the superblock");
    }
    if (use == &sf)
        memcpy(ar->head, sb, WPK_HEADER_SIZE);
    fill_info(ar, use, recovered);
    uint64_t data_end = use->data_offset + use->data_length;
    if (use->generation == 1 && use->index_offset > data_end) {
        z = wpk_padding_zero(ar, data_end, use->index_offset - data_end);
        if (z < 0)
            return shrank(ar);
        if (!z)
            return wpk_fail(ar, WPACK_E_PADDING, "padding before the index is not zero");
    }
    if ((ar->fd >= 0 || wpk_unmapped(ar)) && !ar->index) {
        int why = WPACK_OK;
        uint8_t *owned;
        if (!index_bytes(ar, use->index_offset, use->index_length, &owned, &why))
            return why == WPACK_E_NOMEM ? wpk_fail(ar, why, "out of memory reading the index")
                                        : shrank(ar);
        ar->index_buf = owned;
        ar->index_buf_len = use->index_length;
        ar->index = owned;
    }
    return WPACK_OK;
}

int wpk_check_candidate(const wpack_archive *old, const uint8_t *head, const uint8_t *index,
                        char *msg, size_t msglen)
{
    wpack_archive *ar = calloc(1, sizeof *ar);
    if (!ar)
        return WPACK_E_NOMEM;
    pthread_mutex_init(&ar->err_lock, NULL);
    /* old's view of the (unchanged) data; the index is the caller's */
    ar->fd = -1;
    ar->base = old->base;
    ar->len = old->len;
    ar->file_size = old->file_size;
    ar->path = old->path;
    header_fields f;
    decode(head, &f);
    int rc = check_fields(ar, head, &f, "new superblock", 1);
    if (rc == WPACK_OK) {
        fill_info(ar, &f, 0);
        memcpy(ar->head, head, WPK_HEADER_SIZE);
        ar->index = index;
        rc = wpk_check_index(ar);
    }
    if (rc == WPACK_OK)
        rc = wpk_check_shards(ar);
    if (rc && msg && msglen)
        wpk_fmt(msg, msglen, "%s", ar->errmsg);
    wpk_close_shards(ar);
    pthread_mutex_destroy(&ar->err_lock);
    free(ar); /* path and index are borrowed */
    return rc;
}
