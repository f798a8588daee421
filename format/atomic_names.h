/*
 * atomic_names.h - what atomic_file.c (the writer) and atomic_sweep.c (the
 * sweep of dead writers' files) share: the temporaries' naming and the one
 * rule that settles a tied file. Private to format/.
 */
#ifndef WPACK_FORMAT_ATOMIC_NAMES_H
#define WPACK_FORMAT_ATOMIC_NAMES_H
#include <stddef.h>
#include <sys/types.h>

#define TMP_TAG ".tmp-"
#define TMP_HEX 16
#define NAME_MAX_BYTES 255 /* NAME_MAX of the common file systems */
/* Room kept after a temporary's name for its writer's other files: the
 * longest is ".shard-<10 digits>.tmp-<pid>-<16 hex>" (writer_shards.c). */
#define TAIL_ROOM (7 + 10 + (sizeof TMP_TAG - 1) + 10 + 1 + TMP_HEX)
#define EXT_MAX 16 /* the longest extension a shortened stem keeps */
#define PID_DIGITS 10

/* The stem of the temporaries of a target named base (see the definition). */
size_t wpk_atomic_stem(const char *base, size_t pidlen, char *out);
/* The directory part of path ("." when none), into buf. */
void wpk_atomic_dir_of(const char *path, char *buf, size_t len);
/* fsync the directory dir: 0 or -1 with errno. */
int wpk_atomic_fsync_dir(const char *dir);
/* Is name (relative to dfd, not followed) the regular file dev/ino? */
int wpk_atomic_same_file(int dfd, const char *name, dev_t dev, ino_t ino);
/* The one rule of a tied file (see the definition). */
void wpk_atomic_settle(int dfd, const char *link, const char *name, dev_t dev, ino_t ino,
                       int gone, int renamed, int durable);
#endif
