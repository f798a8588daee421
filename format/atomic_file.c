/*
 * atomic_file.c - temporary file beside the target, fsync, rename, fsync of
 * the directory (one file, or a batch of one directory's files); and the sweep that removes dead writers' temporaries
 * (atomic_file.h says the naming and the rules).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "atomic_file.h"
#include "internal.h"

#define TMP_TAG ".tmp-"
#define TMP_HEX 16

static uint64_t random64(void)
{
    uint64_t v;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) == (ssize_t)sizeof v)
        return v;
    /* no entropy yet: the time and an address still differ between tries,
     * and O_EXCL catches a collision anyway */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    v = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)(uintptr_t)&v;
    return v * 0x9E3779B97F4A7C15ull;
}

/* The directory part of path ("." when none), into buf. */
static void dir_of(const char *path, char *buf, size_t len)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        wpk_fmt(buf, len, ".");
    else if (slash == path)
        wpk_fmt(buf, len, "/");
    else
        wpk_fmt(buf, len, "%.*s", (int)(slash - path), path);
}

/* fsync the directory holding path so a rename in it is durable. */
static int sync_dir(const char *path)
{
    char dir[4096];
    dir_of(path, dir, sizeof dir);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

static const char *kind_of(mode_t m)
{
    return S_ISDIR(m)    ? "a directory"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISSOCK(m) ? "a socket"
           : S_ISLNK(m)  ? "a symlink"
                         : "not a regular file";
}

/* What may be replaced at path: nothing, or a regular file. With follow,
 * a symlink of the caller's leads to its target: *real (malloc'd) is the
 * path to replace, else NULL (path itself). *old: the stat of the regular
 * file replaced; st_mode 0 when none. WPACK_OK or WPACK_E_FILE_TYPE /
 * WPACK_E_NOMEM with err set. */
static int replaceable(const char *path, int follow, char **real, struct stat *old, char *err,
                       size_t errlen)
{
    struct stat st;
    *real = NULL;
    old->st_mode = 0;
    if (lstat(path, &st) != 0)
        return WPACK_OK; /* nothing there (or unreachable: the create says why) */
    if (S_ISLNK(st.st_mode) && follow) {
        if (st.st_uid != geteuid()) {
            wpk_fmt(err, errlen, "%s: a symlink owned by another user: not followed, not replaced "
                    "(give its target as the output)", path);
            return WPACK_E_FILE_TYPE;
        }
        if (!(*real = realpath(path, NULL)) || stat(*real, &st) != 0) {
            int e = errno;
            wpk_fmt(err, errlen, "%s: a symlink whose target %s: not replaced", path,
                    e == ENOENT ? "does not exist" : strerror(e));
            free(*real);
            *real = NULL;
            return e == ENOMEM ? WPACK_E_NOMEM : WPACK_E_FILE_TYPE;
        }
    } else if (S_ISLNK(st.st_mode)) {
        return WPACK_OK; /* the link itself is replaced */
    }
    if (S_ISREG(st.st_mode)) {
        *old = st;
        return WPACK_OK;
    }
    wpk_fmt(err, errlen, "%s%s%s: %s, not a regular file: not replaced", path, *real ? " -> " : "",
            *real ? *real : "", kind_of(st.st_mode));
    free(*real);
    *real = NULL;
    return WPACK_E_FILE_TYPE;
}

int wpk_atomic_check(const char *path, unsigned flags, char *err, size_t errlen)
{
    char *real;
    struct stat old;
    int rc = replaceable(path, (flags & WPK_ATOMIC_FOLLOW_LINK) != 0, &real, &old, err, errlen);
    free(real);
    return rc;
}

int wpk_atomic_open(wpk_atomic *a, const char *path, unsigned flags, char *err, size_t errlen)
{
    a->path = a->tmp = NULL;
    a->fd = -1;
    a->flags = flags;
    a->synced = 0;
    a->kept_mode = 0;
    a->kept_uid = a->kept_gid = -1;
    char *real = NULL;
    struct stat old;
    int rc = replaceable(path, !!(flags & WPK_ATOMIC_FOLLOW_LINK), &real, &old, err, errlen);
    if (rc)
        return rc;
    if (real)
        path = real; /* the link's target is what gets replaced */
    if (!(flags & WPK_ATOMIC_NO_SWEEP))
        wpk_atomic_sweep(path);
    size_t n = strlen(path), tn = n + sizeof TMP_TAG + 24 + TMP_HEX;
    a->path = real ? real : strdup(path);
    a->tmp = malloc(tn);
    if (!a->path || !a->tmp) {
        wpk_atomic_abort(a);
        wpk_fmt(err, errlen, "out of memory");
        return WPACK_E_NOMEM;
    }
    for (int attempt = 0; attempt < 64; attempt++) {
        snprintf(a->tmp, tn, "%s" TMP_TAG "%ld-%016llx", path, (long)getpid(),
                 (unsigned long long)random64());
        int fd = open(a->tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
        if (fd < 0 && errno == EEXIST)
            continue;
        if (fd < 0)
            break;
        /* Lock, then check that no sweeper removed the name between the
         * create and the lock (it needs the lock to remove it). A file
         * system without flock leaves the file unlocked: sweepers cannot
         * lock it either, so they leave it alone. */
        struct stat st;
        int locked = flock(fd, LOCK_EX | LOCK_NB) == 0;
        if ((locked || errno != EWOULDBLOCK) && fstat(fd, &st) == 0 && st.st_nlink > 0) {
            /* A file replaced keeps its permission bits, owner and group
             * (as cp and a shell's > keep them, writing in place): a
             * private 0600 archive does not come back 0644, and root
             * rewriting a user's archive leaves it the user's. Set before a
             * byte is written. */
            if (S_ISREG(old.st_mode)) {
                a->kept_mode = (old.st_mode & 0777) | S_IFREG; /* nonzero even for 000 */
                a->kept_uid = (long)old.st_uid;
                a->kept_gid = (long)old.st_gid;
                wpk_atomic_keep_like(a, fd);
            }
            a->fd = fd;
            return WPACK_OK;
        }
        close(fd); /* a sweeper has it and removes it: take another name */
    }
    wpk_fmt(err, errlen, "%s: cannot create a temporary file beside it: %s", path,
            strerror(errno ? errno : EEXIST));
    free(a->tmp);
    a->tmp = NULL;
    wpk_atomic_abort(a);
    return WPACK_E_IO;
}

void wpk_atomic_keep_like(const wpk_atomic *a, int fd)
{
    struct stat st;
    if (!a->kept_mode || fstat(fd, &st) != 0)
        return;
    /* Owner first (a chown may clear mode bits), then the mode. Only a
     * privileged caller can give a file away; an owner may still move it
     * to another of its groups. A failure is not an error: the file is
     * then the caller's, as any new file is. */
    if ((long)st.st_uid != a->kept_uid || (long)st.st_gid != a->kept_gid) {
        if (fchown(fd, (uid_t)a->kept_uid, (gid_t)a->kept_gid) != 0)
            (void)fchown(fd, (uid_t)-1, (gid_t)a->kept_gid);
    }
    (void)fchmod(fd, a->kept_mode & 0777);
}

int wpk_atomic_sync(wpk_atomic *a, char *err, size_t errlen)
{
    if (a->fd < 0 || !a->tmp) {
        wpk_fmt(err, errlen, "%s: no temporary file to finish", a->path ? a->path : "?");
        return WPACK_E_STATE;
    }
    if (a->synced || (a->flags & WPK_ATOMIC_NO_SYNC))
        return WPACK_OK;
    if (fsync(a->fd) != 0) {
        wpk_fmt(err, errlen, "%s: fsync failed: %s", a->path, strerror(errno));
        return WPACK_E_IO;
    }
    a->synced = 1;
    return WPACK_OK;
}

void wpk_atomic_kick(wpk_atomic *a)
{
    if (a->fd >= 0 && !(a->flags & WPK_ATOMIC_NO_SYNC))
        sync_file_range(a->fd, 0, 0, SYNC_FILE_RANGE_WRITE); /* a hint: errors show at fsync */
}

/* Rename a's temporary over its target; it has nothing left to remove. */
static int put_in_place(wpk_atomic *a, char *err, size_t errlen)
{
    char *real = NULL; /* a->path is already a link's target: a link now is replaced */
    struct stat old;
    int rc = replaceable(a->path, 0, &real, &old, err, errlen);
    if (rc)
        return rc;
    if (rename(a->tmp, a->path) != 0) {
        wpk_fmt(err, errlen, "%s: cannot rename into place: %s", a->path, strerror(errno));
        return WPACK_E_IO;
    }
    free(a->tmp);
    a->tmp = NULL;
    return WPACK_OK;
}

/* fsync of the directory of a's target, unless a's flags skip it. */
static int sync_dir_of(const wpk_atomic *a, char *err, size_t errlen)
{
    if ((a->flags & (WPK_ATOMIC_NO_SYNC | WPK_ATOMIC_NO_DIR_SYNC)) || sync_dir(a->path) == 0)
        return WPACK_OK;
    wpk_fmt(err, errlen, "%s: fsync of its directory failed: %s", a->path, strerror(errno));
    return WPACK_E_IO;
}

int wpk_atomic_commit(wpk_atomic *a, char *err, size_t errlen)
{
    int rc = wpk_atomic_sync(a, err, errlen);
    if (rc == WPACK_OK)
        rc = put_in_place(a, err, errlen);
    if (rc == WPACK_OK)
        rc = sync_dir_of(a, err, errlen);
    wpk_atomic_abort(a); /* the lock is released only now, after the rename */
    return rc;
}

int wpk_atomic_commit_all(wpk_atomic *a, size_t n, char *err, size_t errlen)
{
    int rc = WPACK_OK;
    for (size_t k = 0; k < n && rc == WPACK_OK; k++)
        rc = wpk_atomic_sync(&a[k], err, errlen);
    size_t placed = 0;
    while (placed < n && rc == WPACK_OK && (rc = put_in_place(&a[placed], err, errlen)) == WPACK_OK)
        placed++;
    if (placed) { /* the renames that happened are made durable even after a failure */
        char e2[600];
        int r2 = sync_dir_of(&a[0], e2, sizeof e2);
        if (rc == WPACK_OK && r2 != WPACK_OK) {
            wpk_fmt(err, errlen, "%s", e2);
            rc = r2;
        }
    }
    for (size_t k = 0; k < n; k++)
        wpk_atomic_abort(&a[k]); /* locks released after the renames */
    return rc;
}

void wpk_atomic_abort(wpk_atomic *a)
{
    if (a->tmp)
        unlink(a->tmp); /* while still locked: no sweeper sees it half-gone */
    if (a->fd >= 0)
        close(a->fd);
    free(a->tmp);
    free(a->path);
    a->tmp = a->path = NULL;
    a->fd = -1;
}

/* ---- sweeping dead temporaries ---- */

/* The length of "<pid>-<16 hex>" at the start of s (s follows ".tmp-"), or 0. */
static size_t pid_hex(const char *s)
{
    size_t i = 0;
    while (s[i] >= '0' && s[i] <= '9' && i < 10)
        i++;
    if (i == 0 || s[i] != '-')
        return 0;
    i++;
    for (int k = 0; k < TMP_HEX; k++, i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return i;
}

/* Is s what a writer puts after its temporary's name in the names of its
 * other files: nothing, ".old" (resolver/output_commit.c's link to the old
 * archive), ".shard-<n>" (a finished shard, packer/writer_shards.c) or
 * ".shard-<n>.tmp-<pid>-<hex>" (a shard being written)? Only these: a name
 * with anything else after a temporary's is not a writer's file (extract's
 * NAME.npy of a tensor named "x.npy.tmp-1-0123456789abcdef" must stay). */
static int writer_suffix(const char *s)
{
    if (*s == 0 || strcmp(s, ".old") == 0)
        return 1;
    if (strncmp(s, ".shard-", 7) != 0)
        return 0;
    s += 7;
    size_t d = 0;
    while (s[d] >= '0' && s[d] <= '9')
        d++;
    if (d == 0)
        return 0;
    s += d;
    if (*s == 0)
        return 1;
    size_t t = strncmp(s, TMP_TAG, strlen(TMP_TAG)) == 0 ? pid_hex(s + strlen(TMP_TAG)) : 0;
    return t && s[strlen(TMP_TAG) + t] == 0;
}

/* s follows ".tmp-": the length of "<pid>-<16 hex>" when s starts with it
 * and what follows is a writer's (writer_suffix), else 0. */
static size_t owner_tail(const char *s)
{
    size_t i = pid_hex(s);
    return i && writer_suffix(s + i) ? i : 0;
}

/* The length of the owning temporary's name at the start of name, or 0
 * when name is not a temporary of a target this sweep covers: base exactly
 * (base != NULL), else any target name ending with suffix. */
static size_t owner_len(const char *name, const char *base, const char *suffix)
{
    size_t tag = strlen(TMP_TAG);
    if (base) {
        size_t b = strlen(base);
        if (strncmp(name, base, b) != 0 || strncmp(name + b, TMP_TAG, tag) != 0)
            return 0;
        size_t t = owner_tail(name + b + tag);
        return t ? b + tag + t : 0;
    }
    size_t sl = strlen(suffix);
    for (const char *q = strstr(name, TMP_TAG); q; q = strstr(q + 1, TMP_TAG)) {
        size_t at = (size_t)(q - name);
        if (at <= sl || strncmp(q - sl, suffix, sl) != 0)
            continue;
        size_t t = owner_tail(q + tag);
        if (t)
            return at + tag + t;
    }
    return 0;
}

/* Remove name when it is a regular file of ours whose owner is gone or
 * unlocked (the writer that held the lock has exited). */
static void remove_if_dead(int dfd, const char *name, const char *owner)
{
    struct stat st, ost;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
        st.st_uid != geteuid())
        return;
    int ofd = openat(dfd, owner, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (ofd < 0) {
        /* A live writer's files under its name exist only while its own
         * temporary does: without it they are orphans. */
        if (errno == ENOENT)
            unlinkat(dfd, name, 0);
        return;
    }
    if (fstat(ofd, &ost) == 0 && S_ISREG(ost.st_mode) && ost.st_uid == geteuid() &&
        flock(ofd, LOCK_EX | LOCK_NB) == 0) {
        /* still the file we looked at (names are never reused, but check) */
        struct stat again;
        if (fstatat(dfd, name, &again, AT_SYMLINK_NOFOLLOW) == 0 && again.st_dev == st.st_dev &&
            again.st_ino == st.st_ino)
            unlinkat(dfd, name, 0);
    }
    close(ofd); /* releases the lock */
}

static void sweep(const char *dir, const char *base, const char *suffix)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    int dfd = dirfd(d);
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t n = owner_len(de->d_name, base, suffix);
        if (!n)
            continue;
        char owner[sizeof de->d_name];
        memcpy(owner, de->d_name, n);
        owner[n] = 0;
        remove_if_dead(dfd, de->d_name, owner);
    }
    closedir(d);
}

void wpk_atomic_sweep(const char *path)
{
    char dir[4096];
    dir_of(path, dir, sizeof dir);
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (*base)
        sweep(dir, base, NULL);
}

void wpk_atomic_sweep_dir(const char *dir, const char *suffix)
{
    sweep(dir, NULL, suffix ? suffix : "");
}
