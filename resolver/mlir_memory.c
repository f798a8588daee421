/*
 * mlir_memory.c - the memory of a scanned document: growing arrays, the
 * globals array (heap, then huge pages), large zeroed tables
 * (wpk_big_calloc) and the blocks the globals' names live in.
 */
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "mlir_scan_int.h"

int wpk_grow_array(void **v, size_t *cap, size_t n, size_t sz)
{
    if (n < *cap)
        return 1;
    size_t c = *cap ? *cap * 2 : 16;
    if (c > ((size_t)-1) / sz)
        return 0;
    void *p = realloc(*v, c * sz);
    if (!p)
        return 0;
    *v = p;
    *cap = c;
    return 1;
}

/*
 * The globals array (200 bytes a global: 20 MB for 100,000). Past 64 KB it
 * moves from the heap to an anonymous mapping advised to use transparent
 * huge pages (grown by mremap): one page fault per 2 MB instead of 512,
 * which was 15-20% of the run time on bench/resolver's 100,000-globals
 * file. Where the kernel refuses the advice nothing changes; where mmap or
 * mremap is missing the heap is used throughout.
 */
#if defined(__linux__) && defined(MREMAP_MAYMOVE) && defined(MADV_HUGEPAGE)
#define WPK_MAP_GLOBALS 1
#endif
#define MAP_FROM_BYTES ((size_t)64 << 10)
#define HUGE_BYTES ((size_t)2 << 20)
/* wpk_big_calloc maps from this size on: a 4 KiB page fault costs ~3 us on
 * the benchmark's VM, zeroing a 2 MiB huge page ~0.1 ms */
#define BIG_FROM_BYTES ((size_t)256 << 10)

void *wpk_big_calloc(size_t bytes)
{
#ifdef WPK_MAP_GLOBALS
    if (bytes >= BIG_FROM_BYTES) {
        if (bytes > ((size_t)-1) - HUGE_BYTES)
            return NULL;
        size_t len = (bytes + HUGE_BYTES - 1) & ~(HUGE_BYTES - 1);
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
        madvise(p, len, MADV_HUGEPAGE); /* advice: failure changes nothing */
        return p;
    }
#endif
    return calloc(1, bytes ? bytes : 1);
}

void wpk_big_free(void *p, size_t bytes)
{
    if (!p)
        return;
#ifdef WPK_MAP_GLOBALS
    if (bytes >= BIG_FROM_BYTES) {
        munmap(p, (bytes + HUGE_BYTES - 1) & ~(HUGE_BYTES - 1));
        return;
    }
#endif
    free(p);
}

int wpk_doc_grow_globals(wpk_mlir_doc *d)
{
    size_t sz = sizeof *d->globals;
    if (d->nglobals < d->capglobals)
        return 1;
#ifdef WPK_MAP_GLOBALS
    size_t c = d->capglobals * 2;
    if (d->capglobals && c <= ((size_t)-1) / sz - HUGE_BYTES && c * sz >= MAP_FROM_BYTES) {
        size_t bytes = (c * sz + HUGE_BYTES - 1) & ~(HUGE_BYTES - 1);
        void *p;
        if (d->globals_map_bytes) {
            p = mremap(d->globals, d->globals_map_bytes, bytes, MREMAP_MAYMOVE);
            if (p == MAP_FAILED)
                return 0;
        } else {
            p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED)
                return wpk_grow_array((void **)&d->globals, &d->capglobals, d->nglobals, sz);
            madvise(p, bytes, MADV_HUGEPAGE); /* advice: failure changes nothing */
            memcpy(p, d->globals, d->nglobals * sz);
            free(d->globals);
            d->globals_fresh = d->nglobals; /* the rest is zero (mremap adds zeros too) */
        }
        d->globals = p;
        d->globals_map_bytes = bytes;
        d->capglobals = bytes / sz;
        return 1;
    }
#endif
    return wpk_grow_array((void **)&d->globals, &d->capglobals, d->nglobals, sz);
}

void wpk_doc_free_globals(wpk_mlir_doc *d)
{
#ifdef WPK_MAP_GLOBALS
    if (d->globals_map_bytes) {
        munmap(d->globals, d->globals_map_bytes);
        return;
    }
#endif
    free(d->globals);
}

/* The globals' names: carved out of blocks, one allocation for thousands
 * of names instead of one each: a 64 KiB block, then 2 MiB blocks of
 * huge pages from wpk_big_calloc. */
struct wpk_name_block {
    struct wpk_name_block *next;
    size_t used, cap;
    size_t bytes;               /* of the allocation, for wpk_big_free */
    char data[];
};

#define NAME_BLOCK ((size_t)64 << 10)
#define NAME_BIG_BLOCK ((size_t)2 << 20)

/* Room for a name of up to len bytes and its NUL in the doc's blocks;
 * *blk gets the block (add what was used to its `used`). */
static char *name_room(wpk_mlir_doc *doc, size_t len, struct wpk_name_block **blk)
{
    struct wpk_name_block *b = doc->names;
    if (!b || b->cap - b->used < len + 1) {
        size_t std = doc->name_blocks >= 1 ? NAME_BIG_BLOCK : NAME_BLOCK;
        size_t bytes = std;
        if (len + 1 > std - sizeof *b) {
            if (len + 1 > ((size_t)-1) - sizeof *b)
                return NULL;
            bytes = sizeof *b + len + 1;
        }
        b = bytes >= NAME_BIG_BLOCK ? wpk_big_calloc(bytes) : malloc(bytes);
        if (!b)
            return NULL;
        b->used = 0;
        b->cap = bytes - sizeof *b;
        b->bytes = bytes;
        doc->name_blocks++;
        /* a block for one long name goes behind the current one, so the
         * current block keeps being filled */
        if (doc->names && bytes > std) {
            b->next = doc->names->next;
            doc->names->next = b;
        } else {
            b->next = doc->names;
            doc->names = b;
        }
    }
    *blk = b;
    return b->data + b->used;
}

static void free_block(struct wpk_name_block *b)
{
    if (b->bytes >= NAME_BIG_BLOCK)
        wpk_big_free(b, b->bytes);
    else
        free(b);
}

char *wpk_doc_decode_name(wpk_mlir_doc *doc, const char *s, size_t len, size_t *n)
{
    wpk_mlir_strip_quotes(&s, &len);
    struct wpk_name_block *b;
    char *out = name_room(doc, len, &b);
    if (!out)
        return NULL;
    *n = wpk_mlir_decode_into(out, s, len);
    b->used += *n + 1;
    return out;
}

/* A name with nothing to decode (a bare @symbol). */
char *wpk_doc_copy_name(wpk_mlir_doc *doc, const char *s, size_t len)
{
    struct wpk_name_block *b = doc->names;
    char *out;
    if (b && b->cap - b->used > len) /* room in the current block */
        out = b->data + b->used;
    else if (!(out = name_room(doc, len, &b)))
        return NULL;
    memcpy(out, s, len);
    out[len] = 0;
    b->used += len + 1;
    return out;
}

void wpk_doc_free_names(wpk_mlir_doc *doc)
{
    while (doc->names) {
        struct wpk_name_block *next = doc->names->next;
        free_block(doc->names);
        doc->names = next;
    }
}
