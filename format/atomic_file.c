/*
 * atomic_file.c - temporary file beside the target, fsync, rename, fsync of
 * the directory (one file, or a batch of one directory's files); the files
 * tied to the rename (atomic_file.h says the naming and the rules;
 * atomic_sweep.c removes dead writers' files).
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
#include "atomic_names.h"
#include "internal.h"


/* The stem of the temporaries of a target named base (no '/') whose writer's
 * pid has pidlen digits, into out (NAME_MAX_BYTES + 1 bytes): base itself
 * when "base.tmp-<pid>-<hex>" leaves TAIL_ROOM within NAME_MAX_BYTES; else
 * base's head, cut at a UTF-8 character, then its extension (up to EXT_MAX
 * bytes: ".npy", so a directory's sweep by suffix finds it too). A name the
 * file system accepts is then an output too (the temporary of a 250-byte
 * name was 282 bytes: ENAMETOOLONG). The sweep computes the same stems. */
size_t wpk_atomic_stem(const char *base, size_t pidlen, char *out)
{
    size_t n = strlen(base), max = NAME_MAX_BYTES - TAIL_ROOM - (sizeof TMP_TAG - 1) - pidlen - 1 - TMP_HEX;
    if (n <= max) {
        memcpy(out, base, n + 1);
        return n;
    }
    const char *dot = strrchr(base, '.');
    size_t ext = dot && dot != base && strlen(dot) <= EXT_MAX ? strlen(dot) : 0;
    size_t k = max - ext;
    while (k > 0 && ((unsigned char)base[k] & 0xC0) == 0x80)
        k--;
    memcpy(out, base, k);
    memcpy(out + k, base + n - ext, ext + 1);
    return k + ext;
}

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
void wpk_atomic_dir_of(const char *path, char *buf, size_t len)
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
int wpk_atomic_fsync_dir(const char *dir)
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
    wpk_atomic_dir_of(path, dir, sizeof dir);
    return wpk_atomic_fsync_dir(dir);
}

/* A file tied to the rename of a's temporary (atomic_file.h). */
struct wpk_atomic_link {
    char *link;      /* "TMP.new-NAME" / "TMP.gone-NAME"; NULL: none could be made */
    char *name;      /* the path of NAME */
    dev_t dev;       /* the file, by device and inode: NAME is removed */
    ino_t ino;       /* only while it is still this file */
    int gone;        /* 1: goes with the old target; 0: part of the new one */
};

int wpk_atomic_same_file(int dfd, const char *name, dev_t dev, ino_t ino)
{
    struct stat st;
    return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
           st.st_dev == dev && st.st_ino == ino;
}

/* The one rule of a tied file, for its writer and for the sweep: a new
 * file is removed unless the target was renamed, a gone file only when it
 * was (and that rename is durable); NAME first, then the link (a kill in
 * between leaves the link for the sweep). NAME and link relative to dfd. */
void wpk_atomic_settle(int dfd, const char *link, const char *name, dev_t dev, ino_t ino, int gone,
                   int renamed, int durable)
{
    if ((gone ? renamed && durable : !renamed) && wpk_atomic_same_file(dfd, name, dev, ino))
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
            struct stat to;
            /* /dev/stdout onto a pipe: /proc/self/fd/1 leads to "pipe:[N]",
             * which has no path; say what it is, not that it is missing */
            if (e == ENOENT && stat(path, &to) == 0)
                wpk_fmt(err, errlen, "%s: a symlink to %s that has no path of its own (a pipe, "
                        "socket or deleted file): not replaced; give a file name", path,
                        S_ISREG(to.st_mode) ? "a file" : kind_of(to.st_mode));
            else
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
        int rc = wpk_atomic_writable(shown, *real, st.st_mode, err, errlen);
        if (rc) {
            free(*real);
            *real = NULL;
        }
        return rc;
    }
    wpk_fmt(err, errlen, "%s%s%s: %s, not a regular file: not replaced", shown, *real ? " -> " : "",
            *real ? *real : "", kind_of(st.st_mode));
    free(*real);
    *real = NULL;
    return WPACK_E_FILE_TYPE;
}

int wpk_atomic_writable(const char *path, const char *real, unsigned mode, char *err,
                        size_t errlen)
{
    /* The mode bits, not access(W_OK): root may write anything, and a
     * user's chmod a-w still means "keep this" (rm asks, cp -i refuses). */
    if (mode & 0222)
        return WPACK_OK;
    wpk_fmt(err, errlen, "%s%s%s: write-protected (mode %04o): not replaced; chmod u+w it or "
            "remove it first", path, real ? " -> " : "", real ? real : "", mode & 07777);
    return WPACK_E_IO;
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
    char pid[24], stem[NAME_MAX_BYTES + 1];
    size_t dir = wpk_dir_len(path);
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    const char *use = path + dir; /* a writer's own file (WPK_ATOMIC_OWN_NAME): room was kept */
    if (!(flags & WPK_ATOMIC_OWN_NAME))
        wpk_atomic_stem(use, strlen(pid), stem), use = stem;
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
        snprintf(a->tmp, tn, "%.*s%s" TMP_TAG "%s-%016llx", (int)dir, path, use, pid,
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
        wpk_atomic_settle(AT_FDCWD, l->link, l->name, l->dev, l->ino, l->gone, renamed, a->dir_synced);
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
    size_t n = strlen(name), tbase = strlen(a->tmp + wpk_dir_len(a->tmp));
    *path = wpk_path_beside(a->path, name, n);
    *link = NULL;
    if (!*path)
        return WPACK_E_NOMEM;
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
