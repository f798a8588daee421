/*
 * bench_index.c - the 1,000,000-entry index benchmark (issue 2, section 5).
 *
 * Builds an archive of N entries with the writer API (MoE-style dotted names,
 * half small f32 data tensors at alignment 64, half splats), then measures in
 * this one process, each figure next to a peer doing the least work that
 * could give the same answer:
 *   create                  vs  qsort the names + write the file's bytes + fsync
 *   open + index validation vs  pread + XXH3 of the index bytes (the floor)
 *                               and mmap + XXH3 (the reader's access pattern)
 *   RSS growth at open      vs  the index size (wpack_info.index_length)
 *   wpack_find              vs  bsearch() + strcmp over a sorted char *[]
 *   wpack_prefix_range      vs  two binary searches over the same char *[]
 *
 * usage: bench_index ARCHIVE_PATH [ENTRIES]   (the archive is removed at exit
 * unless WPACK_BENCH_KEEP=1). Not a test: it never fails on a slow figure,
 * only on a wrong answer (exit 1).
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "wpack.h"

#define OPEN_RUNS 9
#define LOOKUP_RUNS 3
#define PREFIX_QUERIES 20000

/* Goals from issue 2, section 5. */
#define GOAL_OPEN_MS 100.0
#define GOAL_LOOKUP_NS 2000.0
/* "Memory about the index size": RSS growth at most 1.25 x the index, or at
 * most 1.1 x what merely mapping and hashing the index grows it by (the kernel
 * maps whole page-cache folios, so small archives map more than they touch). */
#define GOAL_RSS_FACTOR 1.25
#define GOAL_RSS_PEER_FACTOR 1.1

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "bench_index: %s: %s\n", what, msg);
    exit(1);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Resident and file-backed resident bytes, from /proc/self/statm. */
static void rss(uint64_t *resident, uint64_t *file_backed)
{
    unsigned long size = 0, res = 0, shared = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%lu %lu %lu", &size, &res, &shared) != 3)
        die("/proc/self/statm", "cannot read");
    fclose(f);
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    *resident = res * page;
    *file_backed = shared * page;
}

/* ---- the model: a mixture-of-experts decoder, layer after layer ---- */

#define EXPERTS 256
typedef struct {
    const char *suffix;
    int data; /* 1: small f32 data tensor; 0: splat */
} part;
static const part layer_parts[] = {
    {"input_layernorm.weight", 1},         {"post_attention_layernorm.weight", 1},
    {"self_attn.q_proj.weight", 0},        {"self_attn.k_proj.weight", 0},
    {"self_attn.v_proj.weight", 0},        {"self_attn.o_proj.weight", 0},
    {"self_attn.q_norm.weight", 1},        {"self_attn.k_norm.weight", 1},
    {"mlp.gate.weight", 0},                {"mlp.gate.e_score_correction_bias", 1},
};
static const part expert_parts[] = {
    {"gate_proj.weight", 0}, {"gate_proj.weight_scale_inv", 1},
    {"up_proj.weight", 0},   {"up_proj.weight_scale_inv", 1},
    {"down_proj.weight", 0}, {"down_proj.weight_scale_inv", 1},
};
#define NLAYER_PARTS (sizeof layer_parts / sizeof layer_parts[0])
#define NEXPERT_PARTS (sizeof expert_parts / sizeof expert_parts[0])
#define PER_LAYER (NLAYER_PARTS + EXPERTS * NEXPERT_PARTS)

/* Entry k of the model: its name into buf, and whether it holds data. */
static int entry_name(uint64_t k, char *buf, size_t cap)
{
    uint64_t layer = k / PER_LAYER, j = k % PER_LAYER;
    if (j < NLAYER_PARTS) {
        snprintf(buf, cap, "model.layers.%llu.%s", (unsigned long long)layer,
                 layer_parts[j].suffix);
        return layer_parts[j].data;
    }
    j -= NLAYER_PARTS;
    snprintf(buf, cap, "model.layers.%llu.mlp.experts.%llu.%s", (unsigned long long)layer,
             (unsigned long long)(j / NEXPERT_PARTS), expert_parts[j % NEXPERT_PARTS].suffix);
    return expert_parts[j % NEXPERT_PARTS].data;
}

static int cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ---- create ---- */

static double create_archive(const char *path, uint64_t n, char **names, uint64_t *data_entries)
{
    wpack_writer_options opt;
    wpack_writer_options_init(&opt); /* weight stats on, as `wpack create` does */
    opt.alignment = 64;
    wpack_writer *w;
    double t0 = now_s();
    if (wpack_writer_open(&w, path, &opt) != WPACK_OK)
        die(path, wpack_writer_errmsg(w));
    float vals[32];
    uint64_t small_dims[1] = {32};
    uint64_t attn_dims[2] = {4096, 7168}, expert_dims[2] = {2048, 7168};
    uint16_t bf16_zero = 0;
    uint8_t f8_fill = 0x38; /* 1.0 in f8e4m3fn */
    *data_entries = 0;
    for (uint64_t k = 0; k < n; k++) {
        int rc;
        if (entry_name(k, names[k], 64)) {
            for (int v = 0; v < 32; v++)
                vals[v] = (float)((int64_t)(rng() >> 40) - (1 << 23)) / (float)(1 << 23);
            rc = wpack_writer_add_tensor(w, names[k], WPACK_DTYPE_F32, 1, small_dims, vals,
                                         sizeof vals);
            ++*data_entries;
        } else if (strstr(names[k], "experts")) {
            rc = wpack_writer_add_splat(w, names[k], WPACK_DTYPE_F8E4M3FN, 2, expert_dims,
                                        &f8_fill, 1);
        } else {
            rc = wpack_writer_add_splat(w, names[k], WPACK_DTYPE_BF16, 2, attn_dims, &bf16_zero,
                                        2);
        }
        if (rc != WPACK_OK)
            die(names[k], wpack_writer_errmsg(w));
    }
    char err[600];
    if (wpack_writer_finish(w, err, sizeof err) != WPACK_OK)
        die(path, err);
    return now_s() - t0;
}

/* Peer of create: sort the names, write as many bytes as the archive has, fsync. */
static double create_peer(const char *path, char **sorted, uint64_t n, uint64_t file_bytes)
{
    size_t chunk = 1u << 20;
    char *buf = calloc(1, chunk);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.peer", path);
    double t0 = now_s();
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_cstr);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || !buf)
        die(tmp, "cannot create");
    for (uint64_t done = 0; done < file_bytes;) {
        size_t k = file_bytes - done < chunk ? (size_t)(file_bytes - done) : chunk;
        if (write(fd, buf, k) != (ssize_t)k)
            die(tmp, "write failed");
        done += k;
    }
    if (fsync(fd) != 0)
        die(tmp, "fsync failed");
    close(fd);
    double t = now_s() - t0;
    unlink(tmp);
    free(buf);
    return t;
}

/* ---- open ---- */

/* The floor: read the index bytes once and hash them. */
static double read_hash_index(const char *path, uint64_t off, uint64_t len, uint64_t want)
{
    double t0 = now_s();
    int fd = open(path, O_RDONLY);
    uint8_t *buf = malloc((size_t)len);
    if (fd < 0 || !buf)
        die(path, "cannot open for the read peer");
    for (uint64_t done = 0; done < len;) {
        ssize_t k = pread(fd, buf + done, (size_t)(len - done), (off_t)(off + done));
        if (k <= 0)
            die(path, "pread failed");
        done += (uint64_t)k;
    }
    uint64_t h = XXH3_64bits(buf, (size_t)len);
    close(fd);
    free(buf);
    double t = now_s() - t0;
    if (h != want)
        die(path, "read peer: index hash differs from wpack_info.index_checksum");
    return t;
}

/* The same with mmap, the reader's way of getting at the bytes; it also reads
 * the superblock and trailer, so *grown is the least RSS growth an mmap
 * reader can have. */
static double mmap_hash_index(const char *path, uint64_t off, uint64_t len, uint64_t file_len,
                              uint64_t want, double *grown)
{
    uint64_t res0, file0, res1, file1;
    rss(&res0, &file0);
    double t0 = now_s();
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        die(path, "cannot open for the mmap peer");
    uint8_t *m = mmap(NULL, (size_t)file_len, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        die(path, "mmap failed");
    close(fd);
    uint64_t h = XXH3_64bits(m + off, (size_t)len);
    volatile uint8_t ends = m[0] ^ m[file_len - 1]; /* superblock and trailer pages */
    (void)ends;
    double t = now_s() - t0;
    rss(&res1, &file1);
    *grown = (double)res1 - (double)res0;
    munmap(m, (size_t)file_len);
    if (h != want)
        die(path, "mmap peer: index hash differs from wpack_info.index_checksum");
    return t;
}

/* ---- lookups ---- */

static double find_pass(const wpack_archive *ar, char **queries, uint64_t n)
{
    uint64_t sum = 0, bad = 0;
    wpack_tensor t;
    double t0 = now_s();
    for (uint64_t q = 0; q < n; q++) {
        if (wpack_find(ar, queries[q], &t) != WPACK_OK)
            bad++;
        sum += t.index;
    }
    double el = now_s() - t0;
    if (bad || sum != n * (n - 1) / 2)
        die("wpack_find", "wrong answers");
    return el;
}

static double bsearch_pass(char **sorted, char **queries, uint64_t n)
{
    uint64_t sum = 0, bad = 0;
    double t0 = now_s();
    for (uint64_t q = 0; q < n; q++) {
        char **hit = bsearch(&queries[q], sorted, (size_t)n, sizeof *sorted, cmp_cstr);
        if (!hit)
            bad++;
        else
            sum += (uint64_t)(hit - sorted);
    }
    double el = now_s() - t0;
    if (bad || sum != n * (n - 1) / 2)
        die("bsearch peer", "wrong answers");
    return el;
}

/* Peer of wpack_prefix_range: lower bound of prefix, then the end of its run. */
static void peer_prefix(char **sorted, uint64_t n, const char *prefix, uint64_t *first,
                        uint64_t *count)
{
    size_t plen = strlen(prefix);
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (strcmp(sorted[mid], prefix) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint64_t a = lo, b = n;
    while (a < b) {
        uint64_t mid = a + (b - a) / 2;
        if (strncmp(sorted[mid], prefix, plen) == 0)
            a = mid + 1;
        else
            b = mid;
    }
    *first = lo;
    *count = a - lo;
}

static const char *verdict(int ok)
{
    return ok ? "PASS" : "MISS";
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: bench_index ARCHIVE_PATH [ENTRIES]\n");
        return 2;
    }
    const char *path = argv[1];
    uint64_t n = argc > 2 ? strtoull(argv[2], NULL, 10) : 1000000;
    if (n < PER_LAYER) {
        fprintf(stderr, "bench_index: at least %zu entries\n", (size_t)PER_LAYER);
        return 2;
    }
    uint64_t layers = (n + PER_LAYER - 1) / PER_LAYER;

    /* Names live in one pool, in the order the model adds them. */
    char *pool = malloc((size_t)n * 64);
    char **names = malloc((size_t)n * sizeof *names);
    char **sorted = malloc((size_t)n * sizeof *sorted);
    char **queries = malloc((size_t)n * sizeof *queries);
    if (!pool || !names || !sorted || !queries)
        die("setup", "out of memory");
    for (uint64_t k = 0; k < n; k++)
        names[k] = pool + 64 * k;

    printf("== bench_index: %llu entries, %llu layers x %zu (MoE, %d experts), alignment 64\n",
           (unsigned long long)n, (unsigned long long)layers, (size_t)PER_LAYER, EXPERTS);

    /* -- create -- */
    struct rusage ru1;
    uint64_t data_entries;
    double t_create = create_archive(path, n, names, &data_entries);
    getrusage(RUSAGE_SELF, &ru1);
    uint64_t name_bytes = 0;
    for (uint64_t k = 0; k < n; k++) {
        name_bytes += strlen(names[k]);
        sorted[k] = names[k];
    }

    wpack_archive *ar;
    if (wpack_open_file(&ar, path, 0) != WPACK_OK)
        die(path, wpack_errmsg(ar));
    wpack_info info;
    wpack_get_info(ar, &info);
    wpack_close(ar);
    double t_create_peer = create_peer(path, sorted, n, info.file_length);

    printf("archive: %.1f MiB file, index %.1f MiB (%llu entries: %llu data, %llu splat; "
           "%llu weight-stats records), names %.1f bytes on average\n",
           info.file_length / 1048576.0, info.index_length / 1048576.0,
           (unsigned long long)info.entry_count, (unsigned long long)data_entries,
           (unsigned long long)(info.entry_count - data_entries),
           (unsigned long long)info.stats_count, (double)name_bytes / (double)n);
    printf("create   : %8.3f s   peer (qsort names + write %.0f MiB + fsync) %.3f s   "
           "ratio %.2fx   (max RSS of the process %.0f MiB)\n",
           t_create, info.file_length / 1048576.0, t_create_peer, t_create / t_create_peer,
           ru1.ru_maxrss / 1024.0);

    /* -- open: alternate the reader with its two peers, OPEN_RUNS each -- */
    double t_open[OPEN_RUNS], t_read[OPEN_RUNS], t_map[OPEN_RUNS];
    double d_res[OPEN_RUNS], d_file[OPEN_RUNS], d_map[OPEN_RUNS];
    for (int r = 0; r < OPEN_RUNS; r++) {
        uint64_t res0, file0, res1, file1;
        rss(&res0, &file0);
        double t0 = now_s();
        int rc = wpack_open_file(&ar, path, 0);
        t_open[r] = now_s() - t0;
        rss(&res1, &file1);
        if (rc != WPACK_OK)
            die(path, wpack_errmsg(ar));
        wpack_close(ar);
        d_res[r] = (double)res1 - (double)res0;
        d_file[r] = (double)file1 - (double)file0;
        t_read[r] = read_hash_index(path, info.index_offset, info.index_length, info.index_checksum);
        t_map[r] = mmap_hash_index(path, info.index_offset, info.index_length, info.file_length,
                                   info.index_checksum, &d_map[r]);
    }
    double m_open = median(t_open, OPEN_RUNS), m_read = median(t_read, OPEN_RUNS);
    double m_map = median(t_map, OPEN_RUNS);
    double m_res = median(d_res, OPEN_RUNS), m_file = median(d_file, OPEN_RUNS);
    double m_dmap = median(d_map, OPEN_RUNS);
    double index_bytes = (double)info.index_length;
    printf("open     : %8.2f ms  (median of %d; wpack_open_file = superblock, trailer, whole index)\n",
           m_open * 1e3, OPEN_RUNS);
    printf("  peer pread+XXH3 of the index  %7.2f ms   ratio open/peer %.2fx\n", m_read * 1e3,
           m_open / m_read);
    printf("  peer mmap+XXH3 of the index   %7.2f ms   ratio open/peer %.2fx\n", m_map * 1e3,
           m_open / m_map);
    printf("  RSS growth at open %.1f MiB (file-backed %.1f MiB, anonymous %.1f MiB) = %.2fx "
           "the index (%.1f MiB)\n",
           m_res / 1048576.0, m_file / 1048576.0, (m_res - m_file) / 1048576.0,
           m_res / index_bytes, index_bytes / 1048576.0);
    printf("  peer mmap+XXH3 grows RSS %.1f MiB (the kernel maps whole page-cache folios "
           "around each fault)   ratio %.2fx\n",
           m_dmap / 1048576.0, m_res / m_dmap);

    /* -- lookups: every name once, in random order; alternate with the peer -- */
    if (wpack_open_file(&ar, path, 0) != WPACK_OK)
        die(path, wpack_errmsg(ar));
    for (uint64_t k = 0; k < n; k++)
        queries[k] = sorted[k];
    for (uint64_t k = n - 1; k > 0; k--) {
        uint64_t j = rng() % (k + 1);
        char *t = queries[k];
        queries[k] = queries[j];
        queries[j] = t;
    }
    double t_find[LOOKUP_RUNS], t_bs[LOOKUP_RUNS];
    for (int r = 0; r < LOOKUP_RUNS; r++) {
        t_find[r] = find_pass(ar, queries, n);
        t_bs[r] = bsearch_pass(sorted, queries, n);
    }
    double ns_find = median(t_find, LOOKUP_RUNS) * 1e9 / (double)n;
    double ns_bs = median(t_bs, LOOKUP_RUNS) * 1e9 / (double)n;
    printf("find     : %8.0f ns per wpack_find (%llu random names, median of %d passes)\n",
           ns_find, (unsigned long long)n, LOOKUP_RUNS);
    printf("  peer bsearch+strcmp over a sorted char *[]  %.0f ns   ratio find/peer %.2fx\n",
           ns_bs, ns_find / ns_bs);

    /* -- prefix ranges: a whole layer, or one expert of a layer -- */
    char (*pq)[64] = malloc(PREFIX_QUERIES * sizeof *pq);
    uint64_t full_layers = n / PER_LAYER, got = 0, want = 0;
    if (!pq)
        die("setup", "out of memory");
    for (int q = 0; q < PREFIX_QUERIES; q++) {
        unsigned long long l = rng() % full_layers;
        if (q % 2)
            snprintf(pq[q], 64, "model.layers.%llu.", l);
        else
            snprintf(pq[q], 64, "model.layers.%llu.mlp.experts.%llu.", l,
                     (unsigned long long)(rng() % EXPERTS));
        want += q % 2 ? PER_LAYER : NEXPERT_PARTS;
    }
    double t0 = now_s();
    for (int q = 0; q < PREFIX_QUERIES; q++) {
        uint64_t first, count;
        if (wpack_prefix_range(ar, pq[q], &first, &count) == WPACK_OK)
            got += count;
    }
    double t_pre = now_s() - t0;
    uint64_t got_peer = 0;
    t0 = now_s();
    for (int q = 0; q < PREFIX_QUERIES; q++) {
        uint64_t first, count;
        peer_prefix(sorted, n, pq[q], &first, &count);
        got_peer += count;
    }
    double t_pre_peer = now_s() - t0;
    if (got != want || got_peer != want)
        die("wpack_prefix_range", "wrong entry counts");
    double ns_pre = t_pre * 1e9 / PREFIX_QUERIES, ns_pre_peer = t_pre_peer * 1e9 / PREFIX_QUERIES;
    printf("prefix   : %8.0f ns per wpack_prefix_range (\"model.layers.L.\" = %zu entries, "
           "\"model.layers.L.mlp.experts.E.\" = %zu)\n",
           ns_pre, (size_t)PER_LAYER, (size_t)NEXPERT_PARTS);
    printf("  peer lower bound + run end over the sorted char *[]  %.0f ns   ratio %.2fx\n",
           ns_pre_peer, ns_pre / ns_pre_peer);
    wpack_close(ar);

    printf("goal open + index validation under 100 ms : %s (%.1f ms)\n",
           verdict(m_open * 1e3 < GOAL_OPEN_MS), m_open * 1e3);
    printf("goal memory about the index size          : %s (%.2fx the index, %.2fx the mmap peer; "
           "PASS at <= %.2fx or <= %.2fx)\n",
           verdict(m_res <= GOAL_RSS_FACTOR * index_bytes || m_res <= GOAL_RSS_PEER_FACTOR * m_dmap),
           m_res / index_bytes, m_res / m_dmap, GOAL_RSS_FACTOR, GOAL_RSS_PEER_FACTOR);
    printf("goal lookup by name under 2 us            : %s (%.0f ns)\n",
           verdict(ns_find < GOAL_LOOKUP_NS), ns_find);

    const char *keep = getenv("WPACK_BENCH_KEEP");
    if (!keep || strcmp(keep, "1") != 0)
        unlink(path);
    free(pq);
    free(queries);
    free(sorted);
    free(names);
    free(pool);
    return 0;
}
