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

/* fsync the directory dir. */
static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* fsync the directory holding path so a rename in it is durable. */
static int sync_dir(const char *path)
{
    char dir[4096];
    dir_of(path, dir, sizeof dir);
    return fsync_dir(dir);
}

/* A file tied to the rename of a's temporary (atomic_file.h). */
struct wpk_atomic_link {
    char *link;      /* "TMP.new-NAME" / "TMP.gone-NAME"; NULL: none could be made */
    char *name;      /* the path of NAME */
    dev_t dev;       /* the file, by device and inode: NAME is removed */
    ino_t ino;       /* only while it is still this file */
    int gone;        /* 1: goes with the old target; 0: part of the new one */
};

static int same_file(int dfd, const char *name, dev_t dev, ino_t ino)
{
    struct stat st;
    return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
           st.st_dev == dev && st.st_ino == ino;
}

/* The one rule of a tied file, for its writer and for the sweep: a new
 * file is removed unless the target was renamed, a gone file only when it
 * was (and that rename is durable); NAME first, then the link (a kill in
 * between leaves the link for the sweep). NAME and link relative to dfd. */
static void settle(int dfd, const char *link, const char *name, dev_t dev, ino_t ino, int gone,
                   int renamed, int durable)
{
    if ((gone ? renamed && durable : !renamed) && same_file(dfd, name, dev, ino))
        unlinkat(dfd, name, 0);
    if (link)
        unlinkat(dfd, link, 0);
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
 * WPACK_E_NOMEM with err set, naming shown (path when NULL). */
static int replaceable(const char *path, const char *shown, int follow, char **real,
                       struct stat *old, char *err, size_t errlen)
{
    if (!shown)
        shown = path;
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
    wpk_fmt(err, errlen, "%s%s%s: %s, not a regular file: not replaced", shown, *real ? " -> " : "",
            *real ? *real : "", kind_of(st.st_mode));
    free(*real);
    *real = NULL;
    return WPACK_E_FILE_TYPE;
}

int wpk_atomic_check(const char *path, unsigned flags, char *err, size_t errlen)
{
    char *real;
    struct stat old;
    int rc = replaceable(path, NULL, (flags & WPK_ATOMIC_FOLLOW_LINK) != 0, &real, &old, err, errlen);
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
    a->links = NULL;
    a->nlinks = 0;
    a->dir_synced = 0;
    a->shown = NULL;
    a->run = NULL;
    a->tag = 0;
    char *real = NULL;
    struct stat old;
    int rc = replaceable(path, NULL, !!(flags & WPK_ATOMIC_FOLLOW_LINK), &real, &old, err, errlen);
    if (rc)
        return rc;
    const char *given = path; /* messages name it (and the link's target) */
    if (real)
        path = real; /* the link's target is what gets replaced */
    if (!(flags & WPK_ATOMIC_NO_SWEEP))
        wpk_atomic_sweep(path);
    size_t n = strlen(path), tn = n + sizeof TMP_TAG + 24 + TMP_HEX;
    size_t sn = strlen(given) + (real ? 4 + n : 0) + 1;
    a->path = real ? real : strdup(path);
    a->tmp = malloc(tn);
    a->shown = malloc(sn);
    if (!a->path || !a->tmp || !a->shown) {
        wpk_atomic_abort(a);
        wpk_fmt(err, errlen, "%s: out of memory", given);
        return WPACK_E_NOMEM;
    }
    snprintf(a->shown, sn, "%s%s%s", given, real ? " -> " : "", real ? real : "");
    for (int attempt = 0; attempt < 64; attempt++) {
        snprintf(a->tmp, tn, "%s" TMP_TAG "%ld-%016llx", path, (long)getpid(),
                 (unsigned long long)random64());
        int fd = open(a->tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                      flags & WPK_ATOMIC_PRIVATE ? 0600 : 0666);
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
            if (S_ISREG(old.st_mode) && !(flags & WPK_ATOMIC_PRIVATE)) {
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
    wpk_fmt(err, errlen, "%s: cannot create a temporary file beside it: %s", a->shown,
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
        wpk_fmt(err, errlen, "%s: no temporary file to finish", a->shown ? a->shown : "?");
        return WPACK_E_STATE;
    }
    if (a->synced || (a->flags & WPK_ATOMIC_NO_SYNC))
        return WPACK_OK;
    if (fsync(a->fd) != 0) {
        wpk_fmt(err, errlen, "%s: fsync failed: %s", a->shown, strerror(errno));
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

/* ---- the files of one run (atomic_file.h: wpk_atomic_run) ---- */

struct wpk_atomic_placed {
    dev_t dev;
    ino_t ino;
    unsigned long long tag;
    int used;
};

static size_t slot_of(const wpk_atomic_run *r, dev_t dev, ino_t ino)
{
    uint64_t h = ((uint64_t)ino ^ ((uint64_t)dev << 32 | (uint64_t)dev >> 32)) * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h >> 17) & (r->cap - 1);
    while (r->slots[i].used && (r->slots[i].dev != dev || r->slots[i].ino != ino))
        i = (i + 1) & (r->cap - 1);
    return i;
}

/* Room for one more file, at most half full; 0 when out of memory. */
static int run_reserve(wpk_atomic_run *r)
{
    if (r->cap && 2 * (r->n + 1) <= r->cap)
        return 1;
    size_t cap = r->cap ? 2 * r->cap : 64;
    struct wpk_atomic_placed *old = r->slots, *v;
    if (cap > SIZE_MAX / sizeof *v || !(v = calloc(cap, sizeof *v)))
        return 0;
    size_t oldcap = r->cap;
    r->slots = v;
    r->cap = cap;
    for (size_t k = 0; k < oldcap; k++)
        if (old[k].used)
            r->slots[slot_of(r, old[k].dev, old[k].ino)] = old[k];
    free(old);
    return 1;
}

static void run_placed(wpk_atomic_run *r, const struct stat *mine, unsigned long long tag);

void wpk_atomic_join(wpk_atomic *a, wpk_atomic_run *run, unsigned long long tag)
{
    a->run = run;
    a->tag = tag;
}

int wpk_atomic_run_add(wpk_atomic_run *run, unsigned long long dev, unsigned long long ino,
                       unsigned long long tag)
{
    if (!run_reserve(run))
        return WPACK_E_NOMEM;
    struct stat st;
    st.st_dev = (dev_t)dev;
    st.st_ino = (ino_t)ino;
    run_placed(run, &st, tag);
    return WPACK_OK;
}

void wpk_atomic_run_free(wpk_atomic_run *run)
{
    free(run->slots);
    memset(run, 0, sizeof *run);
}

/* Before a's rename: is its target (old: lstat'ed, st_mode 0 when no
 * regular file is there) a file its run already put in place? *mine: a's
 * own file, recorded by run_placed after the rename (room reserved here). */
static int run_check(wpk_atomic *a, const struct stat *old, struct stat *mine, char *err,
                     size_t errlen)
{
    wpk_atomic_run *r = a->run;
    if (fstat(a->fd, mine) != 0) {
        wpk_fmt(err, errlen, "%s: cannot stat its temporary %s: %s", a->shown, a->tmp,
                strerror(errno));
        return WPACK_E_IO;
    }
    if (!run_reserve(r)) {
        wpk_fmt(err, errlen, "%s: out of memory", a->shown);
        return WPACK_E_NOMEM;
    }
    if (!old->st_mode)
        return WPACK_OK;
    size_t i = slot_of(r, old->st_dev, old->st_ino);
    if (!r->slots[i].used)
        return WPACK_OK;
    r->clash_old = r->slots[i].tag;
    r->clash_new = a->tag;
    wpk_fmt(err, errlen, "%s: is a file this run already wrote under another name (the file "
            "system takes both names for one, e.g. it ignores case): not replaced", a->shown);
    return WPACK_E_SAME_FILE;
}

static void run_placed(wpk_atomic_run *r, const struct stat *mine, unsigned long long tag)
{
    size_t i = slot_of(r, mine->st_dev, mine->st_ino);
    if (!r->slots[i].used)
        r->n++;
    r->slots[i] = (struct wpk_atomic_placed){mine->st_dev, mine->st_ino, tag, 1};
}

/* Rename a's temporary over its target; it has nothing left to remove. */
static int put_in_place(wpk_atomic *a, char *err, size_t errlen)
{
    char *real = NULL; /* a->path is already a link's target: a link now is replaced */
    struct stat old, mine;
    int rc = replaceable(a->path, a->shown, 0, &real, &old, err, errlen);
    if (rc == WPACK_OK && a->run)
        rc = run_check(a, &old, &mine, err, errlen);
    if (rc)
        return rc;
    if (rename(a->tmp, a->path) != 0) {
        wpk_fmt(err, errlen, "%s: cannot rename into place: %s", a->shown, strerror(errno));
        return WPACK_E_IO;
    }
    if (a->run)
        run_placed(a->run, &mine, a->tag);
    free(a->tmp);
    a->tmp = NULL;
    return WPACK_OK;
}

/* fsync of the directory of a's target, unless a's flags skip it. */
static int sync_dir_of(const wpk_atomic *a, char *err, size_t errlen)
{
    if ((a->flags & (WPK_ATOMIC_NO_SYNC | WPK_ATOMIC_NO_DIR_SYNC)) || sync_dir(a->path) == 0)
        return WPACK_OK;
    wpk_fmt(err, errlen, "%s: fsync of its directory failed: %s", a->shown, strerror(errno));
    return WPACK_E_IO;
}

int wpk_atomic_commit(wpk_atomic *a, char *err, size_t errlen)
{
    int rc = wpk_atomic_sync(a, err, errlen);
    if (rc == WPACK_OK)
        rc = put_in_place(a, err, errlen);
    if (rc == WPACK_OK && (rc = sync_dir_of(a, err, errlen)) == WPACK_OK)
        a->dir_synced = 1;
    wpk_atomic_abort(a); /* tied files settled; the lock released only now, after the rename */
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
        for (size_t k = 0; k < placed && r2 == WPACK_OK; k++)
            a[k].dir_synced = 1;
    }
    for (size_t k = 0; k < n; k++)
        wpk_atomic_abort(&a[k]); /* locks released after the renames */
    return rc;
}

/* Settle and free the tied files: renamed is whether the temporary went
 * over the target. Before the temporary itself is removed. */
static void settle_links(wpk_atomic *a, int renamed)
{
    for (size_t k = 0; k < a->nlinks; k++) {
        struct wpk_atomic_link *l = &a->links[k];
        settle(AT_FDCWD, l->link, l->name, l->dev, l->ino, l->gone, renamed, a->dir_synced);
        free(l->link);
        free(l->name);
    }
    free(a->links);
    a->links = NULL;
    a->nlinks = 0;
}

/* from to to, failing when to exists (RENAME_NOREPLACE; a file system
 * without it: a plain rename, the name was free a moment ago). */
static int rename_no_replace(const char *from, const char *to)
{
#ifdef RENAME_NOREPLACE
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS)
        return -1;
#endif
    return rename(from, to);
}

/* "<dir of a's target>/name" and "<a's temporary><tag>name" (malloc'd);
 * the link is NULL when its name would be too long for the file system. */
static int link_names(const wpk_atomic *a, const char *tag, const char *name, char **path,
                      char **link)
{
    const char *slash = strrchr(a->path, '/');
    size_t dir = slash ? (size_t)(slash - a->path) + 1 : 0, n = strlen(name);
    const char *tslash = strrchr(a->tmp, '/');
    size_t tbase = strlen(tslash ? tslash + 1 : a->tmp);
    *path = malloc(dir + n + 1);
    *link = NULL;
    if (!*path)
        return WPACK_E_NOMEM;
    memcpy(*path, a->path, dir);
    memcpy(*path + dir, name, n + 1);
    if (tbase + strlen(tag) + n > 255) /* NAME_MAX of the common file systems */
        return WPACK_OK;
    size_t tl = strlen(a->tmp);
    if (!(*link = malloc(tl + strlen(tag) + n + 1))) {
        free(*path);
        *path = NULL;
        return WPACK_E_NOMEM;
    }
    snprintf(*link, tl + strlen(tag) + n + 1, "%s%s%s", a->tmp, tag, name);
    return WPACK_OK;
}

static struct wpk_atomic_link *new_link(wpk_atomic *a)
{
    struct wpk_atomic_link *v = realloc(a->links, (a->nlinks + 1) * sizeof *v);
    if (!v)
        return NULL;
    a->links = v;
    return memset(&v[a->nlinks], 0, sizeof *v);
}

int wpk_atomic_add_file(wpk_atomic *a, const char *from, const char *name, char *err,
                        size_t errlen)
{
    char *path, *link;
    struct stat st;
    struct wpk_atomic_link *l;
    if (!a->tmp || strchr(name, '/') || !*name) {
        wpk_fmt(err, errlen, "%s: cannot add '%s' beside it", a->shown ? a->shown : "?", name);
        return WPACK_E_STATE;
    }
    if (!(l = new_link(a)) || link_names(a, ".new-", name, &path, &link)) {
        wpk_fmt(err, errlen, "%s: out of memory putting '%s' beside it", a->shown, name);
        return WPACK_E_NOMEM;
    }
    int e = lstat(from, &st) == 0 ? 0 : errno;
    if (!e && link && rename(from, link) == 0) {
        if (linkat(AT_FDCWD, link, AT_FDCWD, path, 0) == 0) {
            *l = (struct wpk_atomic_link){link, path, st.st_dev, st.st_ino, 0};
            a->nlinks++;
            return WPACK_OK;
        }
        e = errno == EEXIST ? EEXIST : 0; /* else: no hard links here */
        if (rename(link, from) != 0) /* the name was ours a moment ago; the sweep removes it */
            e = errno;
    }
    free(link);
    /* No link (too long a name, no hard links here): the file moves to
     * NAME itself, which an abort still removes but the sweep cannot. */
    if (!e && rename_no_replace(from, path) == 0) {
        *l = (struct wpk_atomic_link){NULL, path, st.st_dev, st.st_ino, 0};
        a->nlinks++;
        return WPACK_OK;
    }
    if (!e)
        e = errno;
    wpk_fmt(err, errlen, "%s: cannot put %s in place: %s", path, from, strerror(e));
    free(path);
    return e == EEXIST ? WPACK_E_EXISTS : WPACK_E_IO;
}

int wpk_atomic_add_gone(wpk_atomic *a, const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (!a->tmp) {
        wpk_fmt(err, errlen, "%s: no temporary file", a->shown ? a->shown : "?");
        return WPACK_E_STATE;
    }
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return WPACK_OK; /* nothing to remove */
    const char *slash = strrchr(path, '/'), *aslash = strrchr(a->path, '/');
    const char *name = slash ? slash + 1 : path;
    size_t dir = (size_t)(name - path);
    int here = dir == (aslash ? (size_t)(aslash + 1 - a->path) : 0) && strncmp(path, a->path, dir) == 0;
    char *full = NULL, *link = NULL;
    struct wpk_atomic_link *l = new_link(a);
    if (!l || (here ? link_names(a, ".gone-", name, &full, &link) : !(full = strdup(path)))) {
        wpk_fmt(err, errlen, "%s: out of memory", path);
        return WPACK_E_NOMEM;
    }
    /* Linked only when the file has the temporary's owner: a sweep settles
     * only its own user's files, so another's link would outlive the
     * temporary (removed by its owner's sweep) and the next sweep of the
     * link's owner would take the missing temporary for a rename and
     * remove a shard the set at the target still names. */
    struct stat tst;
    if (link && (fstat(a->fd, &tst) != 0 || tst.st_uid != st.st_uid ||
                 linkat(AT_FDCWD, path, AT_FDCWD, link, 0) != 0)) {
        free(link); /* no link: removed after a commit, not after a kill */
        link = NULL;
    }
    *l = (struct wpk_atomic_link){link, full, st.st_dev, st.st_ino, 1};
    a->nlinks++;
    return WPACK_OK;
}

void wpk_atomic_abort(wpk_atomic *a)
{
    settle_links(a, a->tmp == NULL); /* NULL: it went over the target (committed) */
    if (a->tmp)
        unlink(a->tmp); /* while still locked: no sweeper sees it half-gone */
    if (a->fd >= 0)
        close(a->fd);
    free(a->tmp);
    free(a->path);
    free(a->shown);
    a->tmp = a->path = a->shown = NULL;
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

/* s is what follows a temporary's name: NAME when s is ".new-NAME" (*gone
 * 0) or ".gone-NAME" (*gone 1), a file tied to the rename; else NULL. */
static const char *tied(const char *s, int *gone)
{
    const char *name = strncmp(s, ".new-", 5) == 0 ? s + 5 : strncmp(s, ".gone-", 6) == 0 ? s + 6 : NULL;
    if (!name || !*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return NULL;
    *gone = s[1] == 'g';
    return name;
}

static int tied_name(const char *s)
{
    int gone;
    return tied(s, &gone) != NULL;
}

/* Is s what a writer puts after its temporary's name in the names of its
 * other files: nothing, ".old" (resolver/output_commit.c's link to the old
 * archive), ".new-NAME" or ".gone-NAME" (tied files), ".shard-<n>" (a
 * finished shard, packer/writer_shards.c) or ".shard-<n>.tmp-<pid>-<hex>"
 * (a shard being written)? Only these: a name
 * with anything else after a temporary's is not a writer's file (extract's
 * NAME.npy of a tensor named "x.npy.tmp-1-0123456789abcdef" must stay).
 * Tied files only when tied_ok: they are made beside one target (a set's
 * manifest) and settled by its own sweep; a directory's sweep (extract's
 * NAME.npy files, whose names an archive chooses) leaves them, or a tensor
 * "x.npy.tmp-1-0123456789abcdef.new-y" extracted as such a name would be
 * removed by the next extract into that directory. */
static int writer_suffix(const char *s, int tied_ok)
{
    if (*s == 0 || strcmp(s, ".old") == 0 || (tied_ok && tied_name(s)))
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
static size_t owner_tail(const char *s, int tied_ok)
{
    size_t i = pid_hex(s);
    return i && writer_suffix(s + i, tied_ok) ? i : 0;
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
        size_t t = owner_tail(name + b + tag, 1);
        return t ? b + tag + t : 0;
    }
    size_t sl = strlen(suffix);
    for (const char *q = strstr(name, TMP_TAG); q; q = strstr(q + 1, TMP_TAG)) {
        size_t at = (size_t)(q - name);
        if (at <= sl || strncmp(q - sl, suffix, sl) != 0)
            continue;
        size_t t = owner_tail(q + tag, 0);
        if (t)
            return at + tag + t;
    }
    return 0;
}

/* Before a dead temporary owner (locked by this sweep) is removed: settle
 * its tied files as not renamed, those a first pass left because the
 * writer was still alive then (killed in between, a tied file outliving its
 * temporary would be taken for a rename by the next sweep, which removes
 * a gone file, a shard of the set still in place). 1 when one is left (not
 * this user's, or not removed): the temporary then stays. */
static int tied_left(int dfd, const char *owner)
{
    int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), left = 0;
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return 1;
    }
    size_t n = strlen(owner);
    struct dirent *de;
    while ((de = readdir(d))) {
        int gone;
        const char *name = strncmp(de->d_name, owner, n) == 0 ? tied(de->d_name + n, &gone) : NULL;
        struct stat st;
        if (!name || fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (st.st_uid == geteuid())
            settle(dfd, de->d_name, name, st.st_dev, st.st_ino, gone, 0, 0);
        left |= fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0;
    }
    closedir(d);
    return left;
}

/* Remove name when it is a regular file of ours whose owner is gone or
 * unlocked (the writer that held the lock has exited). A tied file
 * (".new-NAME", ".gone-NAME") is settled instead: its writer renamed its
 * temporary over the target when the temporary is gone and the link still
 * there (its writer and this sweep settle links before they remove a
 * temporary); *synced: the directory was fsynced for a gone file. */
static void remove_if_dead(int dfd, const char *dir, const char *name, const char *owner,
                           int *synced)
{
    struct stat st, ost;
    int gone;
    const char *tied_to = tied(name + strlen(owner), &gone);
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
        st.st_uid != geteuid())
        return;
    int ofd = openat(dfd, owner, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (ofd < 0) {
        /* A live writer's files under its name exist only while its own
         * temporary does: without it they are orphans. */
        if (errno != ENOENT)
            return;
        if (!tied_to) {
            unlinkat(dfd, name, 0);
        } else if (same_file(dfd, name, st.st_dev, st.st_ino)) { /* not settled by another */
            if (gone && !*synced) /* the rename durable before the old file goes */
                *synced = fsync_dir(dir) == 0;
            settle(dfd, name, tied_to, st.st_dev, st.st_ino, gone, 1, *synced);
        }
        return;
    }
    if (fstat(ofd, &ost) == 0 && S_ISREG(ost.st_mode) && ost.st_uid == geteuid() &&
        flock(ofd, LOCK_EX | LOCK_NB) == 0) {
        /* still the file we looked at (names are never reused, but check) */
        if (!same_file(dfd, name, st.st_dev, st.st_ino))
            ;
        else if (tied_to)
            settle(dfd, name, tied_to, st.st_dev, st.st_ino, gone, 0, 0);
        else if (name[strlen(owner)] != 0 || !tied_left(dfd, owner))
            unlinkat(dfd, name, 0); /* a temporary last, after its tied files */
    }
    close(ofd); /* releases the lock */
}

/* Two passes: a writer's other files first, then its temporaries (whose
 * absence tells that a tied file's writer committed). */
static void sweep(const char *dir, const char *base, const char *suffix)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    int dfd = dirfd(d), synced = 0;
    for (int pass = 0; pass < 2; pass++) {
        struct dirent *de;
        rewinddir(d);
        while ((de = readdir(d))) {
            size_t n = owner_len(de->d_name, base, suffix);
            if (!n || (pass == 0) != (de->d_name[n] != 0))
                continue;
            char owner[sizeof de->d_name];
            memcpy(owner, de->d_name, n);
            owner[n] = 0;
            remove_if_dead(dfd, dir, de->d_name, owner, &synced);
        }
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
