/* compress_opts.c - the zstd and chunk-checksum options shared by create and
 * convert. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cli_compress_option(const char *opt, const char *value, wpack_writer_options *o)
{
    uint64_t n;
    if (strncmp(opt, "--compress-min", 14) == 0) {
        if (!cli_parse_size(value, &n)) {
            cli_error("--compress-min %s: want a byte count (K/M/G suffixes)", value);
            return 0;
        }
        o->compress_min = n;
    } else if (strncmp(opt, "--chunk-size", 12) == 0) {
        if (!cli_parse_size(value, &n) || n < WPACK_MIN_CHUNK || n > WPACK_MAX_CHUNK ||
            (n & (n - 1))) {
            cli_error("--chunk-size %s: want a power of two from 4K to 64M (readers refuse bigger "
                      "chunks) [%s]", value, wpack_error_name(n > WPACK_MAX_CHUNK ? WPACK_E_LIMIT
                                                                      : WPACK_E_INVALID_ARGUMENT));
            return 0;
        }
        o->compress_chunk = (uint32_t)n;
    } else if (strncmp(opt, "--chunk-sums", 12) == 0) {
        if (strcmp(value, "off") == 0 || strcmp(value, "0") == 0) {
            o->chunk_sums = 0;
        } else if (!cli_parse_size(value, &n) || n < WPACK_MIN_CHUNK || n > WPACK_MAX_CHUNK ||
                   (n & (n - 1))) {
            cli_error("--chunk-sums %s: want off, or a power of two from 4K to 64M [%s]", value,
                      wpack_error_name(WPACK_E_INVALID_ARGUMENT));
            return 0;
        } else {
            o->chunk_sums = n;
        }
    } else if (strncmp(opt, "--compress-saving", 17) == 0) {
        if (!cli_parse_size(value, &n) || n > 100) {
            cli_error("--compress-saving %s: want a percentage 0..100", value);
            return 0;
        }
        o->compress_min_saving = (uint32_t)n;
    } else {
        /* --compress zstd[:LEVEL] */
        if (strncmp(value, "zstd", 4) != 0 || (value[4] && value[4] != ':')) {
            cli_error("--compress %s: the codec is zstd (zstd or zstd:LEVEL)", value);
            return 0;
        }
        long level = 3;
        if (value[4]) {
            char *end;
            level = strtol(value + 5, &end, 10);
            if (!value[5] || *end || level == 0 || level < -7 || level > 22) {
                cli_error("--compress %s: level from 1 to 22 (or -7..-1 for the fast levels)", value);
                return 0;
            }
        }
        o->compress_level = (int)level;
    }
    return 1;
}
