/* torch_pack.c - a torch.save checkpoint, mapped, scanned and streamed into
 * a sink. torch.ao observer and fake-quant buffers (a state_dict after
 * prepare() / prepare_qat()) become activation stats of the observed module
 * (calib_torch.c, spec appendix A.1) and stay out of the tensors unless
 * keep_observers. */
#include <stdlib.h>
#include <string.h>

#include "calib.h"
#include "import.h"
#include "internal.h"
#include "torch_scan.h"
#include "zipread.h"

#define TORCH_PIECE (4u << 20)

typedef struct {
    wpk_sink *s;
    const wpk_mapped *m;
    uint8_t *buf;
    int crc_on;          /* the bytes emitted are the whole storage, in order */
    uint32_t crc;
    const calib_obs *obs; /* observer buffers to leave out (NULL: keep all) */
} torch_packer;

static int emit(void *user, const void *data, size_t n)
{
    torch_packer *tp = user;
    if (tp->crc_on)
        tp->crc = wpk_crc32(tp->crc, data, n);
    /* Straight from the mapping (a contiguous view): the kernel moves the
     * bytes, and those pages are dropped now, so a large tensor does not
     * stay resident. */
    const uint8_t *d = data;
    int mapped = tp->m->p && d >= tp->m->p && d < tp->m->p + tp->m->len;
    int rc = mapped ? wpk_sink_write_mapped(tp->s, tp->m, data, n) : wpk_sink_write(tp->s, data, n);
    if (!rc)
        wpk_sink_progress(tp->s, n);
    if (mapped)
        wpk_map_release(tp->m, (uint64_t)(d - tp->m->p), n);
    return rc;
}

/* torch.save's zip gives every storage a CRC-32; a flipped bit in a
 * checkpoint must not become a wpack tensor with a fresh, matching XXH3.
 * A tensor that is its whole storage (the usual case) is checked as it
 * streams; any other view has its storage checked first, once. */
static int stream_checked(torch_packer *tp, const torch_item *it)
{
    int whole = it->contiguous && it->offset == 0 && it->nbytes == it->storage_bytes &&
                !it->byteswap;
    if (!*it->storage_checked && !whole &&
        wpk_crc32(0, it->storage, (size_t)it->storage_bytes) != it->storage_crc32)
        return wpk_sink_fail(tp->s, WPACK_E_CHECKSUM,
                             "tensor '%s': its storage does not match the zip's CRC-32 "
                             "(damaged checkpoint)", it->name);
    tp->crc_on = whole && !*it->storage_checked;
    tp->crc = 0;
    const wpk_mapped *m = tp->m;
    int rc;
    if (whole && m->fd >= 0 && it->storage >= m->p && it->storage < m->p + m->len)
        /* the usual case: read, CRC-32, hash and copied a cached step at a time */
        rc = wpk_sink_stream_file(tp->s, m, (uint64_t)(it->storage - m->p), it->nbytes,
                                  tp->crc_on ? &tp->crc : NULL);
    else
        rc = torch_stream_tensor(it, tp->buf, TORCH_PIECE, emit, tp);
    if (!rc && tp->crc_on && tp->crc != it->storage_crc32)
        rc = wpk_sink_fail(tp->s, WPACK_E_CHECKSUM,
                           "tensor '%s': its storage does not match the zip's CRC-32 "
                           "(damaged checkpoint)", it->name);
    tp->crc_on = 0;
    if (!rc)
        *it->storage_checked = 1;
    return rc;
}

/* A stride-0 view: one element, stored once as a splat entry (a
 * [2^20, 2^20] expand of one float is 4 TiB materialised). Its storage is
 * CRC-checked first, once, like any other view's. */
static int splat(torch_packer *tp, const torch_item *it)
{
    if (!*it->storage_checked &&
        wpk_crc32(0, it->storage, (size_t)it->storage_bytes) != it->storage_crc32)
        return wpk_sink_fail(tp->s, WPACK_E_CHECKSUM,
                             "tensor '%s': its storage does not match the zip's CRC-32 "
                             "(damaged checkpoint)", it->name);
    *it->storage_checked = 1;
    uint8_t fill[8];
    const uint8_t *src = it->storage + it->offset * it->elem_size;
    for (size_t b = 0; b < it->elem_size; b++)
        fill[b] = it->byteswap ? src[it->elem_size - 1 - b] : src[b];
    return wpk_sink_splat(tp->s, it->name, it->dtype, it->rank, it->dims, fill);
}

/* Before anything is written: the tensors must fit under the output cap. */
static int plan(torch_packer *tp, const torch_item *it)
{
    char what[600];
    wpk_fmt(what, sizeof what, "tensor '%.400s'", it->name);
    int rc = wpk_sink_room(tp->s, what, it->nbytes);
    if (rc || it->total_tensors < 2)
        return rc;
    wpk_fmt(what, sizeof what, "its %llu tensors together (the largest '%.400s')",
            (unsigned long long)it->total_tensors, it->name);
    return wpk_sink_room(tp->s, what, it->total_bytes);
}

static int visit(void *user, const torch_item *it)
{
    torch_packer *tp = user;
    wpk_sink *s = tp->s;
    char *str;
    int rc;
    switch (it->kind) {
    case TORCH_PLAN:
        return plan(tp, it);
    case TORCH_SKIPPED:
        wpk_sink_warn(s, "skipping '%s': %.*s cannot be metadata (the tensors are kept)",
                      it->name, (int)it->slen, it->s);
        return WPACK_OK;
    case TORCH_TENSOR:
        if (calib_obs_drops(tp->obs, it->name))
            return WPACK_OK;
        if (it->splat)
            return splat(tp, it);
        if ((rc = wpk_sink_begin(s, it->name, it->dtype, it->rank, it->dims)))
            return rc;
        if ((rc = stream_checked(tp, it)))
            return rc;
        if ((rc = wpk_sink_end(s)))
            return rc;
        wpk_map_release(tp->m, it->storage_file_offset, it->storage_bytes);
        return WPACK_OK;
    case TORCH_ALIAS:
        if (calib_obs_drops(tp->obs, it->name))
            return WPACK_OK;
        return wpk_sink_alias(s, it->name, it->target);
    case TORCH_INT:
        return wpk_sink_meta_i64(s, it->name, it->i);
    case TORCH_FLOAT:
        return wpk_sink_meta_f64(s, it->name, it->f);
    case TORCH_BOOL:
        return wpk_sink_meta_bool(s, it->name, (int)it->i);
    case TORCH_STRING:
        if (!(str = strndup(it->s, it->slen)))
            return wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
        rc = wpk_sink_meta_string(s, it->name, str); /* one with a NUL is TORCH_SKIPPED */
        free(str);
        return rc;
    default:
        return WPACK_OK;
    }
}

/* The observers' records into the writer, and one line saying what became
 * of them. */
static int observers_out(wpk_sink *s, const calib_obs *obs, int keep)
{
    char sum[400], err[1024];
    err[0] = 0;
    int rc = calib_obs_emit(obs, s->o ? s->o->prefix : NULL, stats_to_writer, s->w, sum,
                            sizeof sum, err, sizeof err);
    if (rc)
        return wpk_sink_fail(s, rc, "torch.ao observers: %s", err);
    uint64_t nb = calib_obs_buffers(obs), nw = calib_obs_weight_observers(obs);
    char wq[160] = "";
    if (nw)
        wpk_fmt(wq, sizeof wq, "; %llu weight_fake_quant observer%s left out (the weights' own "
                "stats stand for them)", (unsigned long long)nw, nw == 1 ? "" : "s");
    wpk_sink_warn(s, "%s; %llu observer buffer%s %s%s", sum, (unsigned long long)nb,
                  nb == 1 ? "" : "s", keep ? "kept as tensors too (--keep-observers)"
                                           : "not stored as tensors (--keep-observers keeps them)",
                  keep ? "" : wq);
    return WPACK_OK;
}

int torch_pack_file(wpk_sink *s, const char *path)
{
    wpk_mapped m;
    int rc = wpk_map_file(s, path, &m);
    if (rc)
        return rc;
    torch_packer tp = {.s = s, .m = &m, .buf = malloc(TORCH_PIECE)};
    char err[1024];
    if (!tp.buf) {
        wpk_unmap_file(&m);
        return wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
    }
    err[0] = 0;
    s->err[0] = 0;
    const char *key = s->o ? s->o->key : NULL;
    int keep = s->o && s->o->keep_observers;
    /* First the observers alone (a few small buffers), then the tensors, on
     * one unpickling: a bad observer fails before any tensor is written. */
    calib_obs *obs = calib_obs_new(m.len, err, sizeof err);
    rc = obs ? WPACK_OK : WPACK_E_NOMEM;
    if (!rc) {
        tp.obs = keep ? NULL : obs;
        rc = torch_scan_buffer_pre(m.p, m.len, key, calib_obs_visit, obs, visit, &tp,
                                   wpk_map_read, &m, err, sizeof err);
    }
    /* A failure inside visit has its message in the sink already. */
    if (rc && !s->err[0])
        wpk_sink_fail(s, rc, "%s", err);
    if (!rc && calib_obs_buffers(obs))
        rc = observers_out(s, obs, keep);
    calib_obs_free(obs);
    free(tp.buf);
    wpk_unmap_file(&m);
    return rc;
}
