/* readahead.c - reads that follow a plan (wpack_read_plan: extract,
 * export and verify name the entries they will read, in order) are served
 * from steps fetched ahead: each step takes the next planned ranges up to
 * a budget, merges neighbours (less than RA_GAP apart) into one request and
 * starts them as one batch over the connections; up to RA_LIVE steps are
 * live, so the next ones' requests are out while the caller hashes and
 * writes what the current one brought. Many small steps rather than two
 * large ones (the same bytes in flight): a step is freed, and the next one
 * started, only once the reader is past all of it, so with two steps of
 * 16 MiB the connections idled while the slowest request of a step
 * finished (extract over a 20 ms path with 50 MiB/s per connection: 3.4x
 * curl with 2 x 16 MiB, 4.6x with 8 x 4 MiB; loopback unchanged). A step
 * keeps at least RA_MIN_STEP (a request is never smaller, fetch.c), so
 * small settings get fewer steps, never fewer than two. Without it every entry costs at least one
 * round trip and nothing is in flight between entries: a 4 KiB norm costs
 * as much as an 8 MiB projection on a 20 ms path.
 *
 * Nothing here checks bytes against the index: the reader does (every
 * entry's XXH3 before any byte of it is handed out), and a mismatch calls
 * forget(), which drops the steps so that the re-read goes to the server.
 * The responses themselves are checked as any (fetch.c: 206, the range,
 * the pinned size, ETag and Last-Modified) and retried there.
 * Memory: connections x chunk_size / 2 in all, in equal steps. */
#include <stdlib.h>
#include <string.h>

#include "remote.h"

#define RA_LIVE 8                       /* steps live at most */
#define RA_MIN_STEP ((uint64_t)1 << 20) /* a step's budget, where there is room */
#define RA_GAP ((uint64_t)64 << 10) /* merged: at most this much unasked between ranges */
#define RA_SEARCH 4096              /* planned ranges looked through for a read's start */

typedef struct {
    uint64_t off, len;          /* object bytes */
    uint64_t at;                /* where they are in the step's buffer */
} ra_span;

typedef struct {
    wpk_batch *b;
    uint8_t *buf;
    ra_span *spans;
    size_t nspans;
    size_t plan_i;              /* where it starts in the plan: range, byte */
    uint64_t plan_at;
    uint64_t end;               /* the end of its last planned bytes: a read ending there
                                 * has used it up */
} ra_step;

struct wpk_ra {
    uint64_t *plan;             /* pairs off, len */
    size_t n;
    size_t i;                   /* where the next step starts: range i, its byte at */
    uint64_t at;
    ra_step live[RA_LIVE];      /* oldest first */
    size_t nlive;
    uint64_t budget;            /* bytes per step */
    size_t nmax;                /* steps live at most: 2..RA_LIVE */
    uint8_t *spare[RA_LIVE];    /* buffers of budget bytes from dropped steps: reused, so
                                 * that each step does not fault in fresh pages */
};

static void step_free(wpk_remote *r, struct wpk_ra *a, ra_step *s)
{
    wpk_batch_free(r, s->b); /* first: its transfers write into buf */
    size_t k = 0;
    while (k < RA_LIVE && a->spare[k])
        k++;
    if (k < RA_LIVE)
        a->spare[k] = s->buf;
    else
        free(s->buf);
    free(s->spans);
    memset(s, 0, sizeof *s);
}

static void drop_oldest(wpk_remote *r, struct wpk_ra *a)
{
    step_free(r, a, &a->live[0]);
    memmove(a->live, a->live + 1, (a->nlive - 1) * sizeof *a->live);
    a->nlive--;
    memset(&a->live[a->nlive], 0, sizeof a->live[0]);
}

/* Drop every step; rewind: the next step starts where the oldest did. */
static void drop_all(wpk_remote *r, struct wpk_ra *a, int rewind)
{
    if (rewind && a->nlive) {
        a->i = a->live[0].plan_i;
        a->at = a->live[0].plan_at;
    }
    while (a->nlive)
        drop_oldest(r, a);
}

/* The next planned ranges, up to the budget, as a new step (started). */
static int start_step(wpk_remote *r, struct wpk_ra *a, char *msg, size_t msglen)
{
    ra_step *st = &a->live[a->nlive];
    st->plan_i = a->i;
    st->plan_at = a->at;
    size_t cap = 0;
    uint64_t total = 0;
    while (a->i < a->n && total < a->budget) {
        uint64_t off = a->plan[2 * a->i] + a->at, left = a->plan[2 * a->i + 1] - a->at;
        ra_span *last = st->nspans ? &st->spans[st->nspans - 1] : NULL;
        uint64_t end = last ? last->off + last->len : 0;
        uint64_t take;
        int near = last && off >= end && off - end <= RA_GAP;
        if (near && total + (off - end) >= a->budget)
            break; /* the step ends where its budget does: the next one merges these
                    * neighbours, rather than one request each for what is left */
        if (near) {
            total += off - end; /* the gap rides along: one request, not two */
            take = left < a->budget - total ? left : a->budget - total;
            last->len += off - end + take;
        } else {
            if (st->nspans == cap) {
                cap = cap ? 2 * cap : 16;
                ra_span *v = realloc(st->spans, cap * sizeof *v);
                if (!v)
                    goto nomem;
                st->spans = v;
            }
            take = left < a->budget - total ? left : a->budget - total;
            st->spans[st->nspans++] = (ra_span){off, take, total};
        }
        total += take;
        st->end = off + take;
        a->at += take;
        if (a->at == a->plan[2 * a->i + 1]) {
            a->i++;
            a->at = 0;
        }
    }
    wpk_range *v = st->nspans ? calloc(st->nspans, sizeof *v) : NULL;
    for (size_t k = 0; v && !st->buf && k < RA_LIVE; k++)
        if (a->spare[k]) {
            st->buf = a->spare[k];
            a->spare[k] = NULL;
        }
    if (!v || (!st->buf && !(st->buf = malloc((size_t)a->budget))))
        goto nomem_v;
    for (size_t k = 0; k < st->nspans; k++)
        v[k] = (wpk_range){st->spans[k].off, st->spans[k].len, st->buf + st->spans[k].at};
    int rc = wpk_batch_start(r, v, st->nspans, wpk_remote_piece(r, total), 0, &st->b, msg, msglen);
    free(v);
    if (rc)
        goto fail;
    a->nlive++;
    return WPACK_OK;
nomem_v:
    free(v);
nomem:
    wpk_fmt(msg, msglen, "out of memory for a read-ahead of %llu bytes",
            (unsigned long long)total);
    rc = WPACK_E_NOMEM;
fail: /* no step: the plan resumes where this one would have started */
    a->i = st->plan_i;
    a->at = st->plan_at;
    step_free(r, a, st);
    return rc;
}

/* Keep nmax steps going, their requests sent. Out of memory only
 * leaves fewer steps (none: reads are fetched one by one). */
static void top_up(wpk_remote *r, struct wpk_ra *a)
{
    char msg[200];
    int started = 0;
    while (a->nlive < a->nmax && a->i < a->n && start_step(r, a, msg, sizeof msg) == WPACK_OK)
        started = 1;
    if (started)
        wpk_remote_kick(r);
}

int wpk_ra_busy(const wpk_remote *r)
{
    return r->ra && r->ra->nlive > 0;
}

int wpk_ra_plan(wpk_remote *r, const uint64_t *ranges, size_t n)
{
    struct wpk_ra *a = r->ra;
    if (!a) {
        if (!(a = calloc(1, sizeof *a)))
            return WPACK_E_NOMEM;
        r->ra = a;
    }
    drop_all(r, a, 0);
    free(a->plan);
    a->plan = NULL;
    a->n = a->i = 0;
    a->at = 0;
    uint64_t half = (uint64_t)r->opt.connections * r->opt.chunk_size / 2;
    uint64_t steps = half / RA_MIN_STEP;
    a->nmax = steps < 2 ? 2 : steps > RA_LIVE ? RA_LIVE : (size_t)steps;
    uint64_t b = half / a->nmax;
    a->budget = b < WPK_REMOTE_HEAD ? WPK_REMOTE_HEAD : b;
    if (a->budget > SIZE_MAX)
        return WPACK_E_NOMEM;
    if (!n)
        return WPACK_OK;
    if (n > SIZE_MAX / (2 * sizeof *a->plan) || !(a->plan = malloc(2 * n * sizeof *a->plan)))
        return WPACK_E_NOMEM;
    for (size_t k = 0; k < n; k++) {
        uint64_t off = ranges[2 * k], len = ranges[2 * k + 1];
        /* kept from the open (src_read serves these without a fetch), or empty */
        if (!len || off > r->size || len > r->size - off || off + len <= r->head_len ||
            (r->tail && off >= r->tail_off))
            continue;
        a->plan[2 * a->n] = off;
        a->plan[2 * a->n + 1] = len;
        a->n++;
    }
    return WPACK_OK;
}

/* The live step and span holding byte off, or NULL. */
static ra_span *find(struct wpk_ra *a, uint64_t off, size_t *li)
{
    for (size_t l = 0; l < a->nlive; l++)
        for (size_t k = 0; k < a->live[l].nspans; k++) {
            ra_span *s = &a->live[l].spans[k];
            if (off >= s->off && off - s->off < s->len) {
                *li = l;
                return s;
            }
        }
    return NULL;
}

/* A read starting at off, not in a live step: when the plan holds it a
 * little further on (the reader skipped some), start the steps there. */
static int locate(wpk_remote *r, struct wpk_ra *a, uint64_t off)
{
    size_t from = a->nlive ? a->live[0].plan_i : a->i;
    for (size_t k = from; k < a->n && k - from < RA_SEARCH; k++)
        if (off >= a->plan[2 * k] && off - a->plan[2 * k] < a->plan[2 * k + 1]) {
            drop_all(r, a, 0);
            a->i = k;
            a->at = off - a->plan[2 * k];
            return 1;
        }
    return 0;
}

int wpk_ra_read(wpk_remote *r, uint64_t off, uint8_t *dst, uint64_t n, int *rc, char *msg,
                size_t msglen)
{
    struct wpk_ra *a = r->ra;
    int served = 0;
    if (!a || !a->n)
        return 0;
    *rc = WPACK_OK;
    while (n) {
        size_t li = 0;
        ra_span *s = find(a, off, &li);
        if (!s) {
            if (!locate(r, a, off))
                break;
            top_up(r, a);
            if (!(s = find(a, off, &li)))
                break;
        }
        ra_step *st = &a->live[li];
        uint64_t m = n < s->off + s->len - off ? n : s->off + s->len - off;
        if ((*rc = wpk_batch_wait(r, st->b, off, m, NULL, msg, msglen)))
            break;
        memcpy(dst, st->buf + s->at + (off - s->off), (size_t)m);
        off += m;
        dst += m;
        n -= m;
        served = 1;
        while (li--) /* the reader has moved past the older steps */
            drop_oldest(r, a);
        if (off == a->live[0].end)
            drop_oldest(r, a);
        top_up(r, a);
    }
    if (*rc) { /* the plan stays; its failed part is fetched again if read again */
        drop_all(r, a, 1);
        return 1;
    }
    if (!served)
        return 0;
    if (n) /* beyond the plan */
        *rc = wpk_remote_fetch(r, off, dst, n, 0, NULL, msg, msglen);
    return 1;
}

void wpk_ra_forget(wpk_remote *r, uint64_t off, uint64_t n)
{
    (void)off;
    (void)n;
    if (r->ra)
        drop_all(r, r->ra, 1);
}

void wpk_ra_free(wpk_remote *r)
{
    if (!r->ra)
        return;
    drop_all(r, r->ra, 0);
    for (size_t k = 0; k < RA_LIVE; k++)
        free(r->ra->spare[k]);
    free(r->ra->plan);
    free(r->ra);
    r->ra = NULL;
}
