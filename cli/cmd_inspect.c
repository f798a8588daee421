/* cmd_inspect.c - `wpack inspect`: a table for people, --json for machines. */
#include <inttypes.h>
#include <string.h>

#include "cli.h"

static const char help[] =
    "usage: wpack inspect [--json] ARCHIVE [PREFIX]\n"
    "\n"
    "Lists the archive's tensors (name, dtype, shape, size, offset, checksum,\n"
    "a stats summary), its metadata, name map and activation statistics.\n"
    "PREFIX limits the tensors to one name or module path ('encoder.layers.0').\n"
    "\n"
    "  --json   one JSON object: format fields, tensors with data offsets and\n"
    "           lengths, metadata, name map, every stats record in full\n";

static const char *kind_name(int kind)
{
    return kind == WPACK_KIND_DATA    ? "data"
           : kind == WPACK_KIND_SPLAT ? "splat"
           : kind == WPACK_KIND_ALIAS ? "alias"
                                      : "external";
}

static const char *dtype_label(const wpack_archive *ar, int dtype, char *buf, size_t len)
{
    (void)ar;
    const char *n = wpack_dtype_name(dtype);
    if (n)
        return n;
    snprintf(buf, len, "block%d", dtype - WPACK_DTYPE_BLOCK_BASE);
    return buf;
}

/* A splat's fill value as text. */
static void fill_text(const wpack_tensor *t, char *buf, size_t len)
{
    const unsigned char *p = t->fill;
    double v = 0;
    int is_float = 1;
    switch (t->dtype) {
    case WPACK_DTYPE_F64: memcpy(&v, p, 8); break;
    case WPACK_DTYPE_F32: { float f; memcpy(&f, p, 4); v = f; break; }
    case WPACK_DTYPE_I64: { int64_t x; memcpy(&x, p, 8); snprintf(buf, len, "%" PRId64, x); return; }
    case WPACK_DTYPE_I32: { int32_t x; memcpy(&x, p, 4); snprintf(buf, len, "%" PRId32, x); return; }
    case WPACK_DTYPE_I16: { int16_t x; memcpy(&x, p, 2); snprintf(buf, len, "%d", x); return; }
    case WPACK_DTYPE_I8: snprintf(buf, len, "%d", (signed char)p[0]); return;
    case WPACK_DTYPE_U8: case WPACK_DTYPE_BOOL: snprintf(buf, len, "%u", p[0]); return;
    default: is_float = 0;
    }
    if (is_float) {
        snprintf(buf, len, "%g", v);
        return;
    }
    size_t o = 0;
    o += (size_t)snprintf(buf, len, "0x");
    for (size_t i = 0; i < t->fill_size && o + 3 < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%02x", p[i]);
}

typedef struct {
    int json;
    int first;
    uint64_t shown;
    uint64_t compressed, stored, logical; /* zstd tensors shown */
} inspect_state;

static void print_stats_json(FILE *f, const wpack_stats *s)
{
    fprintf(f, "{\"key\": ");
    cli_json_string(f, s->key, strlen(s->key));
    fprintf(f, ", \"kind\": \"%s\", \"granularity\": \"%s\", \"axis\": %u, \"channels\": %u, "
               "\"count\": %" PRIu64,
            s->kind == WPACK_STATS_WEIGHT ? "weight" : "activation",
            s->granularity == WPACK_GRAN_TENSOR ? "tensor" : "channel", s->axis, s->channels,
            s->count);
    static const char *const fields[] = {"min", "max", "absmax", "mean", "variance"};
    for (int k = 0; k < 5; k++) {
        fprintf(f, ", \"%s\": ", fields[k]);
        if (s->granularity == WPACK_GRAN_TENSOR) {
            cli_json_number(f, wpack_stats_value(s, k, 0));
            continue;
        }
        fputc('[', f);
        for (uint32_t c = 0; c < s->channels; c++) {
            if (c)
                fputs(", ", f);
            cli_json_number(f, wpack_stats_value(s, k, c));
        }
        fputc(']', f);
    }
    if (s->hist_bins) {
        fputs(", \"histogram\": {\"edges\": [", f);
        for (uint32_t b = 0; b < s->hist_bins; b++) {
            double lo, hi;
            uint64_t n;
            wpack_stats_bin(s, b, &lo, &hi, &n);
            cli_json_number(f, lo);
            fputs(", ", f);
            if (b + 1 == s->hist_bins)
                cli_json_number(f, hi);
        }
        fputs("], \"counts\": [", f);
        for (uint32_t b = 0; b < s->hist_bins; b++) {
            double lo, hi;
            uint64_t n;
            wpack_stats_bin(s, b, &lo, &hi, &n);
            fprintf(f, b ? ", %" PRIu64 : "%" PRIu64, n);
        }
        fputs("]}", f);
    }
    if (s->percentile_count) {
        fputs(", \"percentiles\": [", f);
        for (uint32_t j = 0; j < s->percentile_count; j++) {
            double q, v;
            wpack_stats_percentile(s, j, &q, &v);
            fputs(j ? ", [" : "[", f);
            cli_json_number(f, q);
            fputs(", ", f);
            cli_json_number(f, v);
            fputc(']', f);
        }
        fputc(']', f);
    }
    fputc('}', f);
}

static int show_tensor(void *user, const wpack_archive *ar, const wpack_tensor *t)
{
    inspect_state *st = user;
    char shape[256], dt[32], sum[32];
    cli_shape(shape, sizeof shape, t->rank, t->dims);
    snprintf(sum, sizeof sum, "%016" PRIx64, t->checksum);
    wpack_stats s;
    int has_stats = wpack_stats_find(ar, t->name, WPACK_STATS_WEIGHT, &s) == WPACK_OK;
    wpack_tensor target;
    if (t->kind == WPACK_KIND_ALIAS)
        wpack_tensor_at(ar, t->alias_target, &target);
    st->shown++;
    if (st->json) {
        printf("%s\n    {\"name\": ", st->first ? "" : ",");
        st->first = 0;
        cli_json_string(stdout, t->name, t->name_len);
        printf(", \"kind\": \"%s\", \"dtype\": \"%s\", \"shape\": %s, \"nbytes\": %" PRIu64,
               kind_name(t->kind), dtype_label(ar, t->dtype, dt, sizeof dt), shape, t->nbytes);
        if (t->kind != WPACK_KIND_SPLAT)
            printf(", \"offset\": %" PRIu64 ", \"stored_length\": %" PRIu64, t->offset,
                   t->stored_length);
        printf(", \"checksum\": \"%s\"", sum);
        if (t->codec == WPACK_CODEC_ZSTD)
            printf(", \"codec\": \"zstd\", \"chunk_size\": %u, \"decoded_checksum\": \"%016" PRIx64
                   "\", \"ratio\": %.4f",
                   t->chunk_size, t->decoded_checksum,
                   t->stored_length ? (double)t->nbytes / (double)t->stored_length : 0.0);
        if (t->kind == WPACK_KIND_EXTERNAL)
            printf(", \"shard\": %" PRIu64, t->alias_target);
        if (t->kind == WPACK_KIND_ALIAS) {
            printf(", \"alias_of\": ");
            cli_json_string(stdout, target.name, target.name_len);
        }
        if (t->fill) {
            char fill[64];
            fill_text(t, fill, sizeof fill);
            printf(", \"fill\": ");
            cli_json_string(stdout, fill, strlen(fill));
        }
        if (has_stats) {
            printf(", \"stats\": ");
            print_stats_json(stdout, &s);
        }
        printf("}");
        return 0;
    }
    char size[32], where[64], summary[160] = "", zline[200] = "";
    cli_human_size(size, sizeof size, t->nbytes);
    if (t->codec == WPACK_CODEC_ZSTD && t->kind == WPACK_KIND_DATA) {
        char stored[32];
        cli_human_size(stored, sizeof stored, t->stored_length);
        st->compressed++;
        st->stored += t->stored_length;
        st->logical += t->nbytes;
        snprintf(zline, sizeof zline, "%-40s zstd: %s stored for %s, ratio %.2f, %u-byte chunks\n",
                 "", stored, size,
                 t->stored_length ? (double)t->nbytes / (double)t->stored_length : 0.0,
                 t->chunk_size);
    }
    if (t->kind == WPACK_KIND_DATA)
        snprintf(where, sizeof where, "%" PRIu64, t->offset);
    else if (t->kind == WPACK_KIND_SPLAT)
        snprintf(where, sizeof where, "splat");
    else if (t->kind == WPACK_KIND_EXTERNAL)
        snprintf(where, sizeof where, "s%" PRIu64 ":%" PRIu64, t->alias_target, t->offset);
    else
        snprintf(where, sizeof where, "alias");
    if (t->kind == WPACK_KIND_SPLAT) {
        char fill[64];
        fill_text(t, fill, sizeof fill);
        snprintf(summary, sizeof summary, "fill %s", fill);
    } else if (t->kind == WPACK_KIND_ALIAS) {
        snprintf(summary, sizeof summary, "= %.140s", target.name);
    } else if (has_stats) {
        snprintf(summary, sizeof summary, "min %.4g max %.4g mean %.4g std %.4g", s.min, s.max,
                 s.mean, s.variance > 0 ? __builtin_sqrt(s.variance) : 0.0);
    }
    printf("%-40s %-8s %-18s %10s %12s %s  %s\n", t->name, dtype_label(ar, t->dtype, dt, sizeof dt),
           shape, size, where, sum, summary);
    fputs(zline, stdout);
    return 0;
}

static void print_meta_value(const wpack_archive *ar, const wpack_meta *m, int json)
{
    switch (m->type) {
    case WPACK_META_STRING:
        if (json)
            cli_json_string(stdout, m->str, (size_t)m->count);
        else
            printf("%s", m->str);
        break;
    case WPACK_META_I64:
        printf("%" PRId64, m->i64);
        break;
    case WPACK_META_F64:
        if (json)
            cli_json_number(stdout, m->f64);
        else
            printf("%.17g", m->f64);
        break;
    case WPACK_META_BOOL:
        printf("%s", m->boolean ? "true" : "false");
        break;
    case WPACK_META_BYTES:
        printf(json ? "{\"bytes\": \"" : "0x");
        for (uint64_t i = 0; i < m->count && i < 64; i++)
            printf("%02x", ((const unsigned char *)m->bytes)[i]);
        printf(json ? "%s\"}" : "%s", m->count > 64 ? "..." : "");
        break;
    case WPACK_META_ARRAY:
        printf("[");
        for (uint64_t j = 0; j < m->count; j++) {
            wpack_meta e;
            wpack_meta_elem(ar, m, j, &e);
            if (j)
                printf(", ");
            if (!json && j >= 16) {
                printf("... %" PRIu64 " more", m->count - j);
                break;
            }
            print_meta_value(ar, &e, json);
        }
        printf("]");
        break;
    }
}

static void print_header(const char *path, const wpack_info *in)
{
    char data[32], index[32];
    cli_human_size(data, sizeof data, in->data_length);
    cli_human_size(index, sizeof index, in->index_length);
    printf("%s: wpack format %u.%u, alignment %u, generation %" PRIu64 "%s\n", path,
           in->format_major, in->format_minor, in->alignment, in->generation,
           in->recovered ? " (an interrupted update was ignored)" : "");
    printf("%" PRIu64 " tensors, data %s, index %s, index xxh3 %016" PRIx64 "\n",
           in->entry_count, data, index, in->index_checksum);
}

int cmd_inspect(int argc, char **argv)
{
    const char *path = NULL, *prefix = "";
    inspect_state st = {0, 1, 0, 0, 0, 0};
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            return CLI_OK;
        } else if (strcmp(argv[i], "--json") == 0) {
            st.json = 1;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("inspect: unknown option '%s'", argv[i]);
            return CLI_USAGE;
        } else if (!path) {
            path = argv[i];
        } else if (!*prefix) {
            prefix = argv[i];
        } else {
            cli_error("inspect: too many arguments");
            return CLI_USAGE;
        }
    }
    if (!path) {
        cli_error("inspect: no ARCHIVE given (see wpack inspect --help)");
        return CLI_USAGE;
    }
    wpack_archive *ar;
    if (!(ar = cli_open(path))) {
        return CLI_FAIL;
    }
    wpack_info in;
    wpack_get_info(ar, &in);
    if (st.json) {
        printf("{\"path\": ");
        cli_json_string(stdout, path, strlen(path));
        printf(", \"format\": \"%u.%u\", \"alignment\": %u, \"generation\": %" PRIu64
               ", \"file_length\": %" PRIu64 ", \"data_offset\": %" PRIu64 ", \"data_length\": %" PRIu64
               ", \"index_offset\": %" PRIu64 ", \"index_length\": %" PRIu64
               ", \"index_checksum\": \"%016" PRIx64 "\", \"recovered\": %s,\n  \"tensors\": [",
               in.format_major, in.format_minor, in.alignment, in.generation, in.file_length,
               in.data_offset, in.data_length, in.index_offset, in.index_length, in.index_checksum,
               in.recovered ? "true" : "false");
    } else {
        print_header(path, &in);
        for (uint32_t k = 0; k < wpack_shard_count(ar); k++) {
            const char *sp;
            const wpack_archive *sh;
            wpack_info si;
            char sz[32];
            wpack_shard_at(ar, k, &sp, &sh);
            wpack_get_info(sh, &si);
            cli_human_size(sz, sizeof sz, si.data_length);
            printf("shard %u: %s, %" PRIu64 " tensors, %s, index xxh3 %016" PRIx64 "\n", k, sp,
                   si.entry_count, sz, si.index_checksum);
        }
        printf("\n");
        printf("%-40s %-8s %-18s %10s %12s %-16s  %s\n", "NAME", "DTYPE", "SHAPE", "SIZE", "OFFSET",
               "XXH3", "STATS");
    }
    int64_t n = cli_select(ar, prefix, show_tensor, &st);
    if (st.json) {
        printf("\n  ],\n  \"metadata\": {");
        for (uint64_t i = 0; i < wpack_meta_count(ar); i++) {
            wpack_meta m;
            wpack_meta_at(ar, i, &m);
            printf(i ? ",\n    " : "\n    ");
            cli_json_string(stdout, m.key, strlen(m.key));
            printf(": ");
            print_meta_value(ar, &m, 1);
        }
        printf("},\n  \"name_map\": {");
        for (uint64_t i = 0; i < wpack_namemap_count(ar); i++) {
            const char *other;
            uint64_t e;
            wpack_tensor t;
            wpack_namemap_at(ar, i, &other, &e);
            wpack_tensor_at(ar, e, &t);
            printf(i ? ", " : "");
            cli_json_string(stdout, other, strlen(other));
            printf(": ");
            cli_json_string(stdout, t.name, t.name_len);
        }
        printf("},\n  \"stats\": [");
        for (uint64_t i = 0; i < wpack_stats_count(ar); i++) {
            wpack_stats s;
            wpack_stats_at(ar, i, &s);
            printf(i ? ",\n    " : "\n    ");
            print_stats_json(stdout, &s);
        }
        printf("]\n}\n");
    } else {
        if (n == 0 && *prefix)
            printf("(no tensor named or under '%s')\n", prefix);
        if (st.compressed) {
            char a[32], b[32];
            cli_human_size(a, sizeof a, st.stored);
            cli_human_size(b, sizeof b, st.logical);
            printf("\n%" PRIu64 " zstd tensors: %s stored for %s logical, ratio %.2f\n",
                   st.compressed, a, b, st.stored ? (double)st.logical / (double)st.stored : 0.0);
        }
        if (wpack_meta_count(ar)) {
            printf("\nmetadata:\n");
            for (uint64_t i = 0; i < wpack_meta_count(ar); i++) {
                wpack_meta m;
                wpack_meta_at(ar, i, &m);
                printf("  %s = ", m.key);
                print_meta_value(ar, &m, 0);
                printf("\n");
            }
        }
        if (wpack_namemap_count(ar)) {
            printf("\nname map:\n");
            for (uint64_t i = 0; i < wpack_namemap_count(ar); i++) {
                const char *other;
                uint64_t e;
                wpack_tensor t;
                wpack_namemap_at(ar, i, &other, &e);
                wpack_tensor_at(ar, e, &t);
                printf("  %s -> %s\n", other, t.name);
            }
        }
        int header = 0;
        for (uint64_t i = 0; i < wpack_stats_count(ar); i++) {
            wpack_stats s;
            wpack_stats_at(ar, i, &s);
            if (s.kind != WPACK_STATS_ACTIVATION)
                continue;
            if (!header++)
                printf("\nactivation stats:\n");
            printf("  %-30s min %.6g max %.6g absmax %.6g mean %.6g var %.6g n %" PRIu64 "%s\n",
                   s.key, s.min, s.max, s.absmax, s.mean, s.variance, s.count,
                   s.hist_bins ? " +histogram" : "");
        }
    }
    wpack_close(ar);
    if (n == 0 && *prefix) {
        if (!st.json)
            cli_error("no tensor named or under '%s'", prefix);
        return CLI_FAIL;
    }
    return CLI_OK;
}
