/*
 * atomic_file.h - the one way the project replaces a user-visible file:
 * write a temporary file beside the target, fsync it, rename it over the
 * target, fsync the directory. Readers see the old file or the whole new
 * one, never a part; a failure or a kill leaves the target as it was.
 *
 * The temporary is "TARGET.tmp-<pid>-<16 hex>" (with a long TARGET name,
 * one whose temporary would leave less than 49 bytes of NAME_MAX for the
 * writer's other files below, its head cut at a UTF-8 character and its
 * extension kept, e.g. "HEAD.npy.tmp-<pid>-<16 hex>": any name the file
 * system takes is an output, and the sweep knows the shortened names), created with
 * O_CREAT|O_EXCL|O_CLOEXEC and mode 0666 (the process umask applies; when
 * it replaces a regular file, that file's permission bits instead), and
 * its writer holds flock(LOCK_EX) on it for its whole life. A file named
 * "TARGET.tmp-<pid>-<hex>" followed by ".old", ".shard-<n>",
 * ".shard-<n>.tmp-<pid>-<hex>", ".new-NAME" or ".gone-NAME" belongs to the
 * same writer (a sharded set's finished shards wait under such names); any
 * other continuation is not a writer's file and is never removed. A later
 * open of the same target removes the dead ones: regular files of this user
 * whose owning temporary is gone or can be locked (its writer has exited,
 * even by kill -9). Live writers' files are never touched.
 *
 * ".new-NAME" and ".gone-NAME" are hard links that tie a file NAME beside
 * the target to the target's replacement (wpk_atomic_add_file,
 * wpk_atomic_add_gone): NAME is part of the new output (a shard of the new
 * set), or goes with the old one (a shard of the set replaced). The rename
 * of the temporary over the target is the one step that decides: before
 * it, a new NAME is removed again and a gone NAME kept; after it, the
 * other way round. The writer settles its links itself, before it removes
 * its temporary (on failure) or after the rename (on success); a killed
 * writer's links are settled by the sweep: temporary still there (and
 * unlocked) means not renamed, temporary gone while a link is still there
 * means renamed (nothing else removes a temporary before its links). NAME
 * is removed only while it is still the file linked. Only the sweep of the
 * one target settles them (wpk_atomic_sweep_dir leaves such names: extract
 * writes files named after tensors).
 */
#ifndef WPACK_FORMAT_ATOMIC_FILE_H
#define WPACK_FORMAT_ATOMIC_FILE_H

#include <stddef.h>

typedef struct wpk_atomic {
    char *path;     /* the target (through a followed symlink: the link's target) */
    char *tmp;      /* the temporary beside it; NULL once committed or aborted */
    int fd;         /* open for writing (and reading back); -1 when none */
    unsigned flags; /* WPK_ATOMIC_* as opened */
    int synced;     /* wpk_atomic_sync made it durable: commit does not fsync it again */
    unsigned kept_mode; /* S_IFREG | the permission bits the temporary took from the
                         * regular file it replaces; 0: none (a new file) */
    long kept_uid, kept_gid; /* that file's owner and group; -1: none */
    struct wpk_atomic_link *links; /* files tied to the rename (wpk_atomic_add_file/_gone) */
    size_t nlinks;
    int dir_synced;  /* the rename is durable: gone files may go */
    char *shown;     /* how messages name the target: the caller's path, "PATH -> TARGET"
                      * through a followed link */
    struct wpk_atomic_run *run; /* wpk_atomic_join: the run of many outputs it is part of */
    unsigned long long tag;     /* the caller's name for it in that run */
} wpk_atomic;

/* The files one run of a command with many outputs put in place (extract's
 * DIR/NAME.npy: names an archive chooses), by device and inode. Two
 * different names can be one file: a case-insensitive or normalizing file
 * system (ext4 casefold, vfat, exfat, APFS, NTFS) takes 'A.npy' and 'a.npy'
 * for one. Without a guard the second rename would replace the first file
 * of the same run, its data lost with success. Joined to a run, a commit
 * first looks at what its target is now: a file this run put in place
 * (under whatever name) is a collision, refused with WPACK_E_SAME_FILE and
 * nothing replaced; clash_old and clash_new then hold the tags of the file
 * in place and of the one refused. No folding rule is assumed: the file
 * system's own lookup decides. Memory: one slot per file (a hash set). */
typedef struct wpk_atomic_run {
    struct wpk_atomic_placed *slots; /* open addressing, at most half full */
    size_t n, cap;
    unsigned long long clash_old, clash_new;
} wpk_atomic_run;

/* Make a (opened, not yet committed) part of run, under tag; the run must
 * outlive its commit. A zeroed wpk_atomic_run is an empty run. */
void wpk_atomic_join(wpk_atomic *a, wpk_atomic_run *run, unsigned long long tag);

/* Count a file put in place by other means (its device and inode) as one
 * of run's. WPACK_OK or WPACK_E_NOMEM. */
int wpk_atomic_run_add(wpk_atomic_run *run, unsigned long long dev, unsigned long long ino,
                       unsigned long long tag);

/* Release what the run holds (it is empty again). */
void wpk_atomic_run_free(wpk_atomic_run *run);

/* Give fd (a file written beside a's target, e.g. a shard) the permission
 * bits, owner and group a's temporary kept from the file it replaces:
 * nothing when it replaces none. Best effort, as for a's own temporary. */
void wpk_atomic_keep_like(const wpk_atomic *a, int fd);

/* Do not sweep the target's dead temporaries first (the caller swept the
 * whole directory once, or the target is itself a writer's own file). */
#define WPK_ATOMIC_NO_SWEEP 1u
/* The caller's opt-out of durability (a writer's no_sync, `--no-sync`): no
 * fsync of the file nor of its directory, no writeback started. Everything
 * else stays (temporary, O_EXCL, lock, rename): other processes still see
 * the old file or the whole new one, but after a power loss or an OS crash
 * the new file may be missing, empty or torn and the old one lost. Never
 * for an in-place update, whose fsyncs order its crash safety. */
#define WPK_ATOMIC_NO_SYNC 2u
/* Commit renames without the fsync of the directory: the caller renames
 * more files into that directory and fsyncs it once after the last (a
 * sharded set's shards, whose manifest's commit syncs the directory). */
#define WPK_ATOMIC_NO_DIR_SYNC 4u

/* A target that is a symlink is written through: its target is replaced
 * (the temporary goes beside it), as cp, torch.save and shell redirections
 * do - for paths a user named as outputs. Only a link the caller owns is
 * followed (the rule of the kernel's protected_symlinks: a link planted by
 * another user in a shared directory is refused), and one whose target is
 * missing is refused too. Without this flag a symlink at the target is
 * itself replaced by the new file (names an output derives, such as
 * extract's DIR/NAME.npy: nothing is ever written outside DIR). */
#define WPK_ATOMIC_FOLLOW_LINK 8u
/* The file is private: the temporary is created 0600 (not 0666 less the
 * umask) and takes nothing from a file it replaces. For copies of what
 * only its user may read or change (the remote chunk cache: a private
 * model's bytes, which other users could otherwise read or, under a umask
 * of 0, rewrite). */
#define WPK_ATOMIC_PRIVATE 16u
/* The target is itself a writer's file named after its temporary (a shard
 * "TMP.shard-<n>"): its temporary is "TARGET.tmp-<pid>-<hex>" in full,
 * never shortened (see the naming above), so the sweep of the set's target
 * knows it. The manifest's temporary kept room for it. */
#define WPK_ATOMIC_OWN_NAME 32u

/* Every failure message of these functions names the path it concerns
 * once, as the caller gave it ("LINK -> TARGET" through a followed link):
 * callers print it as it is, with no path of their own before it.
 *
 * Create the temporary for path. A target that exists and is not a regular
 * file (a device, FIFO, socket or directory; a symlink as above) is never
 * replaced: WPACK_E_FILE_TYPE; nor is a write-protected file
 * (wpk_atomic_writable): WPACK_E_IO. Both checked here and again just
 * before the rename. On failure *a holds nothing to release, err says what
 * and where, and the result is WPACK_E_FILE_TYPE, WPACK_E_IO or
 * WPACK_E_NOMEM. */
int wpk_atomic_open(wpk_atomic *a, const char *path, unsigned flags, char *err, size_t errlen);

/* A regular file whose mode has no write bit (chmod a-w, 0444) is
 * write-protected: never replaced (wpk_atomic_open, wpk_atomic_check, and
 * again before the rename) nor written in place (packer/update.c), even by
 * root, whom access(W_OK) never stops: the user asked to keep it, as rm
 * and cp -i respect. WPACK_OK when mode has a write bit, else WPACK_E_IO
 * with err naming path (and " -> real" when real is not NULL). */
int wpk_atomic_writable(const char *path, const char *real, unsigned mode, char *err,
                        size_t errlen);
/* What wpk_atomic_open checks of the target (flags as it takes them),
 * creating nothing: a command with many outputs refuses one that would be
 * refused before it writes any. WPACK_OK, or as wpk_atomic_open. */
int wpk_atomic_check(const char *path, unsigned flags, char *err, size_t errlen);

/* fsync the temporary (its data is durable; still not at the target). A
 * later commit does not fsync it again: write nothing more in between.
 * Nothing to do under WPK_ATOMIC_NO_SYNC. */
int wpk_atomic_sync(wpk_atomic *a, char *err, size_t errlen);

/* Start writeback of what the temporary holds so far, without waiting
 * (sync_file_range): the disk works while the caller goes on, and the
 * final fsync has little left. Nothing under WPK_ATOMIC_NO_SYNC. */
void wpk_atomic_kick(wpk_atomic *a);

/* fsync, rename over the target, fsync the directory, close. On failure the
 * temporary is removed. *a is released either way. A target that is now a
 * file its run put in place is not replaced (wpk_atomic_run). */
int wpk_atomic_commit(wpk_atomic *a, char *err, size_t errlen);

/* Commit n files of one directory together, as durable as n commits but
 * with one barrier per file and one for the directory instead of two per
 * file: fsync each (all their data was written first, so writeback of one
 * overlapped the writing of the next; see wpk_atomic_kick), then rename
 * each, then fsync the directory once. Each file still appears whole or
 * not at all. A failed fsync renames none; a failed rename leaves the
 * files before it in place and removes the others. All n handles are
 * released either way; err names the first failure. */
int wpk_atomic_commit_all(wpk_atomic *a, size_t n, char *err, size_t errlen);

/* Put the file at from (a file of this writer, named after its temporary,
 * such as a finished shard) in place as NAME in the target's directory
 * too, tied to the target's commit: it moves to "TMP.new-NAME" and NAME
 * becomes a second link to it (never replacing a file there:
 * WPACK_E_EXISTS). A commit keeps NAME; an abort, a failed commit or the
 * sweep after a kill before the rename removes it. On failure from is
 * where it was, or at NAME when no link can be made there (a name too long
 * for the link, a file system without hard links): NAME is then still
 * removed by an abort, but not after a kill. */
int wpk_atomic_add_file(wpk_atomic *a, const char *from, const char *name, char *err,
                        size_t errlen);

/* The regular file at path (in the target's directory) goes when the target
 * is put in place, not before: linked as "TMP.gone-NAME", removed after the
 * commit's directory fsync (by the commit, or by the sweep when the writer
 * was killed after its rename). An abort or a failed commit leaves it. Where
 * no link can be made, it is still removed after a commit but not after a
 * kill; so also for a file whose owner is not the temporary's. WPACK_OK
 * (also when nothing is at path), or WPACK_E_NOMEM. */
int wpk_atomic_add_gone(wpk_atomic *a, const char *path, char *err, size_t errlen);

/* Close and remove the temporary; nothing happens at the target (the files
 * added with wpk_atomic_add_file are removed first, those of add_gone
 * kept). Safe on a zeroed, committed or already aborted handle. */
void wpk_atomic_abort(wpk_atomic *a);

/* Remove the dead temporaries of path (see above). */
void wpk_atomic_sweep(const char *path);

/* The same for every target in dir whose name ends with suffix (one
 * directory pass for a command that writes many files there). */
void wpk_atomic_sweep_dir(const char *dir, const char *suffix);

#endif
