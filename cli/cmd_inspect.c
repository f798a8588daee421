/* cmd_inspect.c - `wpack inspect`: a table for people, --json for machines. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char help[] =
    "usage: wpack inspect [--json] [--max-output SIZE] ARCHIVE [PREFIX]\n"
    "\n"
    "Lists the archive's tensors (name, dtype, shape, size, offset, checksum,\n"
    "a stats summary), its metadata, name map and activation statistics, and\n"
    "its block dtypes (GGUF's quantized types: name, elements and bytes per\n"
    "block, parameters in hex); a tensor of a block dtype shows its name.\n"
    "Stats show the range over all channels, marked 'per-channel (N)' for\n"
    "per-channel records, and 'K of N finite' when a tensor holds NaN or\n"
    "infinities (stats leave them out). Lists are in natural order\n"
    "('layers.2' before 'layers.10'); the NAME column is as wide as the names\n"
    "(a name over 80 columns gets a line of its own). Control characters in\n"
    "names, values and messages are shown escaped (\\x1b, \\u009b), never sent\n"
    "to the terminal, and so are bidirectional controls (\\u202e); long string\n"
    "values are cut at 256 bytes.\n"
    "PREFIX limits every section to one name or module path and what is under\n"
    "it ('encoder.layers.0' selects 'encoder.layers.0.w', not\n"
    "'encoder.layers.01.w'): tensors, activation stats, metadata keys and the\n"
    "name map (a row shows if its name or its tensor is selected).\n"
    "\n"
    "  --json             one JSON object: format fields, tensors with data\n"
    "                     offsets and lengths, metadata, name map, every stats\n"
    "                     record in full (with the overall range and, for\n"
    "                     weight stats, the element count), block_dtypes\n"
    "                     (code, name, block_elems, block_bytes, params hex);\n"
    "                     strings exact, as JSON escapes; lists in index\n"
    "                     (bytewise) order\n"
    "  --max-output SIZE  allow more --json output than the default cap of\n"
    "                     max(1 GiB, 1000 x the archive size) (K/M/G)\n"
    "ARCHIVE may be an http://, https:// or s3://BUCKET/KEY URL: only the byte\n"
    "ranges needed are fetched and each tensor is checked against its XXH3\n"
    "(README: Archives on object stores; AWS_* and WPACK_REMOTE_* settings).\n"
    CLI_CACHE_HELP;

static const char *kind_name(int kind)
{
    return kind == WPACK_KIND_DATA    ? "data"
           : kind == WPACK_KIND_SPLAT ? "splat"
           : kind == WPACK_KIND_ALIAS ? "alias"
                                      : "external";
}

/* A dtype's name: built in, or the block dtype record's (the name rule holds,
 * but the bytes come from the file: callers escape them). */
static const char *dtype_name_of(const wpack_archive *ar, int dtype)
{
    const char *n = wpack_dtype_name(dtype);
    if (n)
        return n;
    if (dtype >= WPACK_DTYPE_BLOCK_BASE &&
        wpack_block_dtype_at(ar, (uint64_t)(dtype - WPACK_DTYPE_BLOCK_BASE), &n, NULL, NULL,
                             NULL, NULL) == WPACK_OK && n)
        return n;
    return "?";
}

/* The dtype column: escaped, padded to width columns. */
static void put_dtype_text(const wpack_archive *ar, int dtype, size_t width)
{
    const char *n = dtype_name_of(ar, dtype);
    size_t w = cli_text_escape(stdout, n, strlen(n));
    printf("%*s", w < width ? (int)(width - w) : 0, "");
}

/* A parameter blob as hex, cut after 64 bytes in text (JSON gets it whole). */
static void put_hex(const void *p, uint64_t n, uint64_t max)
{
    const unsigned char *b = p;
    for (uint64_t i = 0; i < n && i < max; i++)
        printf("%02x", b[i]);
    if (n > max)
        printf("...");
}

/* The archive's block dtype records (section 6.6), text or JSON. */
static void print_block_dtypes(const wpack_archive *ar, const wpack_info *in, int json)
{
    if (json)
        printf(",\n  \"block_dtypes\": [");
    else if (in->block_dtype_count)
        printf("block dtypes:\n");
    for (uint64_t k = 0; k < in->block_dtype_count; k++) {
        const char *name;
        uint32_t elems, bytes;
        const void *params;
        uint64_t plen;
        if (wpack_block_dtype_at(ar, k, &name, &elems, &bytes, &params, &plen) != WPACK_OK)
            continue;
        unsigned code = (unsigned)(WPACK_DTYPE_BLOCK_BASE + k);
        if (json) {
            printf("%s\n    {\"code\": %u, \"name\": ", k ? "," : "", code);
            cli_json_string(stdout, name, strlen(name));
            printf(", \"block_elems\": %" PRIu32 ", \"block_bytes\": %" PRIu32
                   ", \"params\": \"", elems, bytes);
            put_hex(params, plen, UINT64_MAX);
            printf("\"}");
        } else {
            printf("  %u ", code);
            cli_text_escape(stdout, name, strlen(name));
            printf(": %" PRIu32 " elements in %" PRIu32 " bytes", elems, bytes);
            if (plen) {
                printf(", params ");
                put_hex(params, plen, 64);
            }
            putchar('\n');
        }
    }
    if (json)
        printf("%s]", in->block_dtype_count ? "\n  " : "");
}

/* A splat's fill value as text: a number for the ints and f32/f64, else its
 * bytes in memory order (0x...). */
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
    case WPACK_DTYPE_U64: { uint64_t x; memcpy(&x, p, 8); snprintf(buf, len, "%" PRIu64, x); return; }
    case WPACK_DTYPE_U32: { uint32_t x; memcpy(&x, p, 4); snprintf(buf, len, "%" PRIu32, x); return; }
    case WPACK_DTYPE_U16: { uint16_t x; memcpy(&x, p, 2); snprintf(buf, len, "%u", x); return; }
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

#define NAME_COL_MAX 80  /* a longer name gets a line of its own */
#define SHAPE_COL_MAX 40
#define DTYPE_COL_MAX 24 /* a longer block dtype name overflows its column */
#define TEXT_VALUE_MAX 256 /* bytes of a string value shown in text */

/* Something to list: its name (display order) and its index. */
typedef struct {
    const char *name;
    uint64_t i;
} row;

typedef struct {
    row *v;
    size_t n, cap;
    int oom;
} rows;

static void rows_push(rows *r, const char *name, uint64_t i)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 64;
        row *v = realloc(r->v, cap * sizeof *v);
        if (!v) {
            r->oom = 1;
            return;
        }
        r->v = v;
        r->cap = cap;
    }
    r->v[r->n++] = (row){name, i};
}

static int row_natural(const void *a, const void *b)
{
    return cli_natural_cmp(((const row *)a)->name, ((const row *)b)->name);
}

/* Rows in natural order, for display. */
static void sort_natural(rows *r)
{
    if (r->n > 1)
        qsort(r->v, r->n, sizeof *r->v, row_natural);
}

static int collect_tensor(void *user, const wpack_archive *ar, const wpack_tensor *t)
{
    (void)ar;
    rows_push(user, t->name, t->index);
    return 0;
}

/* Entry i among the selected ones (sorted by index: cli_select's order). */
static int selected(const rows *sel, uint64_t i)
{
    size_t lo = 0, hi = sel->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sel->v[mid].i == i)
            return 1;
        if (sel->v[mid].i < i)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

/* Text: s escaped, then spaces up to width columns. */
static void put_padded(const char *s, size_t n, size_t width)
{
    size_t w = cli_text_escape(stdout, s, n);
    if (w < width)
        printf("%*s", (int)(width - w), "");
}

/* The widest name up to max columns: a wider one gets a line of its own
 * rather than pushing every row out. */
static size_t column_width(const rows *r, size_t min, size_t max)
{
    size_t w = min;
    for (size_t k = 0; k < r->n; k++) {
        size_t x = cli_text_escape(NULL, r->v[k].name, strlen(r->v[k].name));
        if (x > w && x <= max)
            w = x;
    }
    return w;
}

/* The element count a weight record covers (0: not a weight record). */
static uint64_t weight_elements(const wpack_archive *ar, const wpack_stats *s)
{
    wpack_tensor t;
    if (s->kind != WPACK_STATS_WEIGHT || wpack_find(ar, s->key, &t) != WPACK_OK)
        return 0;
    return t.nelems;
}

static void print_stats_json(FILE *f, const wpack_stats *s, uint64_t elements)
{
    fprintf(f, "{\"key\": ");
    cli_json_string(f, s->key, strlen(s->key));
    fprintf(f, ", \"kind\": \"%s\", \"granularity\": \"%s\", \"axis\": %u, \"channels\": %u, "
               "\"count\": %" PRIu64,
            s->kind == WPACK_STATS_WEIGHT ? "weight" : "activation",
            s->granularity == WPACK_GRAN_TENSOR ? "tensor" : "channel", s->axis, s->channels,
            s->count);
    if (elements)
        fprintf(f, ", \"elements\": %" PRIu64 ", \"nonfinite\": %" PRIu64, elements,
                elements > s->count ? elements - s->count : 0);
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
    const double overall[5] = {s->overall_min, s->overall_max, s->overall_absmax, s->overall_mean,
                               s->overall_variance};
    fputs(", \"overall\": {", f);
    for (int k = 0; k < 5; k++) {
        fprintf(f, k ? ", \"%s\": " : "\"%s\": ", fields[k]);
        cli_json_number(f, overall[k]);
    }
    fputc('}', f);
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

/* A stats record's tail shared by the tensor table and the activation list:
 * " per-channel (N)" and the finite count where it says something. */
static void stats_suffix(char *buf, size_t len, const wpack_stats *s, uint64_t elements)
{
    size_t o = 0;
    buf[0] = 0;
    if (s->granularity == WPACK_GRAN_CHANNEL)
        o += (size_t)snprintf(buf, len, " per-channel (%u)", s->channels);
    if (o < len && elements && s->count != elements)
        snprintf(buf + o, len - o, ", %" PRIu64 " of %" PRIu64 " finite", s->count, elements);
    else if (o < len && !elements)
        snprintf(buf + o, len - o, ", n %" PRIu64 " finite", s->count);
}

static void show_tensor_json(const wpack_archive *ar, const wpack_tensor *t, int first)
{
    char shape[256];
    const char *dt = dtype_name_of(ar, t->dtype);
    cli_shape(shape, sizeof shape, t->rank, t->dims);
    printf("%s\n    {\"name\": ", first ? "" : ",");
    cli_json_string(stdout, t->name, t->name_len);
    printf(", \"kind\": \"%s\", \"dtype\": ", kind_name(t->kind));
    cli_json_string(stdout, dt, strlen(dt));
    printf(", \"shape\": %s, \"nbytes\": %" PRIu64, shape, t->nbytes);
    if (t->kind != WPACK_KIND_SPLAT)
        printf(", \"offset\": %" PRIu64 ", \"stored_length\": %" PRIu64, t->offset,
               t->stored_length);
    printf(", \"checksum\": \"%016" PRIx64 "\"", t->checksum);
    if (t->codec == WPACK_CODEC_ZSTD)
        printf(", \"codec\": \"zstd\", \"chunk_size\": %u, \"decoded_checksum\": \"%016" PRIx64
               "\", \"ratio\": %.4f",
               t->chunk_size, t->decoded_checksum,
               t->stored_length ? (double)t->nbytes / (double)t->stored_length : 0.0);
    uint64_t sums = wpack_tensor_chunk_size(ar, t->index);
    if (sums) /* format 1.2: one XXH3 per chunk of this many stored bytes */
        printf(", \"checksum_chunk\": %" PRIu64, sums);
    if (t->kind == WPACK_KIND_EXTERNAL)
        printf(", \"shard\": %" PRIu64, t->alias_target);
    if (t->kind == WPACK_KIND_ALIAS) {
        wpack_tensor target;
        wpack_tensor_at(ar, t->alias_target, &target);
        printf(", \"alias_of\": ");
        cli_json_string(stdout, target.name, target.name_len);
    }
    if (t->fill) {
        char fill[64];
        fill_text(t, fill, sizeof fill);
        printf(", \"fill\": ");
        cli_json_string(stdout, fill, strlen(fill));
    }
    wpack_stats s;
    if (wpack_stats_find(ar, t->name, WPACK_STATS_WEIGHT, &s) == WPACK_OK) {
        printf(", \"stats\": ");
        print_stats_json(stdout, &s, t->nelems);
    }
    printf("}");
}

typedef struct {
    size_t name_w, shape_w, dtype_w;
    uint64_t compressed, stored, logical; /* zstd tensors shown */
} table;

static void show_tensor_text(const wpack_archive *ar, const wpack_tensor *t, table *tb)
{
    char shape[256], size[32], where[64], summary[200] = "";
    cli_shape(shape, sizeof shape, t->rank, t->dims);
    cli_human_size(size, sizeof size, t->nbytes);
    if (t->kind == WPACK_KIND_DATA)
        snprintf(where, sizeof where, "%" PRIu64, t->offset);
    else if (t->kind == WPACK_KIND_SPLAT)
        snprintf(where, sizeof where, "splat");
    else if (t->kind == WPACK_KIND_EXTERNAL)
        snprintf(where, sizeof where, "s%" PRIu64 ":%" PRIu64, t->alias_target, t->offset);
    else
        snprintf(where, sizeof where, "alias");
    wpack_stats s;
    if (t->kind == WPACK_KIND_SPLAT) {
        char fill[64];
        fill_text(t, fill, sizeof fill);
        snprintf(summary, sizeof summary, "fill %s", fill);
    } else if (t->kind != WPACK_KIND_ALIAS &&
               wpack_stats_find(ar, t->name, WPACK_STATS_WEIGHT, &s) == WPACK_OK) {
        char tail[96];
        stats_suffix(tail, sizeof tail, &s, t->nelems);
        snprintf(summary, sizeof summary, "min %.4g max %.4g mean %.4g std %.4g%s", s.overall_min,
                 s.overall_max, s.overall_mean,
                 s.overall_variance > 0 ? sqrt(s.overall_variance) : 0.0, tail);
    }
    size_t w = cli_text_escape(stdout, t->name, t->name_len);
    if (w > tb->name_w) /* over NAME_COL_MAX: the columns go on the next line */
        printf("\n%*s", (int)tb->name_w, "");
    else
        printf("%*s", (int)(tb->name_w - w), "");
    putchar(' ');
    put_dtype_text(ar, t->dtype, tb->dtype_w);
    printf(" %-*s %10s %12s %016" PRIx64 "  %s", (int)tb->shape_w, shape, size, where,
           t->checksum, summary);
    if (t->kind == WPACK_KIND_ALIAS) {
        wpack_tensor target;
        wpack_tensor_at(ar, t->alias_target, &target);
        fputs("= ", stdout);
        cli_text_escape(stdout, target.name, target.name_len);
    }
    putchar('\n');
    if (t->codec == WPACK_CODEC_ZSTD && t->kind == WPACK_KIND_DATA) {
        char stored[32];
        cli_human_size(stored, sizeof stored, t->stored_length);
        tb->compressed++;
        tb->stored += t->stored_length;
        tb->logical += t->nbytes;
        printf("%*s zstd: %s stored for %s, ratio %.2f, %u-byte chunks\n", (int)tb->name_w, "",
               stored, size, t->stored_length ? (double)t->nbytes / (double)t->stored_length : 0.0,
               t->chunk_size);
    }
}

/* A string value in text: escaped, cut after TEXT_VALUE_MAX bytes (at a
 * UTF-8 boundary) with its length said. */
static void put_text_value(const char *s, uint64_t n)
{
    if (n <= TEXT_VALUE_MAX) {
        cli_text_escape(stdout, s, (size_t)n);
        return;
    }
    size_t cut = TEXT_VALUE_MAX;
    while (cut > 0 && ((unsigned char)s[cut] & 0xc0) == 0x80)
        cut--;
    cli_text_escape(stdout, s, cut);
    printf("... (%" PRIu64 " bytes)", n);
}

static void print_meta_value(const wpack_archive *ar, const wpack_meta *m, int json)
{
    switch (m->type) {
    case WPACK_META_STRING:
        if (json)
            cli_json_string(stdout, m->str, (size_t)m->count);
        else
            put_text_value(m->str, m->count);
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

/* Bytes the JSON of metadata record m takes at least: its strings (a value
 * array of 65,536 references to one 2 MiB string is 128 GiB of JSON). */
static uint64_t meta_json_bytes(const wpack_archive *ar, const wpack_meta *m)
{
    if (m->type == WPACK_META_STRING)
        return m->count;
    if (m->type != WPACK_META_ARRAY)
        return 32;
    uint64_t sum = 0;
    for (uint64_t j = 0; j < m->count; j++) {
        wpack_meta e;
        wpack_meta_elem(ar, m, j, &e);
        uint64_t b = m->elem_type == WPACK_META_STRING ? e.count + 4 : 24;
        sum = sum > UINT64_MAX - b ? UINT64_MAX : sum + b;
    }
    return sum;
}

static void print_header(const char *path, const wpack_info *in)
{
    char data[32], index[32];
    cli_human_size(data, sizeof data, in->data_length);
    cli_human_size(index, sizeof index, in->index_length);
    cli_text_escape(stdout, path, strlen(path));
    printf(": wpack format %u.%u%s, alignment %u, generation %" PRIu64 "%s\n", in->format_major,
           in->format_minor,
           in->format_minor >= 2 && (in->optional_features & 1) ? " (chunk checksums)" : "",
           in->alignment, in->generation,
           in->recovered ? " (an interrupted update was ignored)" : "");
    printf("%" PRIu64 " tensors, data %s, index %s, index xxh3 %016" PRIx64 "\n",
           in->entry_count, data, index, in->index_checksum);
}

/* What PREFIX selects, section by section (rows in index order). */
typedef struct {
    rows tensors, meta, names, stats;
} selection;

static int select_all(const wpack_archive *ar, const char *prefix, selection *sel)
{
    memset(sel, 0, sizeof *sel);
    if (cli_select(ar, prefix, collect_tensor, &sel->tensors) < 0)
        return WPACK_E_NOMEM;
    for (uint64_t i = 0; i < wpack_meta_count(ar); i++) {
        wpack_meta m;
        wpack_meta_at(ar, i, &m);
        if (cli_under(prefix, m.key))
            rows_push(&sel->meta, m.key, i);
    }
    for (uint64_t i = 0; i < wpack_namemap_count(ar); i++) {
        const char *other;
        uint64_t e;
        wpack_namemap_at(ar, i, &other, &e);
        if (cli_under(prefix, other) || selected(&sel->tensors, e))
            rows_push(&sel->names, other, i);
    }
    for (uint64_t i = 0; i < wpack_stats_count(ar); i++) {
        wpack_stats s;
        wpack_tensor t;
        wpack_stats_at(ar, i, &s);
        if (cli_under(prefix, s.key) ||
            (s.kind == WPACK_STATS_WEIGHT && wpack_find(ar, s.key, &t) == WPACK_OK &&
             selected(&sel->tensors, t.index)))
            rows_push(&sel->stats, s.key, i);
    }
    return sel->tensors.oom || sel->meta.oom || sel->names.oom || sel->stats.oom ? WPACK_E_NOMEM
                                                                                 : WPACK_OK;
}

/* Name-map record i: its other name, and the entry it names in *t. */
static const char *namemap_row(const wpack_archive *ar, uint64_t i, wpack_tensor *t)
{
    const char *other;
    uint64_t e;
    wpack_namemap_at(ar, i, &other, &e);
    wpack_tensor_at(ar, e, t);
    return other;
}

static void print_json(const wpack_archive *ar, const char *path, const wpack_info *in,
                       const selection *sel)
{
    printf("{\"path\": ");
    cli_json_string(stdout, path, strlen(path));
    printf(", \"format\": \"%u.%u\", \"alignment\": %u, \"generation\": %" PRIu64
           ", \"file_length\": %" PRIu64 ", \"data_offset\": %" PRIu64 ", \"data_length\": %" PRIu64
           ", \"index_offset\": %" PRIu64 ", \"index_length\": %" PRIu64
           ", \"index_checksum\": \"%016" PRIx64 "\", \"recovered\": %s,\n  \"tensors\": [",
           in->format_major, in->format_minor, in->alignment, in->generation, in->file_length,
           in->data_offset, in->data_length, in->index_offset, in->index_length,
           in->index_checksum, in->recovered ? "true" : "false");
    for (size_t k = 0; k < sel->tensors.n; k++) {
        wpack_tensor t;
        wpack_tensor_at(ar, sel->tensors.v[k].i, &t);
        show_tensor_json(ar, &t, k == 0);
    }
    printf("\n  ],\n  \"metadata\": {");
    for (size_t k = 0; k < sel->meta.n; k++) {
        wpack_meta m;
        wpack_meta_at(ar, sel->meta.v[k].i, &m);
        printf(k ? ",\n    " : "\n    ");
        cli_json_string(stdout, m.key, strlen(m.key));
        printf(": ");
        print_meta_value(ar, &m, 1);
    }
    printf("},\n  \"name_map\": {");
    for (size_t k = 0; k < sel->names.n; k++) {
        wpack_tensor t;
        const char *other = namemap_row(ar, sel->names.v[k].i, &t);
        printf(k ? ", " : "");
        cli_json_string(stdout, other, strlen(other));
        printf(": ");
        cli_json_string(stdout, t.name, t.name_len);
    }
    printf("},\n  \"stats\": [");
    for (size_t k = 0; k < sel->stats.n; k++) {
        wpack_stats s;
        wpack_stats_at(ar, sel->stats.v[k].i, &s);
        printf(k ? ",\n    " : "\n    ");
        print_stats_json(stdout, &s, weight_elements(ar, &s));
    }
    printf("]");
    print_block_dtypes(ar, in, 1);
    printf("\n}\n");
}

static void print_text(const wpack_archive *ar, const char *path, const wpack_info *in,
                       const char *prefix, selection *sel)
{
    print_header(path, in);
    for (uint32_t k = 0; k < wpack_shard_count(ar); k++) {
        const char *sp;
        const wpack_archive *sh;
        wpack_info si;
        char sz[32];
        wpack_shard_at(ar, k, &sp, &sh);
        wpack_get_info(sh, &si);
        cli_human_size(sz, sizeof sz, si.data_length);
        printf("shard %u: ", k);
        cli_text_escape(stdout, sp, strlen(sp));
        printf(", %" PRIu64 " tensors, %s, index xxh3 %016" PRIx64 "\n", si.entry_count, sz,
               si.index_checksum);
    }
    print_block_dtypes(ar, in, 0);
    rows *r = &sel->tensors;
    table tb = {column_width(r, 4, NAME_COL_MAX), 5, 8, 0, 0, 0};
    for (size_t k = 0; k < r->n; k++) {
        wpack_tensor t;
        char shape[256];
        wpack_tensor_at(ar, r->v[k].i, &t);
        const char *dn = dtype_name_of(ar, t.dtype);
        size_t dw = cli_text_escape(NULL, dn, strlen(dn));
        if (dw > tb.dtype_w)
            tb.dtype_w = dw > DTYPE_COL_MAX ? DTYPE_COL_MAX : dw;
        cli_shape(shape, sizeof shape, t.rank, t.dims);
        if (strlen(shape) > tb.shape_w)
            tb.shape_w = strlen(shape) > SHAPE_COL_MAX ? SHAPE_COL_MAX : strlen(shape);
    }
    sort_natural(r);
    printf("\n");
    put_padded("NAME", 4, tb.name_w);
    printf(" %-*s %-*s %10s %12s %-16s  %s\n", (int)tb.dtype_w, "DTYPE", (int)tb.shape_w, "SHAPE", "SIZE",
           "OFFSET", "XXH3", "STATS");
    for (size_t k = 0; k < r->n; k++) {
        wpack_tensor t;
        wpack_tensor_at(ar, r->v[k].i, &t);
        show_tensor_text(ar, &t, &tb);
    }
    if (r->n == 0 && *prefix) {
        printf("(no tensor named or under '");
        cli_text_escape(stdout, prefix, strlen(prefix));
        printf("')\n");
    }
    if (tb.compressed) {
        char a[32], b[32];
        cli_human_size(a, sizeof a, tb.stored);
        cli_human_size(b, sizeof b, tb.logical);
        printf("\n%" PRIu64 " zstd tensors: %s stored for %s logical, ratio %.2f\n", tb.compressed,
               a, b, tb.stored ? (double)tb.logical / (double)tb.stored : 0.0);
    }
    sort_natural(&sel->meta);
    for (size_t k = 0; k < sel->meta.n; k++) {
        wpack_meta m;
        wpack_meta_at(ar, sel->meta.v[k].i, &m);
        printf(k ? "  " : "\nmetadata:\n  ");
        cli_text_escape(stdout, m.key, strlen(m.key));
        printf(" = ");
        print_meta_value(ar, &m, 0);
        printf("\n");
    }
    sort_natural(&sel->names);
    for (size_t k = 0; k < sel->names.n; k++) {
        wpack_tensor t;
        const char *other = namemap_row(ar, sel->names.v[k].i, &t);
        printf(k ? "  " : "\nname map:\n  ");
        cli_text_escape(stdout, other, strlen(other));
        printf(" -> ");
        cli_text_escape(stdout, t.name, t.name_len);
        printf("\n");
    }
    /* Weight stats are in the table; the activation records are listed. */
    rows act = {0};
    for (size_t k = 0; k < sel->stats.n; k++) {
        wpack_stats s;
        wpack_stats_at(ar, sel->stats.v[k].i, &s);
        if (s.kind == WPACK_STATS_ACTIVATION)
            rows_push(&act, s.key, sel->stats.v[k].i);
    }
    sort_natural(&act);
    size_t kw = column_width(&act, 1, NAME_COL_MAX);
    for (size_t k = 0; k < act.n; k++) {
        wpack_stats s;
        char tail[96];
        wpack_stats_at(ar, act.v[k].i, &s);
        stats_suffix(tail, sizeof tail, &s, 0);
        printf(k ? "  " : "\nactivation stats:\n  ");
        size_t w = cli_text_escape(stdout, s.key, strlen(s.key));
        if (w > kw)
            printf("\n  %*s", (int)kw, "");
        else
            printf("%*s", (int)(kw - w), "");
        printf(" min %.6g max %.6g absmax %.6g mean %.6g var %.6g%s%s\n", s.overall_min,
               s.overall_max, s.overall_absmax, s.overall_mean, s.overall_variance, tail,
               s.hist_bins ? " +histogram" : "");
    }
    free(act.v);
}

int cmd_inspect(int argc, char **argv)
{
    const char *path = NULL, *prefix = "", *v;
    int json = 0;
    uint64_t max_output = 0;
    for (int i = 1; i < argc;) {
        int r;
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            return CLI_OK;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if ((r = cli_opt_value(argc, argv, &i, "--max-output", &v)) != 0) {
            if (r < 0)
                return CLI_USAGE;
            if (!cli_parse_size(v, &max_output) || !max_output) {
                cli_error("inspect: --max-output '%s' is not a size (e.g. 4G) [%s]", v,
                          wpack_error_name(WPACK_E_INVALID_ARGUMENT));
                return CLI_USAGE;
            }
            continue;
        } else if ((r = cli_remote_opt(argc, argv, &i)) != 0) {
            if (r < 0)
                return CLI_USAGE;
            continue;
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
        i++;
    }
    if (!path) {
        cli_error("inspect: no ARCHIVE given (see wpack inspect --help)");
        return CLI_USAGE;
    }
    wpack_archive *ar;
    if (!(ar = cli_open(path)))
        return CLI_FAIL;
    wpack_info in;
    wpack_get_info(ar, &in);
    selection sel;
    int rc = select_all(ar, prefix, &sel);
    if (rc) {
        cli_error("inspect: out of memory listing %s [%s]", path, wpack_error_name(rc));
    } else if (json) {
        /* Text cuts long values; JSON is exact, so its size is checked first. */
        uint64_t bytes = 0, cap = cli_output_cap(in.file_length, max_output);
        for (size_t k = 0; k < sel.meta.n && bytes <= cap; k++) {
            wpack_meta m;
            wpack_meta_at(ar, sel.meta.v[k].i, &m);
            uint64_t b = meta_json_bytes(ar, &m);
            bytes = bytes > UINT64_MAX - b ? UINT64_MAX : bytes + b;
        }
        if (bytes > cap) {
            char a[32], b[32];
            cli_human_size(a, sizeof a, bytes);
            cli_human_size(b, sizeof b, cap);
            cli_error("inspect: %s: the metadata alone would print over %s of JSON, above the "
                      "output cap of %s (--max-output SIZE raises it) [%s]",
                      path, a, b, wpack_error_name(WPACK_E_TOO_LARGE));
            rc = WPACK_E_TOO_LARGE;
        } else {
            print_json(ar, path, &in, &sel);
        }
    } else {
        print_text(ar, path, &in, prefix, &sel);
    }
    size_t shown = sel.tensors.n + sel.meta.n + sel.names.n + sel.stats.n;
    free(sel.tensors.v);
    free(sel.meta.v);
    free(sel.names.v);
    free(sel.stats.v);
    wpack_close(ar);
    if (rc)
        return CLI_FAIL;
    if (shown == 0 && *prefix) {
        cli_error("no tensor named or under '%s' (nor stats, metadata or name-map entry) [%s]",
                  prefix, wpack_error_name(WPACK_E_NOT_FOUND));
        return CLI_FAIL;
    }
    return CLI_OK;
}
