/*
 * fuzz_shards.c - sharded sets (reader/shards.c): a manifest archive and the
 * shard archives it names, written to files and opened with wpack_open_file.
 *
 * The input is the manifest, then each shard preceded by FUZZ_SHARD_SEP (at most
 * MAX_SHARDS shards). The mutator changes every part freely; what it cannot
 * forge, and an attacker can compute, is fixed before the files are written:
 *   1. each shard's checksums (fix_checksums.h);
 *   2. in the manifest, "wpack.shard_lengths"[k] and
 *      "wpack.shard_index_xxh3"[k] become shard k's file_length and index
 *      checksum, and each external entry's checksum that of the data entry
 *      of the same name in its shard;
 *   3. then the manifest's own checksums.
 * Shard k is written under the k-th name in the manifest's "wpack.shards"
 * (when that is a plain file name of at most 64 bytes) in a directory of
 * this process under fuzz_tmpdir(), then the manifest as "set.wpack" (a
 * shard named "set.wpack" is so replaced by the manifest itself: a shard
 * that is a sharded set). A shard beyond the names, or a name without a
 * shard, is simply missing.
 *
 * When the set opens, every entry is walked (an external entry's view must
 * be the view of its shard's entry, and read back the same through
 * wpack_read), then wpack_verify_all, and a second open with
 * WPACK_OPEN_VERIFY must agree with it.
 */
#include <sys/stat.h>
#include <unistd.h>

#include "bytes.h"
#include "fix_checksums.h"
#include "fuzz.h"
#include "layout.h"
#include "wpack.h"

enum { MAX_SHARDS = 8, MAX_NAME = 64 };

static char dir[4096], manifest_path[4200];
static char written[MAX_SHARDS + 1][4200];
static int nwritten;

static void remove_files(void)
{
    for (int k = 0; k < nwritten; k++)
        unlink(written[k]);
    nwritten = 0;
}

static void remove_dir(void)
{
    remove_files();
    if (dir[0])
        rmdir(dir);
}

/* Write dir/name (again, when two parts have the same name); its path. */
static const char *write_part(const char *name, const uint8_t *p, size_t n)
{
    char path[sizeof written[0]];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int k = 0;
    while (k < nwritten && strcmp(written[k], path) != 0)
        k++;
    if (k == nwritten)
        memcpy(written[nwritten++], path, sizeof path);
    FILE *f = fopen(path, "wb");
    FUZZ_ASSERT(f && fwrite(p, 1, n, f) == n && fclose(f) == 0, "cannot write %s", path);
    return written[k];
}

/* --------------------------------------------- the manifest's raw bytes */

/* Section k of the index the superblock of b points to; NULL if outside. */
static uint8_t *section(uint8_t *b, size_t len, int k, uint64_t *n)
{
    if (len < 2 * WPK_HEADER_SIZE)
        return NULL;
    uint64_t ioff = wpk_ld64(b + WPK_H_INDEX_OFFSET_OFF), ilen = wpk_ld64(b + WPK_H_INDEX_LENGTH_OFF);
    if (!fits(ioff, ilen, len) || ilen < WPK_INDEX_HEADER_SIZE)
        return NULL;
    uint8_t *ix = b + ioff;
    uint64_t so = wpk_ld64(ix + WPK_I_SECTIONS_OFF + 16 * k);
    *n = wpk_ld64(ix + WPK_I_SECTIONS_OFF + 16 * k + 8);
    return fits(so, *n, ilen) ? ix + so : NULL;
}

/* The first (up to MAX_SHARDS) elements of metadata array key of element
 * type elem (width bytes each) in aux; NULL when absent or outside. */
static uint8_t *meta_array(uint8_t *b, size_t len, const char *key, int elem, uint64_t width,
                           uint64_t *count)
{
    uint64_t mn = 0, sn = 0, an = 0;
    uint8_t *m = section(b, len, WPK_SEC_METADATA, &mn), *s = section(b, len, WPK_SEC_STRINGS, &sn),
            *a = section(b, len, WPK_SEC_AUX, &an);
    if (!m || !s || !a)
        return NULL;
    size_t klen = strlen(key);
    for (uint64_t i = 0; i < mn && mn - i >= WPK_META_REC_SIZE; i += WPK_META_REC_SIZE) {
        const uint8_t *r = m + i;
        uint64_t ko = wpk_ld64(r + WPK_M_KEY_OFF);
        if (wpk_ld32(r + WPK_M_KEY_LEN_OFF) != klen || !fits(ko, klen, sn) || memcmp(s + ko, key, klen))
            continue;
        if (r[WPK_M_TYPE_OFF] != WPACK_META_ARRAY || r[WPK_M_ELEM_TYPE_OFF] != elem)
            return NULL;
        uint64_t off = wpk_ld64(r + WPK_M_VALUE_OFF), n = wpk_ld64(r + WPK_M_COUNT_OFF);
        if (n > MAX_SHARDS)
            n = MAX_SHARDS;
        if (!fits(off, n * width, an))
            return NULL;
        *count = n;
        return a + off;
    }
    return NULL;
}

/* Name k of "wpack.shards" into out, if it is a plain file name. */
static int shard_name(uint8_t *b, size_t len, uint64_t k, char out[MAX_NAME + 1])
{
    uint64_t n = 0, sn = 0;
    const uint8_t *p = meta_array(b, len, "wpack.shards", WPACK_META_STRING, 16, &n);
    const uint8_t *s = section(b, len, WPK_SEC_STRINGS, &sn);
    if (!p || !s || k >= n)
        return 0;
    uint64_t so = wpk_ld64(p + 16 * k), sl = wpk_ld64(p + 16 * k + 8);
    if (!fits(so, sl, sn) || sl == 0 || sl > MAX_NAME || memchr(s + so, '/', sl) ||
        memchr(s + so, 0, sl))
        return 0;
    memcpy(out, s + so, sl);
    out[sl] = 0;
    return strcmp(out, ".") != 0 && strcmp(out, "..") != 0;
}

/* Step 2 of the comment at the top, for the shards that opened (sh[k]). */
static void forge_manifest(uint8_t *b, size_t len, uint8_t **part, size_t *plen, wpack_archive **sh,
                           int nshards)
{
    uint64_t nl = 0, nx = 0;
    uint8_t *lengths = meta_array(b, len, "wpack.shard_lengths", WPACK_META_I64, 8, &nl);
    uint8_t *sums = meta_array(b, len, "wpack.shard_index_xxh3", WPACK_META_I64, 8, &nx);
    for (int k = 0; k < nshards; k++) {
        if (plen[k] < 2 * WPK_HEADER_SIZE)
            continue;
        if (lengths && (uint64_t)k < nl)
            wpk_st64(lengths + 8 * k, wpk_ld64(part[k] + WPK_H_FILE_LENGTH_OFF));
        if (sums && (uint64_t)k < nx)
            wpk_st64(sums + 8 * k, wpk_ld64(part[k] + WPK_H_INDEX_CHECKSUM_OFF));
    }
    uint64_t en = 0, sn = 0;
    uint8_t *e = section(b, len, WPK_SEC_ENTRIES, &en);
    const uint8_t *s = section(b, len, WPK_SEC_STRINGS, &sn);
    if (!e || !s)
        return;
    for (uint64_t i = 0; i < en && en - i >= WPK_ENTRY_SIZE; i += WPK_ENTRY_SIZE) {
        uint8_t *r = e + i;
        uint32_t target = wpk_ld32(r + WPK_E_TARGET_OFF);
        uint64_t no = wpk_ld64(r + WPK_E_NAME_OFF);
        uint32_t nn = wpk_ld32(r + WPK_E_NAME_LEN_OFF);
        char name[256];
        wpack_tensor t;
        if (r[WPK_E_KIND_OFF] != WPACK_KIND_EXTERNAL || target >= (uint32_t)nshards || !sh[target] ||
            nn >= sizeof name || !fits(no, nn, sn))
            continue;
        memcpy(name, s + no, nn);
        name[nn] = 0;
        if (wpack_find(sh[target], name, &t) == WPACK_OK && t.kind == WPACK_KIND_DATA)
            wpk_st64(r + WPK_E_CHECKSUM_OFF, t.checksum);
    }
}

/* ------------------------------------------------------------- the walk */

static void walk(wpack_archive *ar)
{
    uint32_t ns = wpack_shard_count(ar);
    /* More shards than files is possible: a name may repeat. */
    FUZZ_ASSERT(ns >= 1, "an open set with no shards");
    for (uint32_t k = 0; k <= ns; k++) {
        const char *path = NULL;
        const wpack_archive *sh = NULL;
        int rc = wpack_shard_at(ar, k, &path, &sh);
        FUZZ_ASSERT(k < ns ? rc == WPACK_OK && path && sh && wpack_shard_count(sh) == 0
                           : rc == WPACK_E_NOT_FOUND,
                    "shard_at(%u) of %u: rc %d", k, ns, rc);
    }
    uint64_t n = wpack_count(ar);
    for (uint64_t i = 0; i < n; i++) {
        wpack_tensor t, u;
        FUZZ_ASSERT(wpack_tensor_at(ar, i, &t) == WPACK_OK && t.index == i && t.name &&
                        strlen(t.name) == t.name_len,
                    "entry %llu: tensor_at or its name", (unsigned long long)i);
        FUZZ_ASSERT(wpack_find(ar, t.name, &u) == WPACK_OK && u.index == i,
                    "entry %llu: not found by its name", (unsigned long long)i);
        if (t.kind == WPACK_KIND_EXTERNAL) {
            const char *path = NULL;
            const wpack_archive *sh = NULL;
            FUZZ_ASSERT(t.alias_target < ns &&
                            wpack_shard_at(ar, (uint32_t)t.alias_target, &path, &sh) == WPACK_OK,
                        "external entry %llu: shard %llu of %u", (unsigned long long)i,
                        (unsigned long long)t.alias_target, ns);
            FUZZ_ASSERT(wpack_find(sh, t.name, &u) == WPACK_OK && u.kind == WPACK_KIND_DATA &&
                            u.data && u.data == t.data && u.nbytes == t.nbytes,
                        "external entry '%.40s': not the view of its shard's entry", t.name);
        }
        if (t.data && t.codec == WPACK_CODEC_NONE) {
            uint8_t got[64];
            size_t k = t.nbytes < sizeof got ? (size_t)t.nbytes : sizeof got;
            FUZZ_ASSERT(wpack_read(ar, i, t.nbytes - k, got, k) == WPACK_OK &&
                            memcmp(got, (const uint8_t *)t.data + (t.nbytes - k), k) == 0,
                        "entry '%.40s': read back differs from its view", t.name);
        }
    }
    int vrc = fuzz_verify_all(ar);
    wpack_archive *again = NULL;
    int rc = wpack_open_file(&again, manifest_path, WPACK_OPEN_VERIFY);
    FUZZ_ASSERT((rc == WPACK_OK) == (vrc == WPACK_OK), "open with verify rc %d, verify_all rc %d",
                rc, vrc);
    wpack_close(again);
}

/* ----------------------------------------------------------------- main */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_single_threaded();
    return 0;
}

static int is_archive(const uint8_t *p, size_t n)
{
    return n >= 2 * WPK_HEADER_SIZE && memcmp(p, WPK_SUPERBLOCK_MAGIC, 8) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s/wpack-fuzz-shards-XXXXXX", fuzz_tmpdir());
        FUZZ_ASSERT(mkdtemp(dir) != NULL, "mkdtemp %s failed", dir);
        atexit(remove_dir);
    }
    fuzz_cleanup = remove_files;

    /* Split: the manifest, then the shards. */
    const size_t seplen = sizeof FUZZ_SHARD_SEP - 1;
    const uint8_t *at[MAX_SHARDS + 1];
    size_t n[MAX_SHARDS + 1];
    int parts = 0;
    const uint8_t *p = data, *end = data + size;
    while (parts <= MAX_SHARDS) {
        const uint8_t *sep = memmem(p, (size_t)(end - p), FUZZ_SHARD_SEP, seplen);
        at[parts] = p;
        n[parts] = (size_t)((sep ? sep : end) - p);
        parts++;
        if (!sep)
            break;
        p = sep + seplen;
    }
    uint8_t *manifest = fuzz_copy(at[0], n[0]);
    uint8_t *shard[MAX_SHARDS];
    size_t shard_len[MAX_SHARDS];
    wpack_archive *sh[MAX_SHARDS];
    int nshards = parts - 1;
    for (int k = 0; k < nshards; k++) {
        shard[k] = fuzz_copy(at[k + 1], n[k + 1]);
        shard_len[k] = n[k + 1];
        sh[k] = NULL;
        if (is_archive(shard[k], shard_len[k])) {
            fix_checksums(shard[k], shard_len[k], 0);
            if (wpack_open_memory(&sh[k], shard[k], shard_len[k], 0) != WPACK_OK) {
                wpack_close(sh[k]);
                sh[k] = NULL;
            }
        }
    }
    if (is_archive(manifest, n[0])) {
        forge_manifest(manifest, n[0], shard, shard_len, sh, nshards);
        fix_checksums(manifest, n[0], 0);
    }
    for (int k = 0; k < nshards; k++) {
        char name[MAX_NAME + 1];
        if (shard_name(manifest, n[0], (uint64_t)k, name))
            write_part(name, shard[k], shard_len[k]);
        wpack_close(sh[k]);
    }
    snprintf(manifest_path, sizeof manifest_path, "%s", write_part("set.wpack", manifest, n[0]));

    wpack_archive *ar = NULL;
    int rc = wpack_open_file(&ar, manifest_path, 0);
    FUZZ_ASSERT(ar != NULL, "open_file returned no handle (rc %d)", rc);
    FUZZ_ASSERT(wpack_errcode(ar) == rc && (rc == WPACK_OK) == (wpack_errmsg(ar)[0] == 0) &&
                    strcmp(wpack_error_name(rc), "WPACK_E_UNKNOWN") != 0,
                "open_file rc %d, handle says %d '%s'", rc, wpack_errcode(ar), wpack_errmsg(ar));
    if (rc == WPACK_OK && wpack_shard_count(ar) > 0)
        walk(ar);
    wpack_close(ar);

    remove_files();
    fuzz_cleanup = NULL;
    for (int k = 0; k < nshards; k++)
        free(shard[k]);
    free(manifest);
    return 0;
}
