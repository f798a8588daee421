/* rate.c - the rate cap of a remote handle (wpack_remote_options.
 * max_bytes_per_s), shared by all its connections. */
#include <time.h>

#include "remote.h"

/* max_bytes_per_s is one token bucket for all the connections of a
 * handle: each body piece takes its bytes; at or below zero, receiving
 * pauses (curl keeps the piece and hands it again once resumed) until the
 * refill, at the cap's rate, makes it positive. The bucket holds at most
 * an eighth of a second's worth (16 KiB at least): bursts stay short. */
static double burst_of(const wpk_remote *r)
{
    double b = (double)r->opt.max_bytes_per_s / 8;
    return b < 16384 ? 16384 : b;
}

void wpk_rate_refill(wpk_remote *r)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
    if (!r->rate_at_us) {
        r->rate_tokens = burst_of(r);
    } else if (us > r->rate_at_us) {
        r->rate_tokens += (double)(us - r->rate_at_us) * (double)r->opt.max_bytes_per_s / 1e6;
        if (r->rate_tokens > burst_of(r))
            r->rate_tokens = burst_of(r);
    }
    r->rate_at_us = us;
}

int64_t wpk_rate_wait_ms(wpk_remote *r)
{
    wpk_rate_refill(r);
    if (r->rate_tokens > 0)
        return 0;
    return (int64_t)(-r->rate_tokens * 1000 / (double)r->opt.max_bytes_per_s) + 1;
}
