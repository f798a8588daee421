/*
 * torch_scan.c - torch.save zip checkpoints: find data.pkl, unpickle it
 * (restricted), check every tensor against its storage, then visit.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "internal.h"
#include "pickle.h"
#include "torch_scan.h"
#include "zipread.h"

typedef struct {
    const char *key;           /* storage key (not NUL-terminated) */
    size_t klen;
    uint64_t offset;
    unsigned rank;
    uint64_t dims[WPACK_MAX_RANK], strides[WPACK_MAX_RANK];
    char *name;                /* first name given to this view */
    uint64_t first_visit;      /* the walk's visit count there (the same in both passes) */
} view_rec;

typedef struct {
    const uint8_t *buf;
    size_t len;
    wpk_zip zip;
    const char *prefix;        /* top directory, e.g. "archive" */
    size_t plen;
    int byteswap;
    char *err;
    size_t errlen;
    /* the walk: pass 1 checks everything, pass 2 calls fn */
    int pass;
    torch_visit_fn fn;
    void *user;
    size_t pkl_len;
    uint64_t visits, max_visits, name_bytes, max_name_bytes;
    torch_item plan;           /* TORCH_PLAN, filled by pass 1 */
    char *plan_name;
    view_rec *views;           /* hash table of views, for aliases */
    uint8_t *crc_checked;      /* per zip entry: see torch_item.storage_checked */
    uint8_t *entry_dtype;      /* per zip entry: the dtype its storage was first read as */
    size_t vcap, vcount;
    char path[WPACK_MAX_NAME + 64];
} scan;

static int sfail(scan *sc, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int sfail(scan *sc, int code, const char *fmt, ...)
{
    char m[700];
    va_list ap;
    va_start(ap, fmt);
    wpk_vfmt(m, sizeof m, fmt, ap);
    va_end(ap);
    wpk_fmt(sc->err, sc->errlen, "torch: %s", m);
    return code;
}

int torch_is_legacy(const uint8_t *buf, size_t len)
{
    /* Legacy files start with a pickled magic number: PROTO n, LONG1 ... */
    return len >= 3 && buf[0] == 0x80 && buf[1] >= 1 && buf[1] <= 5 && buf[2] == 0x8a;
}

/* ------------------------------------------------------------ zip parts */

static const wpk_zip_entry *member(scan *sc, const char *rest, size_t rlen)
{
    char name[WPK_ZIP_MAX_NAME + 1];
    if (sc->plen + 1 + rlen > WPK_ZIP_MAX_NAME)
        return NULL;
    memcpy(name, sc->prefix, sc->plen);
    name[sc->plen] = '/';
    memcpy(name + sc->plen + 1, rest, rlen);
    return wpk_zip_find(&sc->zip, name, sc->plen + 1 + rlen);
}

static int find_layout(scan *sc)
{
    const wpk_zip_entry *pkl = NULL;
    for (size_t i = 0; i < sc->zip.n; i++) {
        const wpk_zip_entry *e = &sc->zip.e[i];
        const char *slash = memchr(e->name, '/', e->name_len);
        if (slash && (size_t)(e->name + e->name_len - slash) == 9 &&
            memcmp(slash, "/data.pkl", 9) == 0) {
            if (pkl)
                return sfail(sc, WPACK_E_INPUT, "the zip holds two data.pkl files");
            pkl = e;
        }
    }
    if (!pkl)
        return sfail(sc, WPACK_E_INPUT,
                     "no '<dir>/data.pkl' in the zip: not a torch.save checkpoint");
    sc->prefix = pkl->name;
    sc->plen = (size_t)((const char *)memchr(pkl->name, '/', pkl->name_len) - pkl->name);
    if (member(sc, "constants.pkl", 13))
        return sfail(sc, WPACK_E_UNSUPPORTED,
                     "this is a TorchScript archive (torch.jit.save); save the weights with "
                     "torch.save(model.state_dict(), f) and pack that");
    const wpk_zip_entry *bo = member(sc, "byteorder", 9);
    if (bo) {
        if (bo->method != 0)
            return sfail(sc, WPACK_E_UNSUPPORTED, "the byteorder entry is compressed");
        const uint8_t *p = sc->buf + bo->data_offset;
        if (bo->size == 6 && memcmp(p, "little", 6) == 0)
            sc->byteswap = 0;
        else if (bo->size == 3 && memcmp(p, "big", 3) == 0)
            sc->byteswap = 1;
        else
            return sfail(sc, WPACK_E_INPUT, "byteorder entry is neither 'little' nor 'big'");
    }
    return WPACK_OK;
}

/* ------------------------------------------------------------ flattening */

/* A leaf item at sc->path: pass 1 counts its name (and a string's bytes:
 * one memoised 1 MB string under 1,000 keys made 1 GB of metadata from a
 * 1 MB checkpoint) against the budget, pass 2 hands it to fn. */
static int leaf(scan *sc, torch_item *it, size_t plen)
{
    if (sc->pass == 1) {
        sc->name_bytes += plen + 1 + (it->kind == TORCH_STRING ? it->slen : 0);
        if (sc->name_bytes > sc->max_name_bytes)
            return sfail(sc, WPACK_E_LIMIT,
                         "the names and strings of this checkpoint's values would take more "
                         "than %llu bytes (%u per byte of the %zu-byte data.pkl, at least %u): "
                         "one value reached through very many paths (shared subtrees or "
                         "strings)?",
                         (unsigned long long)sc->max_name_bytes, TORCH_NAME_BYTES_PER_BYTE,
                         sc->pkl_len, TORCH_NAME_BYTES_FLOOR);
        return WPACK_OK;
    }
    it->name = sc->path;
    return sc->fn(sc->user, it);
}

static uint64_t view_hash(const view_rec *v)
{
    uint64_t h = wpk_xxh3(v->key, v->klen) ^ (v->offset * 0x9e3779b97f4a7c15ull);
    for (unsigned k = 0; k < v->rank; k++)
        h = (h ^ v->dims[k]) * 0x100000001b3ull ^ v->strides[k];
    return h ^ v->rank;
}

static int same_view(const view_rec *a, const view_rec *b)
{
    if (a->klen != b->klen || memcmp(a->key, b->key, a->klen) || a->offset != b->offset ||
        a->rank != b->rank)
        return 0;
    for (unsigned k = 0; k < a->rank; k++)
        if (a->dims[k] != b->dims[k] || a->strides[k] != b->strides[k])
            return 0;
    return 1;
}

/* The record of an equal view seen before (pass 1 records v if there is
 * none: *rec is then NULL). */
static int view_seen(scan *sc, const view_rec *v, const view_rec **rec)
{
    *rec = NULL;
    if (sc->vcount * 2 >= sc->vcap) {
        size_t cap = sc->vcap ? sc->vcap * 2 : 64;
        view_rec *t = calloc(cap, sizeof *t);
        if (!t)
            return sfail(sc, WPACK_E_NOMEM, "out of memory");
        for (size_t i = 0; i < sc->vcap; i++)
            if (sc->views[i].name) {
                size_t j = view_hash(&sc->views[i]) & (cap - 1);
                while (t[j].name)
                    j = (j + 1) & (cap - 1);
                t[j] = sc->views[i];
            }
        free(sc->views);
        sc->views = t;
        sc->vcap = cap;
    }
    size_t j = view_hash(v) & (sc->vcap - 1);
    for (; sc->views[j].name; j = (j + 1) & (sc->vcap - 1))
        if (same_view(&sc->views[j], v)) {
            *rec = &sc->views[j];
            return WPACK_OK;
        }
    if (sc->pass != 1)
        return sfail(sc, WPACK_E_STATE, "tensor '%.60s': view not seen in the first pass",
                     sc->path);
    sc->views[j] = *v;
    sc->views[j].first_visit = sc->visits;
    sc->views[j].name = strdup(sc->path);
    if (!sc->views[j].name)
        return sfail(sc, WPACK_E_NOMEM, "out of memory");
    sc->vcount++;
    return WPACK_OK;
}

/* A view that repeats one element: every dim above 1 has stride 0. */
static int is_splat(const pk_view *t, uint64_t nelems)
{
    if (nelems < 2)
        return 0;
    for (unsigned k = 0; k < t->rank; k++)
        if (t->dims[k] > 1 && t->strides[k] != 0)
            return 0;
    return 1;
}

static int tensor_item(scan *sc, const pk_value *tv, size_t plen)
{
    if (tv->why && strcmp(tv->why, "complex") == 0)
        return sfail(sc, WPACK_E_UNSUPPORTED,
                     "tensor '%s': complex tensors are not supported (save "
                     "torch.view_as_real(t), a real tensor with a last dim of 2)",
                     sc->path);
    if (tv->why)
        return sfail(sc, WPACK_E_UNSUPPORTED,
                     "tensor '%s': quantized tensors are not supported: dequantize first "
                     "(tensor.dequantize())",
                     sc->path);
    const pk_view *t = tv->view;
    const pk_value *s = t->storage;
    torch_item it = {.kind = TORCH_TENSOR, .dtype = tv->dtype, .rank = t->rank,
                     .offset = t->offset, .byteswap = sc->byteswap};
    it.elem_size = wpack_dtype_size(tv->dtype);
    memcpy(it.dims, t->dims, sizeof it.dims);
    memcpy(it.strides, t->strides, sizeof it.strides);
    char qk[80];
    wpk_quote(qk, sizeof qk, s->s, s->slen);
    /* The key names a zip entry under data/: a plain name, nothing else. */
    if (!s->slen || memchr(s->s, '/', s->slen) || memchr(s->s, '\\', s->slen) ||
        (s->slen <= 2 && s->s[0] == '.' && (s->slen == 1 || s->s[1] == '.')))
        return sfail(sc, WPACK_E_INPUT, "tensor '%s': storage key '%s' is not a plain name",
                     sc->path, qk);
    char rest[WPK_ZIP_MAX_NAME + 8];
    if (s->slen + 5 > WPK_ZIP_MAX_NAME)
        return sfail(sc, WPACK_E_INPUT, "tensor '%s': storage key too long", sc->path);
    memcpy(rest, "data/", 5);
    memcpy(rest + 5, s->s, s->slen);
    const wpk_zip_entry *e = member(sc, rest, 5 + s->slen);
    if (!e)
        return sfail(sc, WPACK_E_INPUT,
                     "tensor '%s': storage '%s' is not in the zip (no entry %.*s/data/%s)",
                     sc->path, qk, (int)sc->plen, sc->prefix, qk);
    if (e->method != 0)
        return sfail(sc, WPACK_E_UNSUPPORTED,
                     "tensor '%s': storage '%s' is compressed (method %u); torch.save stores "
                     "storages uncompressed",
                     sc->path, qk, e->method);
    /* torch.load types a storage by its first use and reads every later
     * view of it with that dtype; torch.save never writes one key with two
     * dtypes. Refused: a view under the other dtype would become an alias
     * of a first view with the same shape, changing its dtype silently. */
    uint8_t *first = &sc->entry_dtype[e - sc->zip.e];
    if (*first && *first != tv->dtype)
        return sfail(sc, WPACK_E_INPUT,
                     "tensor '%s': storage '%s' is read as %s here but as %s before (one "
                     "storage, two dtypes)",
                     sc->path, qk, wpack_dtype_name(tv->dtype), wpack_dtype_name(*first));
    *first = (uint8_t)tv->dtype;
    uint64_t sbytes;
    if (!wpk_mul((uint64_t)s->i, it.elem_size, &sbytes) || sbytes != e->size)
        return sfail(sc, WPACK_E_SIZE,
                     "tensor '%s': storage '%s' claims %lld elements of %zu bytes but its entry "
                     "holds %llu bytes",
                     sc->path, qk, (long long)s->i, it.elem_size, (unsigned long long)e->size);
    uint64_t ne = 1, last = t->offset, contig = 1;
    int zero = 0;
    for (unsigned k = 0; k < t->rank; k++) {
        if (t->dims[k] == 0)
            zero = 1;
        else if (!wpk_mul(ne, t->dims[k], &ne))
            return sfail(sc, WPACK_E_OVERFLOW, "tensor '%s': element count overflows", sc->path);
    }
    if (zero)
        ne = 0;
    uint64_t nbytes;
    if (!wpk_mul(ne, it.elem_size, &nbytes))
        return sfail(sc, WPACK_E_OVERFLOW, "tensor '%s': byte size overflows", sc->path);
    int is_contig = 1;
    for (unsigned k = t->rank; k-- > 0;) {
        uint64_t step;
        if (t->dims[k] > 1 && t->strides[k] != contig)
            is_contig = 0;
        if (ne && (!wpk_mul(t->dims[k] - 1, t->strides[k], &step) || !wpk_add(last, step, &last)))
            return sfail(sc, WPACK_E_OVERFLOW, "tensor '%s': view extent overflows", sc->path);
        if (t->dims[k])
            contig *= t->dims[k]; /* bounded by ne, checked above */
    }
    if (ne && last >= (uint64_t)s->i)
        return sfail(sc, WPACK_E_BOUNDS,
                     "tensor '%s': view reaches element %llu of storage '%s' which has %lld",
                     sc->path, (unsigned long long)last, qk, (long long)s->i);
    it.nelems = ne;
    it.nbytes = nbytes;
    it.contiguous = is_contig;
    it.splat = is_splat(t, ne);
    it.storage = sc->buf + e->data_offset;
    it.storage_bytes = e->size;
    it.storage_file_offset = e->data_offset;
    it.storage_crc32 = e->crc32;
    it.storage_checked = &sc->crc_checked[e - sc->zip.e];

    view_rec v = {.key = s->s, .klen = s->slen, .offset = t->offset, .rank = t->rank};
    memcpy(v.dims, t->dims, sizeof v.dims);
    memcpy(v.strides, t->strides, sizeof v.strides);
    const view_rec *rec;
    int rc = view_seen(sc, &v, &rec);
    if (rc)
        return rc;
    if (sc->pass == 1 && !rec && !it.splat) {
        /* what the tensors will take: the plan */
        sc->plan.total_tensors++;
        if (!wpk_add(sc->plan.total_bytes, nbytes, &sc->plan.total_bytes))
            sc->plan.total_bytes = UINT64_MAX;
        if (nbytes > sc->plan.nbytes || !sc->plan_name) {
            free(sc->plan_name);
            if (!(sc->plan_name = strdup(sc->path)))
                return sfail(sc, WPACK_E_NOMEM, "out of memory");
            sc->plan.nbytes = nbytes;
        }
    }
    if (rec && rec->first_visit != sc->visits) {
        torch_item a = {.kind = TORCH_ALIAS, .target = rec->name};
        return leaf(sc, &a, plen);
    }
    return leaf(sc, &it, plen);
}

static int flatten(scan *sc, const pk_value *v, size_t plen, int depth);

/* Append ".component" (or "component" at the top) to the path, then recurse. */
static int child(scan *sc, const char *c, size_t clen, const pk_value *v, size_t plen, int depth)
{
    size_t need = plen + (plen ? 1 : 0) + clen;
    /* The path is a C string: a key "a\0b" named its value 'a' (and "" at
     * the top, the bare tensor's 'tensor'), silently. */
    if (!plen && !clen)
        return sfail(sc, WPACK_E_NAME, "an empty dict key at the top level: no name can be "
                                       "made of it");
    if (memchr(c, 0, clen)) {
        char q[200];
        wpk_quote(q, sizeof q, c, clen);
        return sfail(sc, WPACK_E_NAME, "the dict key '%s'%s%.60s%s holds a NUL byte: no name "
                     "can be made of it", q, plen ? " under '" : "", plen ? sc->path : "",
                     plen ? "'" : "");
    }
    if (need > WPACK_MAX_NAME)
        return sfail(sc, WPACK_E_LIMIT, "a name longer than %d bytes under '%.60s'",
                     WPACK_MAX_NAME, sc->path);
    size_t p = plen;
    if (plen)
        sc->path[p++] = '.';
    memcpy(sc->path + p, c, clen);
    sc->path[need] = 0;
    int rc = flatten(sc, v, need, depth + 1);
    sc->path[plen] = 0;
    return rc;
}

static int flatten(scan *sc, const pk_value *v, size_t plen, int depth)
{
    if (++sc->visits > sc->max_visits)
        return sfail(sc, WPACK_E_LIMIT,
                     "more than %llu values to name (%u per byte of the %zu-byte data.pkl, at "
                     "least %u, at most %u): one value reached through very many paths "
                     "(shared subtrees)?",
                     (unsigned long long)sc->max_visits, TORCH_VISITS_PER_BYTE, sc->pkl_len,
                     TORCH_VISITS_FLOOR, TORCH_MAX_VISITS);
    if (depth > TORCH_MAX_DEPTH)
        return sfail(sc, WPACK_E_LIMIT, "nesting deeper than %d at '%.60s' (a cycle?)",
                     TORCH_MAX_DEPTH, sc->path);
    torch_item it = {0};
    char num[32];
    switch (v->kind) {
    case PK_DICT:
        for (size_t k = 0; k + 1 < v->n; k += 2) {
            const pk_value *key = v->items[k];
            int rc;
            if (key->kind == PK_STR)
                rc = child(sc, key->s, key->slen, v->items[k + 1], plen, depth);
            else if (key->kind == PK_INT) {
                snprintf(num, sizeof num, "%lld", (long long)key->i);
                rc = child(sc, num, strlen(num), v->items[k + 1], plen, depth);
            } else
                rc = sfail(sc, WPACK_E_UNSUPPORTED,
                           "a dict key under '%.60s' is neither a string nor a 64-bit int",
                           sc->path);
            if (rc)
                return rc;
        }
        return WPACK_OK;
    case PK_LIST:
    case PK_TUPLE:
        for (size_t k = 0; k < v->n; k++) {
            snprintf(num, sizeof num, "%zu", k);
            int rc = child(sc, num, strlen(num), v->items[k], plen, depth);
            if (rc)
                return rc;
        }
        return WPACK_OK;
    case PK_TENSOR:
        if (!plen)
            return child(sc, "tensor", 6, v, plen, depth);
        return tensor_item(sc, v, plen);
    case PK_INT:
        it.kind = TORCH_INT;
        it.i = v->i;
        break;
    case PK_BOOL:
        it.kind = TORCH_BOOL;
        it.i = v->i;
        break;
    case PK_FLOAT:
        it.kind = TORCH_FLOAT;
        it.f = v->f;
        break;
    case PK_STR:
        it.kind = memchr(v->s, 0, v->slen) ? TORCH_SKIPPED : TORCH_STRING;
        it.s = it.kind == TORCH_STRING ? v->s : "a string with a NUL byte";
        it.slen = it.kind == TORCH_STRING ? v->slen : strlen(it.s);
        break;
    case PK_BYTES:
    case PK_OPAQUE:
        it.kind = TORCH_SKIPPED;
        it.s = v->kind == PK_BYTES ? "a bytes value" : v->why;
        it.slen = strlen(it.s);
        break;
    case PK_STORAGE:
        if (v->why)
            return sfail(sc, WPACK_E_UNSUPPORTED,
                         "'%.60s' is a bare %s storage, not a tensor (%s tensors are not "
                         "supported)",
                         sc->path, v->why, v->why);
        return sfail(sc, WPACK_E_UNSUPPORTED, "'%.60s' is a bare storage, not a tensor", sc->path);
    default:
        return WPACK_OK; /* None, globals: nothing to keep */
    }
    if (!plen)
        return WPACK_OK; /* a bare scalar as the whole checkpoint */
    return leaf(sc, &it, plen);
}

/* Follow a dotted key through dicts. */
static int select_key(scan *sc, const pk_value *root, const char *key, const pk_value **out)
{
    const pk_value *v = root;
    const char *p = key;
    while (*p) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (v->kind != PK_DICT)
            return sfail(sc, WPACK_E_NOT_FOUND, "--key %s: '%.*s' is not inside a dict", key,
                         (int)n, p);
        const pk_value *found = NULL;
        for (size_t k = 0; k + 1 < v->n && !found; k += 2)
            if (v->items[k]->kind == PK_STR && v->items[k]->slen == n &&
                memcmp(v->items[k]->s, p, n) == 0)
                found = v->items[k + 1];
        if (!found) {
            char keys[300] = "";
            size_t o = 0;
            for (size_t k = 0; k + 1 < v->n && o + 40 < sizeof keys; k += 2)
                if (v->items[k]->kind == PK_STR)
                    o += (size_t)snprintf(keys + o, sizeof keys - o, "%s'%.*s'", o ? ", " : "",
                                          (int)(v->items[k]->slen > 30 ? 30 : v->items[k]->slen),
                                          v->items[k]->s);
            return sfail(sc, WPACK_E_NOT_FOUND, "--key %s: no key '%.*s' (keys: %s)", key, (int)n,
                         p, o ? keys : "none");
        }
        v = found;
        p = dot ? dot + 1 : p + n;
    }
    *out = v;
    return WPACK_OK;
}

static void free_scan(scan *sc)
{
    free(sc->plan_name);
    for (size_t i = 0; i < sc->vcap; i++)
        free(sc->views[i].name);
    free(sc->views);
    free(sc->crc_checked);
    free(sc->entry_dtype);
    wpk_zip_close(&sc->zip);
}

int torch_scan_buffer(const uint8_t *buf, size_t len, const char *key, torch_visit_fn fn,
                      void *user, char *err, size_t errlen)
{
    return torch_scan_buffer_ex(buf, len, key, fn, user, NULL, NULL, err, errlen);
}

int torch_scan_buffer_ex(const uint8_t *buf, size_t len, const char *key, torch_visit_fn fn,
                         void *user, wpk_zip_read_fn read, void *read_ctx, char *err,
                         size_t errlen)
{
    return torch_scan_buffer_pre(buf, len, key, NULL, NULL, fn, user, read, read_ctx, err,
                                 errlen);
}

int torch_scan_buffer_pre(const uint8_t *buf, size_t len, const char *key, torch_visit_fn pre,
                          void *pre_user, torch_visit_fn fn, void *user, wpk_zip_read_fn read,
                          void *read_ctx, char *err, size_t errlen)
{
    scan sc = {.buf = buf, .len = len, .err = err, .errlen = errlen};
    if (errlen)
        err[0] = 0;
    if (torch_is_legacy(buf, len)) {
        wpk_fmt(err, errlen, "torch: %s", TORCH_LEGACY_ADVICE);
        return WPACK_E_UNSUPPORTED;
    }
    char zerr[600];
    int rc = wpk_zip_open_ex(&sc.zip, buf, len, read, read_ctx, zerr, sizeof zerr);
    if (rc) {
        wpk_fmt(err, errlen, "torch: %s", zerr);
        return rc;
    }
    pk_state *ps = NULL;
    pk_value *root;
    if (!(sc.crc_checked = calloc(sc.zip.n ? sc.zip.n : 1, 1)) ||
        !(sc.entry_dtype = calloc(sc.zip.n ? sc.zip.n : 1, 1))) {
        rc = sfail(&sc, WPACK_E_NOMEM, "out of memory");
        goto out;
    }
    if ((rc = find_layout(&sc)))
        goto out;
    const wpk_zip_entry *pkl = member(&sc, "data.pkl", 8);
    if (pkl->method != 0) {
        rc = sfail(&sc, WPACK_E_UNSUPPORTED, "data.pkl is compressed (method %u)", pkl->method);
        goto out;
    }
    const uint8_t *pbytes = buf + pkl->data_offset;
    if (wpk_crc32(0, pbytes, (size_t)pkl->size) != pkl->crc32) {
        rc = sfail(&sc, WPACK_E_CHECKSUM, "data.pkl does not match its CRC-32 (damaged file)");
        goto out;
    }
    char perr_msg[600];
    rc = pk_load(pbytes, (size_t)pkl->size, &ps, &root, perr_msg, sizeof perr_msg);
    if (rc) {
        sfail(&sc, rc, "data.pkl: %s", perr_msg);
        goto out;
    }
    const pk_value *top = root;
    if (key && *key && (rc = select_key(&sc, root, key, &top)))
        goto out;
    /* Budgets by data.pkl's size (see torch_scan.h). */
    sc.pkl_len = (size_t)pkl->size;
    sc.max_visits = (uint64_t)sc.pkl_len * TORCH_VISITS_PER_BYTE + TORCH_VISITS_FLOOR;
    if (sc.max_visits > TORCH_MAX_VISITS)
        sc.max_visits = TORCH_MAX_VISITS;
    sc.max_name_bytes = (uint64_t)sc.pkl_len * TORCH_NAME_BYTES_PER_BYTE + TORCH_NAME_BYTES_FLOOR;
    sc.path[0] = 0;
    sc.pass = 1;
    if ((rc = flatten(&sc, top, 0, 0)))
        goto out;
    sc.plan.kind = TORCH_PLAN;
    sc.plan.name = sc.plan_name ? sc.plan_name : "";
    sc.pass = 2; /* the visits: pre's, then fn's, over the same checked object */
    for (int k = pre ? 0 : 1; k < 2; k++) {
        sc.fn = k ? fn : pre;
        sc.user = k ? user : pre_user;
        sc.visits = 0;
        if ((rc = sc.fn(sc.user, &sc.plan)) || (rc = flatten(&sc, top, 0, 0)))
            goto out;
    }
out:
    pk_free(ps);
    free_scan(&sc);
    return rc;
}

/* ------------------------------------------------------------ streaming */

static void swap_copy(uint8_t *dst, const uint8_t *src, size_t nelems, size_t es)
{
    for (size_t i = 0; i < nelems; i++)
        for (size_t b = 0; b < es; b++)
            dst[i * es + b] = src[i * es + es - 1 - b];
}

int torch_stream_tensor(const torch_item *t, uint8_t *buf, size_t buflen, torch_emit_fn emit,
                        void *user)
{
    const size_t es = t->elem_size;
    const size_t cap = buflen / es; /* elements per piece */
    if (!t->nelems)
        return WPACK_OK;
    if (t->contiguous) {
        const uint8_t *p = t->storage + t->offset * es;
        for (uint64_t left = t->nelems; left;) {
            size_t k = left < cap ? (size_t)left : cap;
            int rc;
            if (t->byteswap && es > 1) {
                swap_copy(buf, p, k, es);
                rc = emit(user, buf, k * es);
            } else {
                rc = emit(user, p, k * es);
            }
            if (rc)
                return rc;
            p += k * es;
            left -= k;
        }
        return WPACK_OK;
    }
    /* Gather: walk the indices in C order with an odometer over all but the
     * last dim; the last dim is a strided run. */
    const unsigned r = t->rank;
    uint64_t idx[WPACK_MAX_RANK] = {0};
    const uint64_t inner = t->dims[r - 1], istride = t->strides[r - 1];
    uint64_t base = t->offset; /* element offset of idx with idx[r-1] = 0 */
    size_t used = 0;
    for (;;) {
        for (uint64_t j = 0; j < inner; j++) {
            const uint8_t *src = t->storage + (base + j * istride) * es;
            if (t->byteswap)
                for (size_t b = 0; b < es; b++)
                    buf[used * es + b] = src[es - 1 - b];
            else
                memcpy(buf + used * es, src, es);
            if (++used == cap) {
                int rc = emit(user, buf, used * es);
                if (rc)
                    return rc;
                used = 0;
            }
        }
        unsigned k = r - 1;
        for (;;) {
            if (k == 0)
                goto done;
            k--;
            idx[k]++;
            base += t->strides[k];
            if (idx[k] < t->dims[k])
                break;
            base -= t->strides[k] * t->dims[k];
            idx[k] = 0;
        }
    }
done:
    return used ? emit(user, buf, used * es) : WPACK_OK;
}
