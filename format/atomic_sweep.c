/*
 * atomic_sweep.c - the sweep that removes dead writers' temporaries and
 * settles their tied files (atomic_file.h says the naming and the rules;
 * atomic_file.c is the writer).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "atomic_names.h"
#include "internal.h"

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

/* What a sweep covers: the temporaries of one target (base: its name, and
 * the shortened stems tmp_stem gives it, one per pid length), or of any
 * target whose name ends with suffix (base NULL). */
typedef struct {
    const char *base, *suffix;
    size_t nstems;
    char stem[PID_DIGITS][NAME_MAX_BYTES + 1];
    size_t pidlen[PID_DIGITS]; /* the pid length stem[i] is made for */
} covered;

/* The length of the owning temporary's name at the start of name when it
 * is stem's (followed by ".tmp-<pid>-<hex>", a pid of pidlen digits unless
 * pidlen is 0, and a writer's suffix), else 0. */
static size_t stem_owner(const char *name, const char *stem, size_t pidlen)
{
    size_t b = strlen(stem), tag = strlen(TMP_TAG);
    if (strncmp(name, stem, b) != 0 || strncmp(name + b, TMP_TAG, tag) != 0)
        return 0;
    size_t t = owner_tail(name + b + tag, 1);
    if (!t || (pidlen && t - 1 - TMP_HEX != pidlen))
        return 0;
    return b + tag + t;
}

/* The length of the owning temporary's name at the start of name, or 0
 * when name is not a temporary of a target this sweep covers. */
static size_t owner_len(const char *name, const covered *c)
{
    size_t tag = strlen(TMP_TAG);
    if (c->base) {
        size_t t = stem_owner(name, c->base, 0);
        for (size_t i = 0; !t && i < c->nstems; i++)
            t = stem_owner(name, c->stem[i], c->pidlen[i]);
        return t;
    }
    size_t sl = strlen(c->suffix);
    for (const char *q = strstr(name, TMP_TAG); q; q = strstr(q + 1, TMP_TAG)) {
        size_t at = (size_t)(q - name);
        if (at <= sl || strncmp(q - sl, c->suffix, sl) != 0)
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
            wpk_atomic_settle(dfd, de->d_name, name, st.st_dev, st.st_ino, gone, 0, 0);
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
        } else if (wpk_atomic_same_file(dfd, name, st.st_dev, st.st_ino)) { /* not settled by another */
            if (gone && !*synced) /* the rename durable before the old file goes */
                *synced = wpk_atomic_fsync_dir(dir) == 0;
            wpk_atomic_settle(dfd, name, tied_to, st.st_dev, st.st_ino, gone, 1, *synced);
        }
        return;
    }
    if (fstat(ofd, &ost) == 0 && S_ISREG(ost.st_mode) && ost.st_uid == geteuid() &&
        flock(ofd, LOCK_EX | LOCK_NB) == 0) {
        /* still the file we looked at (names are never reused, but check) */
        if (!wpk_atomic_same_file(dfd, name, st.st_dev, st.st_ino))
            ;
        else if (tied_to)
            wpk_atomic_settle(dfd, name, tied_to, st.st_dev, st.st_ino, gone, 0, 0);
        else if (name[strlen(owner)] != 0 || !tied_left(dfd, owner))
            unlinkat(dfd, name, 0); /* a temporary last, after its tied files */
    }
    close(ofd); /* releases the lock */
}

/* Two passes: a writer's other files first, then its temporaries (whose
 * absence tells that a tied file's writer committed). */
static void sweep(const char *dir, const covered *c)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    int dfd = dirfd(d), synced = 0;
    for (int pass = 0; pass < 2; pass++) {
        struct dirent *de;
        rewinddir(d);
        while ((de = readdir(d))) {
            size_t n = owner_len(de->d_name, c);
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
    wpk_atomic_dir_of(path, dir, sizeof dir);
    const char *base = path + wpk_dir_len(path);
    if (!*base || strlen(base) > NAME_MAX_BYTES)
        return;
    covered *c = malloc(sizeof *c);
    if (!c)
        return;
    c->base = base;
    c->suffix = NULL;
    c->nstems = 0;
    for (size_t p = 1; p <= PID_DIGITS; p++) {
        wpk_atomic_stem(base, p, c->stem[c->nstems]);
        if (strcmp(c->stem[c->nstems], base) != 0)
            c->pidlen[c->nstems++] = p;
    }
    sweep(dir, c);
    free(c);
}

void wpk_atomic_sweep_dir(const char *dir, const char *suffix)
{
    covered c = {NULL, suffix ? suffix : "", 0, {{0}}, {0}};
    sweep(dir, &c);
}
