/*
 * torch_scan.h - PyTorch checkpoints written by torch.save (zip layout,
 * torch >= 1.6) read from memory, without running anything.
 *
 * Layout: a zip of stored entries under one top directory ("archive/" or
 * the file's stem): data.pkl (the pickled object), data/<key> (one entry per
 * storage, raw elements in the byte order named by the optional "byteorder"
 * entry), version, and in torch 2.x .data/serialization_id.
 *
 * torch_scan_buffer checks the zip, interprets data.pkl with the restricted
 * unpickler (pickle.h), flattens the object to dotted names and checks every
 * tensor against its storage (dtype size x numel = entry size, the view
 * inside the storage, rank, overflow); only then does it call fn: once with
 * a plan (TORCH_PLAN: what the tensors will take), then once per item, in
 * the pickle's order:
 *   - a tensor (the first time a view is seen; `splat` when every stride of
 *     a dim above 1 is 0, so one element stands for all of them),
 *   - an alias (the same storage, offset, sizes and strides again: tied weights),
 *   - a scalar (int, float, bool, str) that becomes metadata,
 *   - a skipped value (bytes, an int outside 64 bits) that cannot.
 * So a bad file makes fn never run. Everything points into buf.
 *
 * Memory and work are bounded by data.pkl's size: the object is walked
 * twice (check, then visit; a third time for a pre visitor) and nothing per visited value is kept but the
 * distinct views; the visits and the bytes of all names are budgeted per
 * byte of data.pkl (a value reached through very many shared paths is
 * refused with WPACK_E_LIMIT before anything is visited).
 */
#ifndef WPACK_PACKER_TORCH_SCAN_H
#define WPACK_PACKER_TORCH_SCAN_H

#include <stddef.h>
#include <stdint.h>

#include "wpack.h"
#include "zipread.h"

#define TORCH_MAX_DEPTH 64            /* nesting of dicts and lists */
#define TORCH_MAX_VISITS (1u << 24)   /* values visited while flattening (shared subtrees) */
#define TORCH_VISITS_PER_BYTE 2u      /* ... and at most this many per byte of data.pkl */
#define TORCH_VISITS_FLOOR (1u << 16) /*     plus this many */
#define TORCH_NAME_BYTES_PER_BYTE 32u /* bytes of all names and strings per byte of data.pkl */
#define TORCH_NAME_BYTES_FLOOR (16u << 20) /* plus this many */

typedef enum {
    TORCH_TENSOR = 1,
    TORCH_ALIAS,
    TORCH_INT,
    TORCH_FLOAT,
    TORCH_BOOL,
    TORCH_STRING,
    TORCH_SKIPPED,             /* a value metadata cannot hold: s says what */
    TORCH_PLAN                 /* first, once: name/nbytes the largest tensor,
                                  total_* all tensors to write (not splats or aliases) */
} torch_item_kind;

typedef struct {
    int kind;                  /* torch_item_kind */
    const char *name;          /* dotted name, NUL-terminated (valid during the call) */
    /* tensor */
    int dtype;                 /* WPACK_DTYPE_* */
    size_t elem_size;
    unsigned rank;
    uint64_t dims[WPACK_MAX_RANK];
    uint64_t strides[WPACK_MAX_RANK]; /* elements */
    uint64_t offset;           /* elements into the storage */
    uint64_t nelems, nbytes;   /* of the (contiguous) tensor */
    const uint8_t *storage;    /* the storage's bytes in buf */
    uint64_t storage_bytes;
    uint64_t storage_file_offset; /* where storage starts in buf */
    int byteswap;              /* storage is big-endian */
    int contiguous;            /* the view is storage[offset .. offset+nelems) */
    int splat;                 /* every element is storage[offset] (stride-0 view, nelems > 1) */
    uint32_t storage_crc32;    /* the storage's zip CRC-32, as the directory says */
    uint8_t *storage_checked;  /* one flag per storage, shared by its views: a
                                  packer sets it once the CRC has matched */
    /* alias */
    const char *target;
    /* scalars */
    int64_t i;
    double f;
    const char *s;             /* string: not NUL-terminated; skipped: what it is */
    size_t slen;
    /* plan */
    uint64_t total_bytes, total_tensors;
} torch_item;

/* Return WPACK_OK to go on; any other value stops the scan and is returned. */
typedef int (*torch_visit_fn)(void *user, const torch_item *it);

/*
 * Scan a checkpoint held in buf (the whole file). key (NULL: the whole
 * object) selects a sub-dict by dotted path ("model", "state.encoder").
 * Returns WPACK_OK, WPACK_E_INPUT (malformed), WPACK_E_UNSUPPORTED
 * (a forbidden global, the legacy format, TorchScript, ...),
 * WPACK_E_LIMIT, WPACK_E_OVERFLOW, WPACK_E_NOT_FOUND (key), WPACK_E_NOMEM,
 * or what fn returned; err says what and where. Meant for libFuzzer too.
 */
int torch_scan_buffer(const uint8_t *buf, size_t len, const char *key, torch_visit_fn fn,
                      void *user, char *err, size_t errlen);
/* The same, reading the zip's local headers with read (zipread.h: buf is a
 * mapped file, each header read through it a page fault). */
int torch_scan_buffer_ex(const uint8_t *buf, size_t len, const char *key, torch_visit_fn fn,
                         void *user, wpk_zip_read_fn read, void *read_ctx, char *err,
                         size_t errlen);
/* The same, visiting everything with pre (the plan, then every item) before
 * fn, on one unpickling and check: what pre gathers (torch.ao observers) is
 * known before fn writes anything. A failure of pre stops the scan before
 * fn runs. */
int torch_scan_buffer_pre(const uint8_t *buf, size_t len, const char *key, torch_visit_fn pre,
                          void *pre_user, torch_visit_fn fn, void *user, wpk_zip_read_fn read,
                          void *read_ctx, char *err, size_t errlen);

/*
 * Hand a tensor's elements to emit in C order, little-endian, in pieces of at
 * most buflen bytes (buf is scratch of buflen >= 64 bytes; a contiguous
 * little-endian tensor goes straight from the storage). Returns WPACK_OK or
 * what emit returned.
 */
typedef int (*torch_emit_fn)(void *user, const void *data, size_t n);
int torch_stream_tensor(const torch_item *t, uint8_t *buf, size_t buflen, torch_emit_fn emit,
                        void *user);

/* Is buf a pre-1.6 torch.save file (a bare pickle stream, not a zip)? */
int torch_is_legacy(const uint8_t *buf, size_t len);

#define TORCH_LEGACY_ADVICE                                                         \
    "this is the legacy (pre-1.6) torch.save format; re-save it with "              \
    "torch.save(torch.load(f), g, _use_new_zipfile_serialization=True) and pack g"

#endif
