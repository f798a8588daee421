/*
 * fuzz_gguf.c - the GGUF and IREE .irpa readers (import/gguf_read.c,
 * import/irpa.c) on the input. When gguf_parse accepts a buffer, every KV
 * and every tensor it hands on must lie inside the buffer: keys, values and
 * names in the header, each tensor's bytes in the data section, aligned,
 * with a known GGML type, non-overlapping. A failure must carry a named code
 * and a message. The same input also goes to irpa_parse (the two formats
 * differ in their magic, so the corpus seeds both: a seed starting "IRPA"
 * exercises the IREE reader), whose entries must lie inside the buffer.
 */
#include "fuzz.h"
#include "gguf.h"
#include "irpa.h"

static int inside(const uint8_t *buf, size_t len, const uint8_t *p, uint64_t n)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)buf;
    return a >= b && a - b <= len && n <= len - (a - b);
}

static void touch(const uint8_t *p, uint64_t n)
{
    if (n) { /* ASan: the first and last byte are readable */
        volatile uint8_t first = p[0], last = p[n - 1];
        (void)first;
        (void)last;
    }
}

static void check_gguf(const uint8_t *buf, size_t size)
{
    gguf_file g;
    char err[256];
    err[0] = 0;
    int rc = gguf_parse(buf, size, &g, err, sizeof err);
    if (rc) {
        FUZZ_ASSERT(err[0] && strnlen(err, sizeof err) < sizeof err, "rc %d without a message", rc);
        FUZZ_ASSERT(strcmp(wpack_error_name(rc), "WPACK_E_UNKNOWN") != 0, "rc %d unnamed", rc);
        return;
    }
    FUZZ_ASSERT(g.version == 2 || g.version == 3, "version %u", g.version);
    FUZZ_ASSERT(g.alignment && !(g.alignment & (g.alignment - 1)), "alignment %u", g.alignment);
    for (uint64_t i = 0; i < g.n_kv; i++) {
        const gguf_kv *kv = &g.kv[i];
        FUZZ_ASSERT(inside(buf, size, kv->key, kv->key_len), "kv %llu key outside",
                    (unsigned long long)i);
        FUZZ_ASSERT(inside(buf, size, kv->val, kv->val_len), "kv %llu value outside",
                    (unsigned long long)i);
        FUZZ_ASSERT(kv->type < GGUF_T_COUNT && kv->elem_type < GGUF_T_COUNT &&
                        kv->elem_type != GGUF_T_ARRAY, "kv %llu types %u/%u",
                    (unsigned long long)i, kv->type, kv->elem_type);
        touch(kv->val, kv->val_len);
    }
    uint64_t total = 0;
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        const gguf_tensor *t = &g.t[i];
        const ggml_type_info *ti = ggml_type_get(t->type);
        FUZZ_ASSERT(ti != NULL, "tensor %llu type %u", (unsigned long long)i, t->type);
        FUZZ_ASSERT(inside(buf, size, t->name, t->name_len), "tensor name outside");
        FUZZ_ASSERT(t->n_dims <= WPACK_MAX_RANK, "rank %u", t->n_dims);
        FUZZ_ASSERT(t->offset % g.alignment == 0, "misaligned tensor accepted");
        FUZZ_ASSERT(g.data_start <= size && inside(buf, size, buf + g.data_start + t->offset,
                                                   t->nbytes), "tensor bytes outside");
        touch(buf + g.data_start + t->offset, t->nbytes);
        total += t->nbytes;
    }
    FUZZ_ASSERT(total <= size, "tensors (%llu bytes) overlap in a %zu-byte file",
                (unsigned long long)total, size);
    gguf_free(&g);
}

static void check_irpa(const uint8_t *buf, size_t size)
{
    irpa_file f;
    char err[256];
    err[0] = 0;
    int rc = irpa_parse(buf, size, &f, err, sizeof err);
    if (rc) {
        FUZZ_ASSERT(err[0] && strnlen(err, sizeof err) < sizeof err, "rc %d without a message", rc);
        return;
    }
    /* the entries of all linked headers fit in the file (60 bytes each) */
    FUZZ_ASSERT(f.n <= size / IRPA_ENTRY_HEADER_SIZE, "%llu entries from %zu bytes",
                (unsigned long long)f.n, size);
    for (uint64_t i = 0; i < f.n; i++) {
        const irpa_entry *e = &f.e[i];
        FUZZ_ASSERT(inside(buf, size, e->name, e->name_len) && inside(buf, size, e->meta, e->meta_len),
                    "entry %llu name/metadata outside", (unsigned long long)i);
        if (e->type == IRPA_DATA) {
            FUZZ_ASSERT(inside(buf, size, buf + e->offset, e->length), "entry bytes outside");
            touch(buf + e->offset, e->length);
            /* an entry naming another's bytes names all of them, and the first such */
            const irpa_entry *t = e->alias_of ? &f.e[e->alias_of - 1] : NULL;
            FUZZ_ASSERT(!t || (e->alias_of - 1 < i && t->type == IRPA_DATA && !t->alias_of &&
                               t->offset == e->offset && t->length == e->length && e->length),
                        "entry %llu: alias_of %llu", (unsigned long long)i,
                        (unsigned long long)e->alias_of);
            for (uint64_t j = 0; !t && j < i && f.n <= 4096; j++) {
                const irpa_entry *o = &f.e[j];
                FUZZ_ASSERT(o->type != IRPA_DATA || !o->length || !e->length ||
                                o->offset + o->length <= e->offset ||
                                e->offset + e->length <= o->offset,
                            "entries %llu and %llu share bytes", (unsigned long long)j,
                            (unsigned long long)i);
            }
        } else {
            FUZZ_ASSERT(e->type == IRPA_SPLAT && e->pattern_len && e->pattern_len <= 16 &&
                            e->length % e->pattern_len == 0, "bad splat accepted");
        }
        irpa_meta m;
        if (irpa_meta_parse(e->meta, e->meta_len, &m)) {
            FUZZ_ASSERT(m.rank <= WPACK_MAX_RANK, "metadata rank %u", m.rank);
            FUZZ_ASSERT(m.dtype ? wpack_dtype_size(m.dtype) != 0
                                : m.block[0] && m.block_elems && m.block_bytes &&
                                      m.params_len <= sizeof m.params, "metadata dtype");
            (void)irpa_meta_nbytes(&m);
        }
    }
    irpa_free(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = fuzz_copy(data, size);
    check_gguf(buf, size);
    check_irpa(buf, size);
    free(buf);
    return 0;
}
