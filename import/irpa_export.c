/*
 * irpa_export.c - an archive as an IREE parameter archive, laid out as IREE's
 * own builder does (irpa.h): one entry per archive entry, keyed by its name
 * (what `wpack resolve --emit iree` references), in name order. A splat whose
 * element is 1, 2, 4, 8 or 16 bytes stays a splat entry; an alias is a data
 * entry sharing its target's bytes; everything else is a data entry with its
 * bytes 64-aligned. Each entry's metadata is "wpack:DTYPE[D0,...]" (a block
 * dtype as NAME/ELEMS/BYTES/HEXPARAMS), so `wpack create` gets dtype and dims
 * back (IREE ignores it).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "export.h"
#include "internal.h"
#include "irpa.h"

typedef struct {
    int fd;
    uint64_t pos;
    int failed;
} sink_t;

static int put(void *ctx, const void *p, size_t n)
{
    sink_t *o = ctx;
    if (!o->failed && wpk_write_all(o->fd, p, n))
        o->failed = 1;
    o->pos += n;
    return !o->failed;
}

static void zeros_to(sink_t *o, uint64_t at)
{
    static const uint8_t z[4096];
    while (o->pos < at && !o->failed) {
        uint64_t k = at - o->pos < sizeof z ? at - o->pos : sizeof z;
        put(o, z, (size_t)k);
    }
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

typedef struct {
    wpack_tensor t;
    int splat;            /* written as a splat entry */
    uint64_t store;       /* data: offset in the storage segment (of the target for an alias) */
    char meta[IRPA_META_MAX];
    size_t meta_len;
} plan;

/* Append to p->meta at *o; past its end *o only grows (the caller checks
 * *o < sizeof p->meta), nothing is written out of bounds. */
static void meta_add(plan *p, size_t *o, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void meta_add(plan *p, size_t *o, const char *fmt, ...)
{
    char *at = *o < sizeof p->meta ? p->meta + *o : NULL;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(at, at ? sizeof p->meta - *o : 0, fmt, ap);
    va_end(ap);
    *o += k > 0 ? (size_t)k : 0;
}

static int splat_entry(const wpack_tensor *t)
{
    size_t fs = t->fill_size;
    return t->kind == WPACK_KIND_SPLAT && fs && fs <= 16 && !(fs & (fs - 1));
}

int irpa_export_no_bytes(const wpack_tensor *t)
{
    return splat_entry(t) || t->kind == WPACK_KIND_ALIAS;
}

int irpa_export(const wpack_archive *ar, int fd, unsigned read_flags, irpa_done_fn done,
                void *user, char *err, size_t errlen)
{
    uint64_t n = wpack_count(ar);
    plan *v = calloc(n ? (size_t)n : 1, sizeof *v);
    if (!v) {
        wpk_fmt(err, errlen, "irpa: out of memory");
        return WPACK_E_NOMEM;
    }
    int rc = WPACK_OK;
    uint64_t entries = 0, meta = 0, storage = 0;
    for (uint64_t i = 0; i < n && !rc; i++) {
        plan *p = &v[i];
        if ((rc = wpack_tensor_at(ar, i, &p->t)))
            break;
        const char *dn = wpack_dtype_name(p->t.dtype), *bn = NULL;
        uint32_t be = 0, bb = 0;
        const void *params = NULL;
        uint64_t plen = 0;
        if (!dn && p->t.dtype >= WPACK_DTYPE_BLOCK_BASE &&
            wpack_block_dtype_at(ar, (uint64_t)(p->t.dtype - WPACK_DTYPE_BLOCK_BASE), &bn, &be,
                                 &bb, &params, &plen) == WPACK_OK &&
            strlen(bn) < 64 && !strpbrk(bn, "/[") && plen <= 32)
            dn = bn;
        if (!dn) { /* without its "wpack:" metadata it would come back as raw u8 */
            wpk_fmt(err, errlen, "irpa: entry '%s': block dtype '%s' cannot be written in the "
                    "entry's metadata (a name of at most 63 bytes without '/' or '[', params "
                    "of at most 32 bytes)", p->t.name, bn ? bn : "?");
            rc = WPACK_E_UNSUPPORTED;
            break;
        }
        size_t o = 0;
        meta_add(p, &o, "wpack:%s", dn);
        if (dn == bn) { /* a block dtype: its geometry and params travel along */
            meta_add(p, &o, "/%u/%u/", be, bb);
            for (uint64_t k = 0; k < plen; k++)
                meta_add(p, &o, "%02x", ((const uint8_t *)params)[k]);
        }
        meta_add(p, &o, "[");
        for (unsigned k = 0; k < p->t.rank; k++)
            meta_add(p, &o, k ? ",%llu" : "%llu", (unsigned long long)p->t.dims[k]);
        meta_add(p, &o, "]");
        if (o >= sizeof p->meta) { /* cannot happen within IRPA_META_MAX's bound */
            wpk_fmt(err, errlen, "irpa: entry '%s': its dtype and dims take more than %d bytes",
                    p->t.name, IRPA_META_MAX - 1);
            rc = WPACK_E_LIMIT;
            break;
        }
        p->meta_len = o;
        p->splat = splat_entry(&p->t);
    }
    /* an alias is the same splat, or shares its target's bytes */
    for (uint64_t i = 0; i < n && !rc; i++)
        if (v[i].t.kind == WPACK_KIND_ALIAS && v[i].t.alias_target < n) {
            const plan *t = &v[v[i].t.alias_target];
            v[i].splat = t->splat;
            v[i].t.fill = t->t.fill;
            v[i].t.fill_size = t->t.fill_size;
        }
    for (uint64_t i = 0; i < n && !rc; i++) {
        plan *p = &v[i];
        entries = align_up(entries, IRPA_ENTRY_ALIGNMENT) +
                  (p->splat ? IRPA_SPLAT_ENTRY_SIZE : IRPA_DATA_ENTRY_SIZE);
        meta += p->t.name_len + p->meta_len;
        if (!p->splat && p->t.kind != WPACK_KIND_ALIAS) {
            p->store = align_up(storage, IRPA_DATA_ALIGNMENT);
            storage = p->store + p->t.nbytes;
        }
    }
    for (uint64_t i = 0; i < n && !rc; i++)
        if (v[i].t.kind == WPACK_KIND_ALIAS && v[i].t.alias_target < n)
            v[i].store = v[v[i].t.alias_target].store;
    /* as IREE's builder: the storage segment takes the alignment of its
     * first data entry (64), or 1 when there is none (splats only) */
    int any_data = 0;
    for (uint64_t i = 0; i < n; i++)
        any_data |= !v[i].splat;
    uint64_t es_off = align_up(IRPA_HEADER_SIZE, IRPA_ENTRY_ALIGNMENT), ms_off = es_off + entries,
             ss_off = align_up(ms_off + meta, any_data ? IRPA_DATA_ALIGNMENT : 1);
    sink_t o = {fd, 0, 0};
    uint8_t h[IRPA_HEADER_SIZE] = {0};
    memcpy(h, "IRPA", 4);
    wpk_st64(h + 8, IRPA_HEADER_SIZE);
    wpk_st64(h + 32, n);
    wpk_st64(h + 40, es_off);
    wpk_st64(h + 48, entries);
    wpk_st64(h + 56, ms_off);
    wpk_st64(h + 64, meta);
    wpk_st64(h + 72, ss_off);
    wpk_st64(h + 80, storage);
    if (!rc)
        put(&o, h, sizeof h);
    uint64_t mat = 0;
    for (uint64_t i = 0; i < n && !rc; i++) {
        const plan *p = &v[i];
        uint8_t e[IRPA_SPLAT_ENTRY_SIZE] = {0};
        zeros_to(&o, align_up(o.pos, IRPA_ENTRY_ALIGNMENT));
        wpk_st64(e, p->splat ? IRPA_SPLAT_ENTRY_SIZE : IRPA_DATA_ENTRY_SIZE);
        wpk_st32(e + 8, p->splat ? IRPA_SPLAT : IRPA_DATA);
        wpk_st64(e + 20, mat);
        wpk_st64(e + 28, p->t.name_len);
        wpk_st64(e + 36, p->meta_len ? mat + p->t.name_len : 0);
        wpk_st64(e + 44, p->meta_len);
        mat += p->t.name_len + p->meta_len;
        if (p->splat) {
            wpk_st64(e + 60, p->t.nbytes);
            memcpy(e + 68, p->t.fill, p->t.fill_size);
            e[84] = (uint8_t)p->t.fill_size;
            put(&o, e, IRPA_SPLAT_ENTRY_SIZE);
        } else {
            wpk_st64(e + 52, IRPA_DATA_ALIGNMENT);
            wpk_st64(e + 60, p->store);
            wpk_st64(e + 68, p->t.nbytes);
            put(&o, e, IRPA_DATA_ENTRY_SIZE);
        }
    }
    for (uint64_t i = 0; i < n && !rc; i++) {
        put(&o, v[i].t.name, v[i].t.name_len);
        put(&o, v[i].meta, v[i].meta_len);
    }
    for (uint64_t i = 0; i < n && !rc && !o.failed; i++) {
        plan *p = &v[i];
        if (!p->splat && p->t.kind != WPACK_KIND_ALIAS) {
            zeros_to(&o, ss_off + p->store);
            rc = wpk_export_copy_fd(ar, &p->t, o.fd, read_flags, err, errlen);
            o.pos += p->t.nbytes;
        }
        if (!rc && done)
            done(user, &p->t);
    }
    if (!rc)
        zeros_to(&o, align_up(o.pos, IRPA_FILE_ALIGNMENT));
    if (!rc && o.failed) {
        wpk_fmt(err, errlen, "irpa: write failed: %s", strerror(errno));
        rc = WPACK_E_IO;
    }
    free(v);
    return rc;
}
