/*
 * internal.h - helpers shared by the reader, the writer and the CLI that are
 * not part of the public API (symbols are hidden by the version script).
 */
#ifndef WPACK_FORMAT_INTERNAL_H
#define WPACK_FORMAT_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "wpack.h"

/* A name, key or map name is acceptable: 1..WPACK_MAX_NAME bytes of valid
 * UTF-8 (no overlongs, no surrogates, <= U+10FFFF), no bytes below 0x20 and
 * no 0x7f. Returns NULL when fine, else a short reason. */
const char *wpk_name_problem(const uint8_t *s, uint64_t len);
/* A shard file name of a sharded set's manifest (spec 19a): a name under
 * the rule above that is a plain file name in the manifest's directory (no
 * '/', not "." or ".."). NULL when fine, else a short reason. The reader
 * and the writer ask the same question. */
const char *wpk_shard_name_problem(const char *name, size_t len);
/* "weight", "activation" or "unknown-kind": how messages name a stats kind
 * (never by its number). */
const char *wpk_stats_kind_name(int kind);

/* XXH3-64 (seed 0) of a buffer. */
uint64_t wpk_xxh3(const void *p, size_t n);

/* Superblocks and trailers (spec section 3; header_encode.c). The fields
 * that change with each generation: */
typedef struct {
    uint64_t generation, index_offset, index_length, index_checksum, file_length;
} wpk_generation;
/* Set the 128-byte header h's magic and checksum (of bytes 0..119). */
void wpk_header_seal(uint8_t *h, const char *magic);
/* Set h's generation fields from g (the others are already in place), then
 * seal it with magic. */
void wpk_header_encode(uint8_t *h, const char *magic, const wpk_generation *g);

/* Streaming XXH3-64 over pieces; the state is opaque and heap-allocated. */
typedef struct wpk_hasher wpk_hasher;
wpk_hasher *wpk_hasher_new(void);
void wpk_hasher_update(wpk_hasher *h, const void *p, size_t n);
uint64_t wpk_hasher_digest(const wpk_hasher *h);
void wpk_hasher_reset(wpk_hasher *h);
void wpk_hasher_free(wpk_hasher *h);

/* snprintf into a fixed buffer, never overflowing, always terminated. */
void wpk_fmt(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void wpk_vfmt(char *buf, size_t len, const char *fmt, va_list ap);
/* "WHAT: message" into err, returning code: how a parser of one format
 * (safetensors, gguf, irpa) reports a fault. */
int wpk_fail_in(char *err, size_t errlen, int code, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* The reserved fields of a public struct the caller fills (wpack.h,
 * "Structs never change size"): WPACK_OK when the nptr pointers and nu64
 * u64s are all zero, else WPACK_E_INVALID_ARGUMENT with "WHAT: reserved[K]
 * is not zero (a field of a newer HEADER ...)" in err. Every entry point
 * taking such a struct calls it, through WPK_RESERVED_CHECK (o: a pointer
 * to the struct, with arrays reserved_ptr and reserved). */
int wpk_reserved_check(const char *what, const char *header, void *const *ptr, size_t nptr,
                       const uint64_t *u64, size_t nu64, char *err, size_t errlen);
#define WPK_RESERVED_CHECK(o, what, header, err, errlen)                                      \
    wpk_reserved_check(what, header, (o)->reserved_ptr,                                        \
                       sizeof (o)->reserved_ptr / sizeof (o)->reserved_ptr[0], (o)->reserved,  \
                       sizeof (o)->reserved / sizeof (o)->reserved[0], err, errlen)

/* Untrusted text made safe for a terminal or a log (format/text_escape.c,
 * the one rule for messages and the CLI's text output): C0 controls
 * (newline, CR and tab included) and DEL as \x1b, C1 code points and the
 * bidirectional controls as \u009b, a byte that is not valid UTF-8 as
 * \xff; printable ASCII (the backslash too) and other valid UTF-8 copied.
 * Escaping escaped text changes nothing.
 * One unit of s[0..n) (n >= 1): *take bytes of s; returns 0 when they are
 * shown as they are, else the length of their escape, written to esc. */
size_t wpk_text_step(const char *s, size_t n, size_t *take, char esc[8]);
/* s[0..n) escaped into buf: wpack_text_escape (wpack.h). */
/* The message in buf (len bytes) escaped in place, cut to fit: every
 * message a library hands out (wpack_errmsg, err buffers, warnings,
 * diagnostics) goes through it, as paths and names in it may hold anything. */
void wpk_msg_escape(char *buf, size_t len);
/* Copy of a name fit for a message: escaped as above, cut after 200 bytes
 * ("..." says so). */
void wpk_quote(char *buf, size_t len, const char *s, size_t n);

/* f16 / bf16 / f8 bits to float (exact), for stats and printing. */
float wpk_f16_to_f32(uint16_t h);
float wpk_bf16_to_f32(uint16_t h);
float wpk_f8e4m3fn_to_f32(uint8_t v);
float wpk_f8e5m2_to_f32(uint8_t v);

/* Narrowing casts (format/float_cast.c): round to nearest even from the
 * exact value, NaN stays NaN, overflow gives inf. */
uint16_t wpk_to_bf16(double x);
uint16_t wpk_to_f16(double x);
/* One element of a float dtype (f64 f32 f16 bf16 f8*) at p, exactly. */
double wpk_load_float(int dtype, const uint8_t *p);
/* count elements of a float dtype to bf16 or f16 (dst_dtype). Returns how
 * many finite values overflowed to +-inf (the caller says so: a cast that
 * loses values is never silent). */
size_t wpk_cast_block(int src_dtype, const void *src, int dst_dtype, uint16_t *dst, size_t count);
/* The message of a cast that overflowed: "N of M values ... became +-inf". */
void wpk_cast_overflow_text(char *out, size_t outlen, uint64_t overflowed, uint64_t count,
                            int dst_dtype);

/* The rules of a stats record (format/stats_rules.c, spec section 10), for
 * every writer and the reader: WPACK_OK, or the fault's code (WPACK_E_STATS;
 * WPACK_E_LIMIT for too many bins or percentiles) with a message in why. */
int wpk_stats_shape_rule(int kind, int gran, uint32_t axis, uint32_t channels, uint32_t bins,
                         uint32_t pcts, char *why, size_t n);
int wpk_stats_values_rule(uint32_t c, double mn, double mx, double am, double mean, double var,
                          char *why, size_t n);
/* Edge b of a histogram (prev: edge b - 1; ignored for b = 0). */
int wpk_stats_edge_rule(uint32_t b, double e, double prev, char *why, size_t n);
/* Add one bin's count to *sum; then the sum must equal the record's count. */
int wpk_stats_bin_rule(uint64_t *sum, uint64_t bin_count, char *why, size_t n);
int wpk_stats_sum_rule(uint64_t sum, uint64_t count, char *why, size_t n);
/* Percentile j (q in [0, 100], value finite; both increasing from j - 1). */
int wpk_stats_percentile_rule(uint32_t j, double q, double v, double prev_q, double prev_v,
                              char *why, size_t n);

/* Write all n bytes to fd, retrying short writes and EINTR. Returns 0, or
 * the errno of the failure (ENOSPC when write makes no progress). */
int wpk_write_all(int fd, const void *p, size_t n);
/* Read exactly n bytes of fd at off, retrying short reads and EINTR.
 * Returns 0, or the errno of the failure (ENODATA when the file ends first). */
int wpk_pread_all(int fd, void *p, size_t n, uint64_t off);
/* Write all n bytes to fd at off (pwrite; the file position stays).
 * Returns 0, or the errno of the failure (ENOSPC when no progress). */
int wpk_pwrite_all(int fd, const void *p, size_t n, uint64_t off);
/* One copy_file_range of up to n bytes from in at off to out's file
 * position (EINTR retried): the bytes copied; 0 when the kernel refuses
 * here (EXDEV, EINVAL, ENOSYS, EOPNOTSUPP, EBADF, ETXTBSY) or copies
 * nothing: fall back to read/write; -errno for a real failure. */
int64_t wpk_copy_range_step(int in, uint64_t off, int out, size_t n);
/* Whether copy_file_range is worth calling from in_off to out_off: only
 * where the two lie at the same place in a 4 KiB page (write_all.c says
 * why); elsewhere write the bytes (already read to hash them) instead. */
int wpk_pages_line_up(uint64_t in_off, uint64_t out_off);

/* format/path_beside.c. The length of PATH's directory part, its trailing
 * '/' included ("dir/x" -> 4, "x" -> 0), and NAME (name_len bytes) in that
 * directory, malloc'd ("dir/NAME"; NULL: out of memory). A PATH that is a
 * directory prefix ("" or ending in '/') gives that prefix + NAME. */
size_t wpk_dir_len(const char *path);
char *wpk_path_beside(const char *path, const char *name, size_t name_len);

/* Open a file whose name came from input (format/open_input.c): name
 * relative to dirfd (AT_FDCWD: the working directory), O_RDONLY|O_NONBLOCK|
 * O_CLOEXEC so that a FIFO cannot block, and only a regular file is taken.
 * With WPK_INPUT_NOFOLLOW no symlink is followed in any component and empty,
 * "." and ".." components are refused. Returns the fd and fills *st, or -1
 * with *code WPACK_E_FILE_TYPE (not a regular file, a link), WPACK_E_IO or
 * WPACK_E_NOMEM and a message without the name's directory in err. */
#define WPK_INPUT_NOFOLLOW 1u
struct stat;
/* The whole of an input file (st from wpk_open_input) mapped read-only, in
 * *p and *len (an empty file: a non-NULL empty buffer); WPACK_OK, or
 * WPACK_E_IO / WPACK_E_LIMIT with errno kept. A JSON parser given the
 * mapping reads it at memory speed (jansson's json_loadfd read one byte per
 * system call: 11 M reads for a 6 MB file). Unmap with wpk_unmap_input. */
int wpk_map_input(int fd, const struct stat *st, const char **p, size_t *len);
void wpk_unmap_input(const char *p, size_t len);
int wpk_open_input(int dirfd, const char *name, unsigned flags, struct stat *st, int *code,
                   char *err, size_t errlen);
/* "a FIFO", "a directory", ... for a st_mode. */
const char *wpk_file_type_name(unsigned mode);

#endif
