/*
 * fuzz_safetensors.c - the safetensors reader (import/safetensors.c):
 * st_scan_buffer on the input. Every item it hands on must point inside the
 * buffer, carry a known dtype whose size x element count is its byte count,
 * follow the previous tensor without a hole, and the last must end at the
 * end of the file. A visitor error must come back unchanged, and a scan
 * that failed must not have called the visitor at all (it validates first).
 */
#include "fuzz.h"
#include "safetensors.h"

typedef struct {
    const uint8_t *buf;
    size_t len;
    size_t items, tensors;
    const uint8_t *data_end;   /* end of the last tensor seen */
    int stop_at;               /* return an error at this item (0: never) */
} visit_state;

static int visit(void *user, const st_item *it)
{
    visit_state *v = user;
    v->items++;
    FUZZ_ASSERT(it->name != NULL, "item without a name");
    (void)strlen(it->name); /* ASan: terminated inside valid memory */
    if (it->is_meta) {
        FUZZ_ASSERT(it->value != NULL, "metadata '%s' without a value", it->name);
        (void)strlen(it->value);
        FUZZ_ASSERT(v->tensors == 0, "metadata after tensors");
    } else {
        v->tensors++;
        FUZZ_ASSERT(wpack_dtype_name(it->dtype) != NULL, "tensor '%s': dtype %d", it->name,
                    it->dtype);
        FUZZ_ASSERT(it->rank <= WPACK_MAX_RANK, "tensor '%s': rank %u", it->name, it->rank);
        uint64_t ne = 1;
        for (unsigned k = 0; k < it->rank; k++)
            ne *= it->dims[k];
        FUZZ_ASSERT(ne * (uint64_t)wpack_dtype_size(it->dtype) == it->nbytes,
                    "tensor '%s': %llu bytes for its shape", it->name,
                    (unsigned long long)it->nbytes);
        uintptr_t a = (uintptr_t)it->data, b = (uintptr_t)v->buf;
        FUZZ_ASSERT(a >= b && a - b <= v->len && it->nbytes <= v->len - (a - b),
                    "tensor '%s': data outside the buffer", it->name);
        FUZZ_ASSERT(it->file_offset == a - b, "tensor '%s': file_offset %llu", it->name,
                    (unsigned long long)it->file_offset);
        FUZZ_ASSERT(v->data_end == NULL || it->data == v->data_end,
                    "tensor '%s' does not follow the previous one", it->name);
        if (it->nbytes) { /* ASan: the first and last byte are readable */
            volatile uint8_t first = it->data[0], last = it->data[it->nbytes - 1];
            (void)first;
            (void)last;
        }
        v->data_end = it->data + it->nbytes;
    }
    if (v->stop_at && (int)v->items == v->stop_at)
        return WPACK_E_IO;
    return WPACK_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = fuzz_copy(data, size);
    visit_state v = {buf, size, 0, 0, NULL, 0};
    char err[256];
    err[0] = 0;
    int rc = st_scan_buffer(buf, size, visit, &v, err, sizeof err), rc0 = rc;
    size_t n = strnlen(err, sizeof err);
    FUZZ_ASSERT(n < sizeof err, "message not terminated");
    if (rc != WPACK_OK) {
        FUZZ_ASSERT(n > 0, "rc %d without a message", rc);
        FUZZ_ASSERT(wpack_error_name(rc) != NULL, "rc %d has no name", rc);
        FUZZ_ASSERT(v.items == 0, "failed (rc %d: %s) after visiting %zu items", rc, err, v.items);
    } else {
        FUZZ_ASSERT(v.tensors == 0 || v.data_end == buf + size,
                    "the last tensor ends before the end of the file");
        if (v.items) {
            /* A visitor's error stops the scan and comes back as it is. */
            visit_state v2 = {buf, size, 0, 0, NULL, (int)(v.items + 1) / 2};
            rc = st_scan_buffer(buf, size, visit, &v2, err, sizeof err);
            FUZZ_ASSERT(rc == WPACK_E_IO && v2.items == (size_t)v2.stop_at,
                        "visitor error: rc %d after %zu items", rc, v2.items);
        }
    }
    /* Tiny message buffers stay terminated and give the same answer. */
    char tiny[4] = {0};
    visit_state v3 = {buf, size, 0, 0, NULL, 0};
    int rc3 = st_scan_buffer(buf, size, visit, &v3, tiny, sizeof tiny);
    FUZZ_ASSERT(strnlen(tiny, sizeof tiny) < sizeof tiny, "small message not terminated");
    FUZZ_ASSERT(rc3 == rc0, "rc %d with a small message buffer, %d with a large one", rc3, rc0);
    free(buf);
    return 0;
}
