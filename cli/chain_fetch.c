/* chain_fetch.c - a Linear layer of `wpack run` / `wpack calibrate` from an
 * archive without a mapping (a URL): the dense kernel computes from views,
 * so the layer's entries are fetched (and checked against their XXH3) into
 * memory the chain step owns, then bound like mapped ones. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_chain.h"

/* The entry PREFIX.SUFFIX: 1 found (its bytes fetched when it has no view),
 * 0 absent, or -code. */
static int entry(const wpack_archive *ar, chain_step *s, const char *suffix, wpack_tensor *t,
                 void **buf)
{
    char name[1024];
    snprintf(name, sizeof name, "%s.%s", s->path, suffix);
    if (wpack_find(ar, name, t) != WPACK_OK)
        return 0;
    if (t->data || t->kind == WPACK_KIND_SPLAT || t->codec != WPACK_CODEC_NONE)
        return 1; /* a view, or what the binding refuses by itself */
    if (!(*buf = malloc(t->nbytes ? (size_t)t->nbytes : 1)))
        return -WPACK_E_NOMEM;
    int rc = wpack_read_ex(ar, t->index, 0, *buf, (size_t)t->nbytes, WPACK_READ_VERIFY);
    if (rc)
        return -rc;
    t->data = *buf;
    return 1;
}

int chain_bind(const wpack_archive *ar, chain_step *s, char *err, size_t errlen)
{
    int rc = wpack_linear_bind(ar, s->path, &s->lin, err, errlen);
    if (rc != WPACK_E_NO_VIEW)
        return rc;
    wpack_tensor w, sc, b;
    int hw = entry(ar, s, "weight", &w, &s->fetched[0]);
    int hs = hw > 0 ? entry(ar, s, "weight_scale", &sc, &s->fetched[1]) : 0;
    int hb = hw > 0 && hs >= 0 ? entry(ar, s, "bias", &b, &s->fetched[2]) : 0;
    int bad = hw < 0 ? hw : hs < 0 ? hs : hb < 0 ? hb : 0;
    if (bad) {
        snprintf(err, errlen, "%s", wpack_errmsg(ar));
        return -bad;
    }
    if (hw <= 0)
        return rc; /* the binding's own message stands */
    return wpack_linear_from_tensors(&w, hs > 0 ? &sc : NULL, hb > 0 ? &b : NULL, &s->lin, err,
                                     errlen);
}
