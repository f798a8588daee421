/* cache.c - the local chunk cache of remote archives (opt.cache_dir).
 *
 * The object is cut into chunk_size-aligned chunks; a chunk is kept in one
 * file named "KEY-SIZE-OFF-LEN.chunk" (hex): KEY is the XXH3 of the
 * archive's index (validated by the open) and of the object's origin
 * (wpk_cache_key), so another archive, a replaced object, or the same
 * index served from another place never meets old files. A file is a 48-byte header
 * (magic, KEY, SIZE, OFF, LEN, XXH3 of the bytes) then the LEN bytes; every
 * reuse checks all of it, and a bad file is removed and the chunk fetched
 * again, never returned. Files are written through format/atomic_file.c (a
 * temporary beside it, renamed: processes sharing the directory see whole
 * files or none; not fsynced, see put), created 0600 whatever the umask
 * (a private model's bytes: the directory may be one others can enter),
 * opened with O_NOFOLLOW and only used when regular files of this user. No locks: two processes fetching the same chunk both write
 * it, the last rename wins with the same bytes. Past cache_max_bytes the
 * least recently used files (oldest mtime; a reuse refreshes it) go: the
 * directory is scanned (evict) at each open (a lower --cache-max applies
 * even to a run that stores nothing), then only when this handle's count
 * of the bytes there passes the bound, or when it has put a quarter of the
 * bound since the last scan (what other processes add is seen then), not
 * after every read: at 10,000 chunks a scan per read made extracting a
 * large model quadratic in its size. The chunk a read ended inside stays
 * in memory for the next read, which starts there. */
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "bytes.h"
#include "remote.h"

#define MAGIC "WPKCACH1"
#define HDR 48u
#define SUFFIX ".chunk"

static void evict(wpk_remote *r);

int wpk_cache_open(wpk_remote *r, char *msg, size_t msglen)
{
    const char *dir = r->opt.cache_dir;
    r->cache_fd = -1;
    if (!dir)
        return WPACK_OK;
    if (!*dir) {
        wpk_fmt(msg, msglen, "cache directory: empty path");
        return WPACK_E_INVALID_ARGUMENT;
    }
    /* "LINK/" and "LINK/." name the symlink's target, which O_NOFOLLOW
     * (last component only) then let through: trailing "/" and "/." go,
     * so that a symlink is refused however it is written. The string is
     * the handle's own copy (url.c). */
    for (size_t n = strlen(dir); n > 1;) {
        char *d = (char *)dir;
        if (d[n - 1] == '/')
            d[--n] = 0;
        else if (n > 2 && d[n - 1] == '.' && d[n - 2] == '/')
            d[n -= 2] = 0;
        else
            break;
    }
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        wpk_fmt(msg, msglen, "cache directory %s: cannot create it: %s", dir, strerror(errno));
        return WPACK_E_IO;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        wpk_fmt(msg, msglen, "cache directory %s: %s", dir,
                e == ELOOP || e == ENOTDIR ? "a symlink or not a directory" : strerror(e));
        return e == ELOOP || e == ENOTDIR ? WPACK_E_FILE_TYPE : WPACK_E_IO;
    }
    struct stat st;
    const char *bad = fstat(fd, &st) != 0           ? "cannot stat it"
                      : st.st_uid != geteuid()      ? "belongs to another user"
                      : (st.st_mode & 022) != 0     ? "writable by group or others (chmod 700 it)"
                                                    : NULL;
    if (bad) {
        close(fd);
        wpk_fmt(msg, msglen, "cache directory %s: %s", dir, bad);
        return WPACK_E_FILE_TYPE;
    }
    r->cache_fd = fd;
    /* format/atomic_file.c takes paths: the one checked above could be
     * renamed and replaced (by a symlink to another directory) by whoever
     * may write its parent, after this check, and the chunks (a private
     * model's bytes) written there. /proc/self/fd/N names the directory
     * opened whatever becomes of its path (Linux); without /proc, the path. */
    struct stat via;
    wpk_fmt(r->cache_via, sizeof r->cache_via, "/proc/self/fd/%d", fd);
    if (stat(r->cache_via, &via) != 0 || via.st_dev != st.st_dev || via.st_ino != st.st_ino)
        r->cache_via[0] = 0;
    /* temporaries of killed writers */
    wpk_atomic_sweep_dir(*r->cache_via ? r->cache_via : dir, SUFFIX);
    evict(r); /* the bound holds even when this handle stores nothing */
    return WPACK_OK;
}

/* The index's XXH3 alone let any server name another's chunks: one serving
 * a copy of a real archive's index (and size) over other bytes had its
 * bytes cached under the real archive's key, and a later unverified
 * partial read of the real archive (verify off: only whole entries are
 * checked) returned them. The origin, scheme://host:port/path of the URL
 * requested (no user info, query or fragment: a rotating token keeps the
 * chunks), is hashed in: only the same object's reads share chunks. */
int wpk_cache_key(const wpk_remote *r, uint64_t index_xxh3, uint64_t *key)
{
    CURLU *u = curl_url();
    char *part[4] = {NULL, NULL, NULL, NULL};
    static const CURLUPart which[4] = {CURLUPART_SCHEME, CURLUPART_HOST, CURLUPART_PORT,
                                       CURLUPART_PATH};
    int ok = u && curl_url_set(u, CURLUPART_URL, r->url, 0) == CURLUE_OK;
    for (int i = 0; ok && i < 4; i++)
        ok = curl_url_get(u, which[i], &part[i], i == 2 ? CURLU_DEFAULT_PORT : 0) == CURLUE_OK;
    size_t n = 8 + strlen(r->url) + 8;
    for (int i = 0; ok && i < 4; i++)
        n += strlen(part[i]);
    for (char *c = ok ? part[1] : NULL; c && *c; c++) /* the host in any case */
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
    char *buf = malloc(n);
    int rc = buf ? 0 : -1;
    if (buf) {
        wpk_st64(buf, index_xxh3);
        int k = ok ? snprintf(buf + 8, n - 8, "%s://%s:%s%s", part[0], part[1], part[2], part[3])
                   : snprintf(buf + 8, n - 8, "%s", r->url); /* parsed at open: not met */
        *key = wpk_xxh3(buf, 8 + (size_t)(k > 0 ? k : 0));
    }
    free(buf);
    for (int i = 0; i < 4; i++)
        curl_free(part[i]);
    curl_url_cleanup(u);
    return rc;
}

void wpk_cache_close(wpk_remote *r)
{
    if (r->cache_fd >= 0)
        close(r->cache_fd);
    r->cache_fd = -1;
    free(r->kept);
    r->kept = NULL;
}

static void name_of(const wpk_remote *r, uint64_t off, uint64_t len, char *out, size_t n)
{
    wpk_fmt(out, n, "%016llx-%llx-%llx-%llx" SUFFIX, (unsigned long long)r->cache_key,
            (unsigned long long)r->size, (unsigned long long)off, (unsigned long long)len);
}

/* Chunk [off, off + len) from its cache file into dst: 1 when the file is
 * there and whole and right (its mtime then refreshed), else 0 (a bad file
 * removed). A file that vanishes meanwhile is a miss. */
static int get(wpk_remote *r, uint64_t off, uint64_t len, uint8_t *dst)
{
    char name[128];
    name_of(r, off, len, name, sizeof name);
    int fd = openat(r->cache_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return 0; /* missing, or a symlink (ELOOP): replaced by the next put */
    struct stat st;
    memset(&st, 0, sizeof st);
    uint8_t h[HDR];
    int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
             (uint64_t)st.st_size == HDR + len && wpk_pread_all(fd, h, HDR, 0) == 0 &&
             memcmp(h, MAGIC, 8) == 0 && wpk_ld64(h + 8) == r->cache_key &&
             wpk_ld64(h + 16) == r->size && wpk_ld64(h + 24) == off && wpk_ld64(h + 32) == len &&
             wpk_pread_all(fd, dst, (size_t)len, HDR) == 0 &&
             wpk_xxh3(dst, (size_t)len) == wpk_ld64(h + 40);
    if (ok)
        futimens(fd, NULL); /* recently used */
    close(fd);
    if (!ok && S_ISREG(st.st_mode))
        unlinkat(r->cache_fd, name, 0);
    return ok;
}

/* Keep chunk [off, off + len) (best effort: a full disk only skips it). */
static void put(wpk_remote *r, uint64_t off, uint64_t len, const uint8_t *src)
{
    if (HDR + len > r->opt.cache_max_bytes)
        return;
    char name[128], path[4200], err[300];
    name_of(r, off, len, name, sizeof name);
    if (snprintf(path, sizeof path, "%s/%s", *r->cache_via ? r->cache_via : r->opt.cache_dir,
                 name) >= (int)sizeof path)
        return;
    uint8_t h[HDR];
    memcpy(h, MAGIC, 8);
    wpk_st64(h + 8, r->cache_key);
    wpk_st64(h + 16, r->size);
    wpk_st64(h + 24, off);
    wpk_st64(h + 32, len);
    wpk_st64(h + 40, wpk_xxh3(src, (size_t)len));
    /* Not fsynced: every reuse checks the header and XXH3, so a file a
     * power loss tore is removed and fetched again; a sync per chunk cost
     * the fetch more than the network did. */
    wpk_atomic a;
    if (wpk_atomic_open(&a, path, WPK_ATOMIC_NO_SWEEP | WPK_ATOMIC_NO_SYNC | WPK_ATOMIC_PRIVATE,
                        err, sizeof err) != WPACK_OK)
        return;
    if (wpk_write_all(a.fd, h, HDR) || wpk_write_all(a.fd, src, (size_t)len)) {
        wpk_atomic_abort(&a);
        return;
    }
    if (wpk_atomic_commit(&a, err, sizeof err) == WPACK_OK) {
        r->cache_bytes += HDR + len;
        r->cache_put += HDR + len;
    }
}

typedef struct {
    char name[96];
    uint64_t size;
    struct timespec mtime;
} cfile;

static int older(const void *a, const void *b)
{
    const struct timespec *x = &((const cfile *)a)->mtime, *y = &((const cfile *)b)->mtime;
    return x->tv_sec != y->tv_sec ? (x->tv_sec < y->tv_sec ? -1 : 1)
                                  : (x->tv_nsec < y->tv_nsec ? -1 : x->tv_nsec > y->tv_nsec);
}

/* Is name one name_of gives ("KEY-SIZE-OFF-LEN.chunk", lowercase hex, KEY
 * 16 digits)? Only those are the cache's: a user's "part-01.chunk" in a
 * directory given as --cache is never evicted. */
static int cache_name(const char *name)
{
    const char *p = name;
    for (int field = 0; field < 4; field++) {
        const char *start = p;
        while ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))
            p++;
        size_t n = (size_t)(p - start);
        if (field == 0 ? n != 16 : n < 1 || n > 16)
            return 0;
        if (field < 3 && *p++ != '-')
            return 0;
    }
    return strcmp(p, SUFFIX) == 0;
}

/* The directory's chunk files back under cache_max_bytes, oldest first.
 * Files other processes remove meanwhile are simply gone. */
static void evict(wpk_remote *r)
{
    int dfd = openat(r->cache_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return;
    }
    cfile *v = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name), sl = strlen(SUFFIX);
        struct stat st;
        if (len <= sl || len >= sizeof v->name || !cache_name(de->d_name) ||
            fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
            st.st_uid != geteuid())
            continue;
        if (n == cap) {
            cfile *g = realloc(v, (cap = cap ? 2 * cap : 256) * sizeof *v);
            if (!g)
                break;
            v = g;
        }
        memcpy(v[n].name, de->d_name, len + 1);
        v[n].size = (uint64_t)st.st_size;
        v[n].mtime = st.st_mtim;
        total += v[n].size;
        n++;
    }
    if (total > r->opt.cache_max_bytes && n) {
        qsort(v, n, sizeof *v, older);
        for (size_t i = 0; i < n && total > r->opt.cache_max_bytes; i++)
            if (unlinkat(dfd, v[i].name, 0) == 0 || errno == ENOENT)
                total -= v[i].size;
    }
    free(v);
    closedir(d);
    r->cache_scanned = 1;
    r->cache_bytes = total;
    r->cache_put = 0;
}

/* After puts: is a scan due (see the top of this file)? */
static int evict_due(const wpk_remote *r)
{
    uint64_t max = r->opt.cache_max_bytes;
    return !r->cache_scanned || r->cache_bytes > max || r->cache_put >= max / 4;
}

int wpk_cache_read(wpk_remote *r, uint64_t off, uint8_t *dst, uint64_t n, char *msg,
                   size_t msglen)
{
    if (!n)
        return WPACK_OK;
    uint64_t cs = r->opt.chunk_size, first = off / cs, last = (off + n - 1) / cs;
    uint64_t count = last - first + 1;
    /* the misses, then a copy of those fetched here (not by the read-ahead) */
    wpk_range *miss = count <= SIZE_MAX / (2 * sizeof *miss) ? calloc((size_t)count, 2 * sizeof *miss)
                                                              : NULL;
    uint8_t *edge[2] = {NULL, NULL};
    if (!miss) {
        wpk_fmt(msg, msglen, "out of memory");
        return WPACK_E_NOMEM;
    }
    size_t nm = 0;
    int rc = WPACK_OK;
    for (uint64_t k = first; k <= last; k++) {
        uint64_t c0 = k * cs, clen = r->size - c0 < cs ? r->size - c0 : cs;
        int inside = c0 >= off && c0 + clen <= off + n;
        uint8_t *buf = dst + (c0 - (inside ? off : c0)); /* in place when whole inside */
        if (!inside) {
            uint8_t **e = &edge[k == first ? 0 : 1];
            if (r->kept && r->kept_off == c0 && r->kept_len == clen) {
                *e = r->kept; /* where the last read ended: no second read of its file */
                r->kept = NULL;
                continue;
            }
            if (!(*e = malloc((size_t)clen))) {
                wpk_fmt(msg, msglen, "out of memory");
                rc = WPACK_E_NOMEM;
                break;
            }
            buf = *e;
        }
        if (get(r, c0, clen, buf))
            continue;
        miss[nm].off = c0;
        miss[nm].len = clen;
        miss[nm].dst = buf;
        nm++;
    }
    /* Misses the read-ahead holds (wpk_cache_plan) come from it; the
     * others are fetched together. */
    size_t nf = 0;
    for (size_t i = 0; rc == WPACK_OK && i < nm; i++)
        if (!wpk_ra_read(r, miss[i].off, miss[i].dst, miss[i].len, &rc, msg, msglen))
            miss[nm + nf++] = miss[i];
    if (rc == WPACK_OK)
        rc = wpk_remote_fetch_ranges(r, miss + nm, nf, msg, msglen);
    if (rc == WPACK_OK) {
        for (size_t i = 0; i < nm; i++) {
            if (wpk_ra_busy(r)) /* read-ahead requests move on between the writes */
                wpk_remote_kick(r);
            put(r, miss[i].off, miss[i].len, miss[i].dst);
        }
        if (nm && evict_due(r))
            evict(r);
        /* the parts of the edge chunks asked for */
        for (int e = 0; e < 2; e++) {
            if (!edge[e])
                continue;
            uint64_t c0 = (e == 0 ? first : last) * cs;
            uint64_t clen = r->size - c0 < cs ? r->size - c0 : cs;
            uint64_t a = off > c0 ? off : c0, b = off + n < c0 + clen ? off + n : c0 + clen;
            memcpy(dst + (a - off), edge[e] + (a - c0), (size_t)(b - a));
        }
        /* Keep the chunk this read ended inside: a read that follows
         * starts in it (tensors share their boundary chunks), and reading
         * it back from its file cost a pread and an XXH3 of the whole
         * chunk per tensor. */
        int e = edge[1] ? 1 : edge[0] && first == last ? 0 : -1;
        if (e >= 0) {
            free(r->kept);
            r->kept = edge[e];
            r->kept_off = last * cs;
            r->kept_len = r->size - r->kept_off < cs ? r->size - r->kept_off : cs;
            edge[e] = NULL;
        }
    }
    free(edge[0]);
    free(edge[1]);
    free(miss);
    return rc;
}

/* Chunk [off, off + len) has a file of the right size: a hint for the
 * plan only (the read checks the file, and fetches the chunk if it fails). */
static int present(const wpk_remote *r, uint64_t off, uint64_t len)
{
    char name[128];
    struct stat st;
    name_of(r, off, len, name, sizeof name);
    return fstatat(r->cache_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
           (uint64_t)st.st_size == HDR + len;
}

int wpk_cache_plan(wpk_remote *r, const uint64_t *ranges, size_t n)
{
    uint64_t cs = r->opt.chunk_size, prev = UINT64_MAX;
    uint64_t *v = NULL;
    size_t nv = 0, cap = 0;
    for (size_t k = 0; k < n; k++) {
        uint64_t off = ranges[2 * k], len = ranges[2 * k + 1];
        if (!len || off > r->size || len > r->size - off)
            continue;
        for (uint64_t c = off / cs; c <= (off + len - 1) / cs; c++) {
            if (c == prev) /* a chunk shared with the range before */
                continue;
            prev = c;
            uint64_t c0 = c * cs, clen = r->size - c0 < cs ? r->size - c0 : cs;
            if (present(r, c0, clen))
                continue;
            if (nv && v[2 * nv - 2] + v[2 * nv - 1] == c0) { /* the next chunk: one range */
                v[2 * nv - 1] += clen;
                continue;
            }
            if (nv == cap) { /* cap: pairs */
                size_t grown = cap ? 2 * cap : 64;
                uint64_t *g = grown <= SIZE_MAX / (2 * sizeof *v) ? realloc(v, grown * 2 * sizeof *v)
                                                                  : NULL;
                if (!g) {
                    free(v);
                    wpk_ra_plan(r, NULL, 0); /* no plan: reads go chunk by chunk */
                    return WPACK_E_NOMEM;
                }
                v = g;
                cap = grown;
            }
            v[2 * nv] = c0;
            v[2 * nv + 1] = clen;
            nv++;
        }
    }
    int rc = wpk_ra_plan(r, v, nv);
    free(v);
    return rc;
}

void wpk_cache_forget(wpk_remote *r, uint64_t off, uint64_t n)
{
    if (!r->cache_on || !n)
        return;
    uint64_t cs = r->opt.chunk_size;
    if (r->kept && r->kept_off < off + n && off < r->kept_off + r->kept_len) {
        free(r->kept); /* possibly the bad bytes */
        r->kept = NULL;
    }
    for (uint64_t k = off / cs; k <= (off + n - 1) / cs; k++) {
        uint64_t c0 = k * cs, clen = r->size - c0 < cs ? r->size - c0 : cs;
        char name[128];
        name_of(r, c0, clen, name, sizeof name);
        unlinkat(r->cache_fd, name, 0);
    }
}
