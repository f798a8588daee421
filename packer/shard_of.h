/* shard_of.h - whether an archive is a shard of a sharded set (replaced_set.c).
 * A set's manifest records each shard's file length and index XXH3 (spec
 * 19a): a shard changed in place (update, calibrate, convert or cast
 * --in-place) makes the whole set fail to open (WPACK_E_SHARD), its data
 * unreachable through the manifest. Those callers refuse it. */
#ifndef WPACK_PACKER_SHARD_OF_H
#define WPACK_PACKER_SHARD_OF_H

#include "wpack.h"

/* ar, opened from path: is it, now, a shard of the set whose manifest its
 * `wpack.manifest` string names, in the directory of the file path leads
 * to (links followed)? Compared by device and inode with the shards that
 * manifest lists when it opens whole (a set already broken, a manifest
 * gone or not listing this file: no). *manifest is that manifest's path
 * (malloc'd) when it is, else NULL. WPACK_OK or WPACK_E_NOMEM. */
int wpk_shard_of_set(const wpack_archive *ar, const char *path, char **manifest);

#endif
