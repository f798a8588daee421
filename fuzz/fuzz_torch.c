/*
 * fuzz_torch.c - the PyTorch checkpoint reader: the zip directory reader
 * (import/zipread.c), the restricted unpickler (import/pickle.c) and
 * torch_scan_buffer (import/torch_scan.c), which ties them together.
 *
 * On each input:
 *   1. wpk_zip_open; on success every entry lies inside the buffer and
 *      wpk_zip_find finds each one by its name;
 *   2. pk_load of the whole input as a bare pickle (legacy files, and the
 *      data.pkl seeds) and, when it is a zip, of every entry named *.pkl;
 *   3. torch_scan_buffer with no key, and with the first dotted key of the
 *      first pass; every tensor's view must lie inside its storage and its
 *      storage inside the buffer; torch_stream_tensor must hand on exactly
 *      nbytes (a stride-0 splat hands on one element, views above 64 MiB
 *      are not streamed: a 16-byte view can stand for terabytes);
 *   4. the plan (TORCH_PLAN) comes once, first;
 *   5. the torch.ao observers (import/calib_torch.c) as `--stats-from` reads
 *      them, and calib_obs_drops on a few names, as `create` asks.
 */
#include "calib.h"
#include "fuzz.h"
#include "pickle.h"
#include "torch_scan.h"
#include "zipread.h"

typedef struct {
    const uint8_t *buf;
    size_t len;
    size_t items;
    int planned;
    char first_key[128];       /* the part before the first '.' of the first name */
} visit_state;

static int inside(const void *p, uint64_t n, const uint8_t *buf, size_t len)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)buf;
    return a >= b && a - b <= len && n <= len - (a - b);
}

static int count_bytes(void *user, const void *data, size_t n)
{
    uint64_t *total = user;
    if (n) {
        volatile uint8_t first = ((const uint8_t *)data)[0], last = ((const uint8_t *)data)[n - 1];
        (void)first;
        (void)last;
    }
    *total += n;
    return WPACK_OK;
}

static void check_tensor(visit_state *v, const torch_item *it)
{
    FUZZ_ASSERT(wpack_dtype_name(it->dtype) && it->elem_size == wpack_dtype_size(it->dtype),
                "'%s': dtype %d, %zu-byte elements", it->name, it->dtype, it->elem_size);
    FUZZ_ASSERT(it->rank <= WPACK_MAX_RANK, "'%s': rank %u", it->name, it->rank);
    uint64_t ne = 1;
    for (unsigned k = 0; k < it->rank; k++)
        ne *= it->dims[k];
    FUZZ_ASSERT(ne == it->nelems && it->nbytes == ne * it->elem_size,
                "'%s': nelems %llu nbytes %llu for its dims", it->name,
                (unsigned long long)it->nelems, (unsigned long long)it->nbytes);
    FUZZ_ASSERT(inside(it->storage, it->storage_bytes, v->buf, v->len) &&
                    it->storage_file_offset == (uintptr_t)it->storage - (uintptr_t)v->buf,
                "'%s': storage outside the buffer", it->name);
    if (ne) {
        /* The last element the view reaches is inside the storage. */
        uint64_t last = it->offset;
        for (unsigned k = 0; k < it->rank; k++)
            last += (it->dims[k] - 1) * it->strides[k];
        FUZZ_ASSERT((last + 1) * it->elem_size <= it->storage_bytes,
                    "'%s': view reaches element %llu of a %llu-byte storage", it->name,
                    (unsigned long long)last, (unsigned long long)it->storage_bytes);
    }
    if (it->splat) {
        for (unsigned k = 0; k < it->rank; k++)
            FUZZ_ASSERT(it->dims[k] <= 1 || it->strides[k] == 0, "'%s': splat with stride %llu",
                        it->name, (unsigned long long)it->strides[k]);
        FUZZ_ASSERT(ne > 1, "'%s': splat of %llu elements", it->name, (unsigned long long)ne);
        return;
    }
    if (it->nbytes > (64u << 20))
        return;
    uint8_t scratch[64];
    uint64_t total = 0;
    int rc = torch_stream_tensor(it, scratch, sizeof scratch, count_bytes, &total);
    FUZZ_ASSERT(rc == WPACK_OK && total == it->nbytes, "'%s': streamed %llu of %llu bytes (rc %d)",
                it->name, (unsigned long long)total, (unsigned long long)it->nbytes, rc);
}

static int visit(void *user, const torch_item *it)
{
    visit_state *v = user;
    FUZZ_ASSERT(it->name != NULL, "item without a name");
    if (it->kind == TORCH_PLAN) {
        FUZZ_ASSERT(!v->planned && v->items == 0, "a second plan, or a plan after %zu items",
                    v->items);
        FUZZ_ASSERT(it->total_bytes >= it->nbytes, "plan: total %llu below the largest %llu",
                    (unsigned long long)it->total_bytes, (unsigned long long)it->nbytes);
        v->planned = 1;
        return WPACK_OK;
    }
    FUZZ_ASSERT(v->planned, "'%s' before the plan", it->name);
    size_t nl = strlen(it->name);
    if (v->items++ == 0) {
        const char *dot = memchr(it->name, '.', nl);
        size_t kl = dot ? (size_t)(dot - it->name) : 0;
        if (kl && kl < sizeof v->first_key) {
            memcpy(v->first_key, it->name, kl);
            v->first_key[kl] = 0;
        }
    }
    switch (it->kind) {
    case TORCH_TENSOR:
        check_tensor(v, it);
        break;
    case TORCH_ALIAS:
        FUZZ_ASSERT(it->target != NULL, "alias '%s' without a target", it->name);
        (void)strlen(it->target);
        break;
    case TORCH_STRING:
        FUZZ_ASSERT(it->slen == 0 || inside(it->s, it->slen, v->buf, v->len),
                    "string '%s' outside the buffer", it->name);
        break;
    case TORCH_SKIPPED:
        FUZZ_ASSERT(it->s && strlen(it->s) == it->slen, "skipped '%s' without a reason", it->name);
        break;
    case TORCH_INT:
    case TORCH_FLOAT:
    case TORCH_BOOL:
        break;
    default:
        FUZZ_ASSERT(0, "'%s': kind %d", it->name, it->kind);
    }
    return WPACK_OK;
}

static void load_pickle(const uint8_t *p, size_t n)
{
    uint8_t *copy = fuzz_copy(p, n);
    pk_state *st = NULL;
    pk_value *root = NULL;
    char err[256];
    err[0] = 0;
    int rc = pk_load(copy, n, &st, &root, err, sizeof err);
    fuzz_check_message("torch", err, sizeof err, rc);
    FUZZ_ASSERT(rc != WPACK_OK || root != NULL, "pk_load succeeded without a root");
    pk_free(st);
    free(copy);
}

static void walk_zip(const uint8_t *buf, size_t len)
{
    wpk_zip z;
    char err[256];
    err[0] = 0;
    int rc = wpk_zip_open(&z, buf, len, err, sizeof err);
    fuzz_check_message("torch", err, sizeof err, rc);
    if (rc != WPACK_OK)
        return;
    for (size_t i = 0; i < z.n; i++) {
        const wpk_zip_entry *e = &z.e[i];
        FUZZ_ASSERT(inside(e->name, e->name_len, buf, len), "entry %zu: name outside", i);
        FUZZ_ASSERT(e->local_offset < len && e->data_offset <= len &&
                        e->comp_size <= len - e->data_offset,
                    "entry %zu: data %llu+%llu outside %zu bytes", i,
                    (unsigned long long)e->data_offset, (unsigned long long)e->comp_size, len);
        FUZZ_ASSERT(i == 0 || memcmp(z.e[i - 1].name, e->name,
                                     e->name_len < z.e[i - 1].name_len ? e->name_len
                                                                       : z.e[i - 1].name_len) <= 0,
                    "entries not sorted at %zu", i);
        FUZZ_ASSERT(wpk_zip_find(&z, e->name, e->name_len) == e, "entry %zu not found by name", i);
        if (e->method == 0 && e->name_len >= 4 &&
            memcmp(e->name + e->name_len - 4, ".pkl", 4) == 0)
            load_pickle(buf + e->data_offset, (size_t)e->size);
    }
    wpk_zip_close(&z);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = fuzz_copy(data, size);
    walk_zip(buf, size);
    load_pickle(buf, size);

    visit_state v = {buf, size, 0, 0, {0}};
    char err[256];
    err[0] = 0;
    int rc = torch_scan_buffer(buf, size, NULL, visit, &v, err, sizeof err);
    fuzz_check_message("torch", err, sizeof err, rc);
    FUZZ_ASSERT(rc == WPACK_OK || v.items == 0, "failed (rc %d: %s) after %zu items", rc, err,
                v.items);
    if (rc == WPACK_OK && v.first_key[0]) {
        visit_state v2 = {buf, size, 0, 0, {0}};
        rc = torch_scan_buffer(buf, size, v.first_key, visit, &v2, err, sizeof err);
        fuzz_check_message("torch", err, sizeof err, rc);
    }
    rc = calib_torch_parse(buf, size, NULL, NULL, err, sizeof err);
    fuzz_check_message("torch", err, sizeof err, rc);
    calib_obs *obs = NULL;
    if (calib_obs_scan(buf, size, NULL, NULL, NULL, &obs, err, sizeof err) == WPACK_OK) {
        static const char *const names[] = {"fc.activation_post_process.scale", "x.weight",
                                            "activation_post_process_0.min_val", "a.b"};
        for (size_t k = 0; k < 4; k++)
            (void)calib_obs_drops(obs, names[k]);
        calib_obs_free(obs);
    }
    (void)torch_is_legacy(buf, size);
    free(buf);
    return 0;
}
