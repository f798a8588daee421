/* test_atomic_batch.c - format/atomic_file.c's durability rules, counted:
 * a commit fsyncs the file and its directory (2), not the file twice after
 * wpk_atomic_sync; WPK_ATOMIC_NO_SYNC makes no sync call at all and
 * WPK_ATOMIC_NO_DIR_SYNC skips only the directory's; wpk_atomic_commit_all
 * of N files makes N + 1 fsyncs, and on a failed fsync renames none, on a
 * failed rename keeps the files before it and leaves no temporary. Every
 * failure message names its path once, the caller's (through a link, the
 * link and its target). A commit joined to a run never replaces a file of
 * that run that a folding file system takes for its target.
 *
 * fsync and sync_file_range are defined here: the libraries are linked in
 * statically, so every call of theirs comes here (counted, then done with
 * the system call; fsync can be made to fail on demand, as can rename and
 * strdup). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "atomic_file.h"
#include "testlib.h"
#include "wpack.h"

static int n_fsync, n_range, fail_fsync_at; /* fail the fail_fsync_at-th call (1-based; 0 never) */

int fsync(int fd)
{
    n_fsync++;
    if (fail_fsync_at && n_fsync == fail_fsync_at) {
        errno = EIO;
        return -1;
    }
    return (int)syscall(SYS_fsync, fd);
}

int sync_file_range(int fd, off_t off, off_t n, unsigned int flags)
{
    n_range++;
    return (int)syscall(SYS_sync_file_range, fd, off, n, flags);
}

/* strdup fails while fail_strdup is set (out of memory, on demand); rename
 * fails with EIO while fail_rename is set. */
static int fail_strdup, fail_rename;

char *strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = fail_strdup ? NULL : malloc(n);
    return p ? memcpy(p, s, n) : NULL;
}

static char dir[256];

/* How many times needle occurs in hay. */
static int times(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *q = strstr(hay, needle); q; q = strstr(q + 1, needle))
        n++;
    return n;
}

/* A case-insensitive directory, simulated: with fold_case set, rename and
 * lstat of a path in dir take its last component in lower case (the
 * library's calls come here, as fsync's do). */
static int fold_case;

static const char *folded(const char *p, char *buf, size_t len)
{
    size_t dl = strlen(dir);
    if (!fold_case || strncmp(p, dir, dl) != 0 || p[dl] != '/' || strchr(p + dl + 1, '/') ||
        strstr(p, ".tmp-"))
        return p;
    snprintf(buf, len, "%s", p);
    for (char *c = buf + dl + 1; *c; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
    return buf;
}

int rename(const char *from, const char *to)
{
    if (fail_rename) {
        errno = EIO;
        return -1;
    }
    char b[512];
    return (int)syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, folded(to, b, sizeof b), 0);
}

int lstat(const char *p, struct stat *st)
{
    char b[512];
    return (int)syscall(SYS_newfstatat, AT_FDCWD, folded(p, b, sizeof b), st, AT_SYMLINK_NOFOLLOW);
}

static void reset(void)
{
    n_fsync = n_range = fail_fsync_at = 0;
}

static void path_of(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", dir, name);
}

/* The file's text ("" when missing). */
static void text_of(const char *p, char *buf, size_t len)
{
    buf[0] = 0;
    FILE *f = fopen(p, "r");
    if (f) {
        if (!fgets(buf, (int)len, f))
            buf[0] = 0;
        fclose(f);
    }
}

/* Temporaries (".tmp-") left in dir. */
static int temporaries(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        n += strstr(de->d_name, ".tmp-") != NULL;
    if (d)
        closedir(d);
    return n;
}

/* Open name's temporary with flags and write text to it. */
static int open_with(wpk_atomic *a, const char *name, unsigned flags, const char *text)
{
    char p[512], err[300];
    path_of(p, sizeof p, name);
    int rc = wpk_atomic_open(a, p, flags, err, sizeof err);
    CHECK(rc == WPACK_OK, "open %s: %s", name, err);
    if (rc == WPACK_OK)
        CHECK(write(a->fd, text, strlen(text)) == (ssize_t)strlen(text), "write %s", name);
    return rc;
}

static void test_commit_counts(void)
{
    char err[300], p[512], t[32];
    wpk_atomic a;
    reset();
    if (open_with(&a, "one", 0, "1") == WPACK_OK)
        CHECK(wpk_atomic_commit(&a, err, sizeof err) == WPACK_OK, "commit: %s", err);
    CHECK_EQ(n_fsync, 2); /* the file, its directory */
    reset();
    if (open_with(&a, "two", 0, "2") == WPACK_OK) {
        CHECK(wpk_atomic_sync(&a, err, sizeof err) == WPACK_OK, "sync: %s", err);
        CHECK(wpk_atomic_commit(&a, err, sizeof err) == WPACK_OK, "commit: %s", err);
    }
    CHECK_EQ(n_fsync, 2); /* not fsynced twice */
    reset();
    if (open_with(&a, "three", WPK_ATOMIC_NO_SYNC, "3") == WPACK_OK) {
        wpk_atomic_kick(&a);
        CHECK(wpk_atomic_sync(&a, err, sizeof err) == WPACK_OK, "sync: %s", err);
        CHECK(wpk_atomic_commit(&a, err, sizeof err) == WPACK_OK, "commit: %s", err);
    }
    CHECK_EQ(n_fsync, 0);
    CHECK_EQ(n_range, 0);
    path_of(p, sizeof p, "three");
    text_of(p, t, sizeof t);
    CHECK(strcmp(t, "3") == 0, "NO_SYNC still puts the file in place: '%s'", t);
    reset();
    if (open_with(&a, "four", WPK_ATOMIC_NO_DIR_SYNC, "4") == WPACK_OK) {
        wpk_atomic_kick(&a);
        CHECK(wpk_atomic_commit(&a, err, sizeof err) == WPACK_OK, "commit: %s", err);
    }
    CHECK_EQ(n_fsync, 1); /* the file only */
    CHECK_EQ(n_range, 1);
    CHECK_EQ(temporaries(), 0);
}

enum { N = 5 };

static void test_commit_all(void)
{
    static const char *names[N] = {"b0", "b1", "b2", "b3", "b4"};
    char err[300], p[512], t[32];
    for (int flags = 0; flags <= (int)WPK_ATOMIC_NO_SYNC; flags += (int)WPK_ATOMIC_NO_SYNC) {
        wpk_atomic a[N];
        int opened = 1;
        for (int k = 0; k < N; k++)
            opened &= open_with(&a[k], names[k], WPK_ATOMIC_NO_SWEEP | (unsigned)flags, names[k]) ==
                      WPACK_OK;
        if (!opened)
            return;
        reset();
        CHECK(wpk_atomic_commit_all(a, N, err, sizeof err) == WPACK_OK, "commit_all: %s", err);
        CHECK_EQ(n_fsync, flags ? 0 : N + 1); /* each file, then the directory once */
        for (int k = 0; k < N; k++) {
            path_of(p, sizeof p, names[k]);
            text_of(p, t, sizeof t);
            CHECK(strcmp(t, names[k]) == 0, "%s holds '%s'", names[k], t);
            CHECK(a[k].fd == -1 && a[k].tmp == NULL, "handle %d released", k);
        }
        CHECK_EQ(temporaries(), 0);
    }
}

static void test_commit_all_failed_fsync(void)
{
    char err[300] = "", p[512];
    wpk_atomic a[3];
    for (int k = 0; k < 3; k++) {
        char name[16];
        snprintf(name, sizeof name, "f%d", k);
        if (open_with(&a[k], name, WPK_ATOMIC_NO_SWEEP, "x") != WPACK_OK)
            return;
    }
    reset();
    fail_fsync_at = 2;
    CHECK(wpk_atomic_commit_all(a, 3, err, sizeof err) == WPACK_E_IO, "want WPACK_E_IO");
    CHECK(strstr(err, "/f1") && strstr(err, "fsync"), "the message names f1 and fsync: %s", err);
    for (int k = 0; k < 3; k++) {
        char name[16];
        snprintf(name, sizeof name, "f%d", k);
        path_of(p, sizeof p, name);
        CHECK(access(p, F_OK) != 0, "%s renamed although an fsync failed", name);
    }
    CHECK_EQ(temporaries(), 0);
    reset();
}

static void test_commit_all_failed_rename(void)
{
    char err[300] = "", p[512], t[32];
    wpk_atomic a[3];
    static const char *names[3] = {"r0", "r1", "r2"};
    for (int k = 0; k < 3; k++)
        if (open_with(&a[k], names[k], WPK_ATOMIC_NO_SWEEP, names[k]) != WPACK_OK)
            return;
    /* r1's target becomes a non-empty directory after the opens: its
     * commit fails (refused before the rename: never replaced) */
    path_of(p, sizeof p, "r1");
    CHECK(mkdir(p, 0700) == 0, "mkdir r1");
    path_of(p, sizeof p, "r1/keep");
    FILE *f = fopen(p, "w");
    if (f)
        fclose(f);
    reset();
    CHECK(wpk_atomic_commit_all(a, 3, err, sizeof err) == WPACK_E_FILE_TYPE, "want WPACK_E_FILE_TYPE");
    CHECK(strstr(err, "/r1") && strstr(err, "a directory, not a regular file: not replaced"),
          "the message names r1: %s", err);
    path_of(p, sizeof p, "r0");
    text_of(p, t, sizeof t);
    CHECK(strcmp(t, "r0") == 0, "r0, before the failure, is in place: '%s'", t);
    path_of(p, sizeof p, "r2");
    CHECK(access(p, F_OK) != 0, "r2, after the failure, is not");
    CHECK_EQ(n_fsync, 3 + 1); /* all three files, then the directory for r0's rename */
    CHECK_EQ(temporaries(), 0);
}

/* Two names a case-insensitive file system takes for one ("CA", "ca"),
 * committed in one run (extract's A.weight.npy and a.weight.npy): the
 * second is refused, naming its path, and the first file stays whole;
 * clash_old and clash_new tell the caller which two. Without the run the
 * second rename replaced the first file. A third file of the batch after
 * the refused one is not put in place; one before it is. Alone (one file
 * per commit) the same. Then a file that was there before the run is
 * replaced as ever, folded name or not. */
static void test_run_refuses_folded_names(void)
{
    char err[300] = "", p[512], t[32];
    wpk_atomic a[4];
    wpk_atomic_run run = {0};
    static const char *names[4] = {"x0", "CA", "ca", "x3"};
    fold_case = 1;
    for (int k = 0; k < 4; k++) {
        if (open_with(&a[k], names[k], WPK_ATOMIC_NO_SWEEP, names[k]) != WPACK_OK)
            return;
        wpk_atomic_join(&a[k], &run, 10u + (unsigned)k);
    }
    CHECK(wpk_atomic_commit_all(a, 4, err, sizeof err) == WPACK_E_SAME_FILE,
          "want WPACK_E_SAME_FILE: %s", err);
    CHECK(strstr(err, "/ca: is a file this run already wrote under another name") != NULL,
          "the message names ca: %s", err);
    CHECK(run.clash_old == 11 && run.clash_new == 12, "clash tags %llu %llu", run.clash_old,
          run.clash_new);
    path_of(p, sizeof p, "ca");
    text_of(p, t, sizeof t);
    CHECK(strcmp(t, "CA") == 0, "the first file of the two stays whole: '%s'", t);
    path_of(p, sizeof p, "x0");
    text_of(p, t, sizeof t);
    CHECK(strcmp(t, "x0") == 0, "x0, before the refusal, is in place: '%s'", t);
    path_of(p, sizeof p, "x3");
    CHECK(access(p, F_OK) != 0, "x3, after the refusal, is not");
    CHECK_EQ(temporaries(), 0);

    /* one commit at a time, same run: "Ca" is the file "CA" put in place */
    run.clash_old = run.clash_new = 0;
    if (open_with(&a[0], "Ca", WPK_ATOMIC_NO_SWEEP, "Ca") == WPACK_OK) {
        wpk_atomic_join(&a[0], &run, 20);
        CHECK(wpk_atomic_commit(&a[0], err, sizeof err) == WPACK_E_SAME_FILE,
              "single commit: want WPACK_E_SAME_FILE: %s", err);
        CHECK(run.clash_old == 11 && run.clash_new == 20, "clash tags %llu %llu", run.clash_old,
              run.clash_new);
    }
    path_of(p, sizeof p, "ca");
    text_of(p, t, sizeof t);
    CHECK(strcmp(t, "CA") == 0, "still the first file: '%s'", t);
    wpk_atomic_run_free(&run);

    /* a new run: the file at "ca" is not one of its own, and is replaced */
    if (open_with(&a[0], "cA", WPK_ATOMIC_NO_SWEEP, "cA") == WPACK_OK) {
        wpk_atomic_join(&a[0], &run, 30);
        CHECK(wpk_atomic_commit(&a[0], err, sizeof err) == WPACK_OK, "new run: %s", err);
    }
    text_of(p, t, sizeof t);
    CHECK(strcmp(t, "cA") == 0, "a file of an earlier run is replaced: '%s'", t);
    CHECK_EQ(temporaries(), 0);
    wpk_atomic_run_free(&run);
    fold_case = 0;
}

/* Many files in one run: the set grows (rehashes) and refuses none of
 * them, nor forgets one: each name again is refused. */
static void test_run_many(void)
{
    char err[300] = "", name[32];
    wpk_atomic_run run = {0};
    wpk_atomic a;
    enum { M = 300 };
    int ok = 0, refused = 0;
    for (int k = 0; k < M; k++) {
        snprintf(name, sizeof name, "m%d", k);
        if (open_with(&a, name, WPK_ATOMIC_NO_SWEEP | WPK_ATOMIC_NO_SYNC, name) != WPACK_OK)
            break;
        wpk_atomic_join(&a, &run, (unsigned)k);
        ok += wpk_atomic_commit(&a, err, sizeof err) == WPACK_OK;
    }
    CHECK_EQ(ok, M);
    CHECK_EQ(run.n, M);
    for (int k = 0; k < M; k++) {
        snprintf(name, sizeof name, "m%d", k);
        if (open_with(&a, name, WPK_ATOMIC_NO_SWEEP | WPK_ATOMIC_NO_SYNC, "again") != WPACK_OK)
            break;
        wpk_atomic_join(&a, &run, 1000u + (unsigned)k);
        refused += wpk_atomic_commit(&a, err, sizeof err) == WPACK_E_SAME_FILE &&
                   run.clash_old == (unsigned)k;
    }
    CHECK_EQ(refused, M);
    CHECK_EQ(temporaries(), 0);
    wpk_atomic_run_free(&run);
}

/* A target that is not a regular file is refused at the open: nothing is
 * created beside it (a rename would have replaced a FIFO or a device). */
static void test_open_refuses_non_regular(void)
{
    char err[300] = "", p[512];
    wpk_atomic a;
    path_of(p, sizeof p, "fifo");
    CHECK(mkfifo(p, 0600) == 0, "mkfifo");
    CHECK(wpk_atomic_open(&a, p, 0, err, sizeof err) == WPACK_E_FILE_TYPE, "fifo refused");
    CHECK(strstr(err, "a FIFO, not a regular file: not replaced") != NULL, "message: %s", err);
    path_of(p, sizeof p, "adir");
    CHECK(mkdir(p, 0700) == 0, "mkdir");
    CHECK(wpk_atomic_open(&a, p, 0, err, sizeof err) == WPACK_E_FILE_TYPE, "directory refused");
    CHECK_EQ(temporaries(), 0);
}

/* Every failure message names the path it concerns, once, as the caller
 * gave it: through a followed symlink the link and its target. */
static void test_messages_name_the_path(void)
{
    char err[600], p[512], link[512], target[512];
    wpk_atomic a;
    /* out of memory at the open */
    path_of(p, sizeof p, "oom.bin");
    fail_strdup = 1;
    CHECK(wpk_atomic_open(&a, p, WPK_ATOMIC_NO_SWEEP, err, sizeof err) == WPACK_E_NOMEM, "want NOMEM");
    fail_strdup = 0;
    CHECK(times(err, p) == 1 && strstr(err, "out of memory"), "names %s once: %s", p, err);
    /* a parent that is a file */
    path_of(p, sizeof p, "plain");
    FILE *f = fopen(p, "w");
    if (f)
        fclose(f);
    path_of(p, sizeof p, "plain/x.bin");
    CHECK(wpk_atomic_open(&a, p, 0, err, sizeof err) == WPACK_E_IO, "parent is a file");
    CHECK(times(err, p) == 1, "names %s once: %s", p, err);
    /* through a link: the rename fails, then the directory's fsync */
    path_of(target, sizeof target, "target.bin");
    path_of(link, sizeof link, "link.bin");
    CHECK(symlink("target.bin", link) == 0, "symlink");
    f = fopen(target, "w");
    if (f)
        fclose(f);
    for (int step = 0; step < 2; step++) {
        if (open_with(&a, "link.bin", WPK_ATOMIC_FOLLOW_LINK, "x") != WPACK_OK)
            return;
        reset();
        fail_rename = step == 0;
        fail_fsync_at = step == 1 ? 2 : 0; /* the file's, then the directory's */
        CHECK(wpk_atomic_commit(&a, err, sizeof err) == WPACK_E_IO, "step %d: want WPACK_E_IO", step);
        fail_rename = 0;
        reset();
        CHECK(strstr(err, step ? "fsync of its directory failed" : "cannot rename into place"),
              "step %d: %s", step, err);
        CHECK(times(err, link) == 1 && times(err, "target.bin") == 1,
              "step %d: names %s and its target once each: %s", step, link, err);
    }
    /* a file tied to the rename, out of memory (not beside the target: strdup'd) */
    if (open_with(&a, "tied.bin", WPK_ATOMIC_NO_SWEEP, "x") != WPACK_OK)
        return;
    char other[512];
    snprintf(other, sizeof other, "%s/sub", dir);
    CHECK(mkdir(other, 0700) == 0, "mkdir sub");
    snprintf(other, sizeof other, "%s/sub/gone.bin", dir);
    f = fopen(other, "w");
    if (f)
        fclose(f);
    fail_strdup = 1;
    CHECK(wpk_atomic_add_gone(&a, other, err, sizeof err) == WPACK_E_NOMEM, "add_gone: want NOMEM");
    fail_strdup = 0;
    CHECK(times(err, other) == 1, "names %s once: %s", other, err);
    wpk_atomic_abort(&a);
    CHECK_EQ(temporaries(), 0);
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s/wpack-atomic-batch-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        printf("FAIL setup: mkdtemp %s\n", dir);
        return 1;
    }
    RUN(test_commit_counts);
    RUN(test_commit_all);
    RUN(test_commit_all_failed_fsync);
    RUN(test_commit_all_failed_rename);
    RUN(test_messages_name_the_path);
    RUN(test_open_refuses_non_regular);
    RUN(test_run_refuses_folded_names);
    RUN(test_run_many);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        printf("# could not remove %s\n", dir);
    return tl_finish();
}
