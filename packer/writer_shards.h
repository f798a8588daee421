/* writer_shards.h - the writer's sharded-set mode (writer_shards.c), called
 * from the writer (writer.c, writer_tensor.c) when opt.shard_size is set.
 * Each call reports failures on w. */
#ifndef WPACK_PACKER_WRITER_SHARDS_H
#define WPACK_PACKER_WRITER_SHARDS_H

#include "writer.h"

/* At open: take the options, make w the manifest. */
int wpk_shards_init(wpack_writer *w);
/* A data tensor of nbytes: into the current shard (a new one when full).
 * The manifest's external entry e gets its place at end. */
int wpk_shards_begin(wpack_writer *w, const char *name, int dtype, unsigned rank,
                     const uint64_t *dims, uint64_t nbytes);
int wpk_shards_write(wpack_writer *w, const void *data, size_t n);
int wpk_shards_write_zeros(wpack_writer *w, uint64_t n);
int wpk_shards_end(wpack_writer *w, wpk_pending_entry *e);
/* A block dtype added to the manifest goes to the open shard too. */
int wpk_shards_add_block_dtype(wpack_writer *w, const char *name, uint32_t block_elems,
                               uint32_t block_bytes, const void *params, size_t params_len);
/* Before the manifest's index: close the last shard, choose each shard's
 * final name (one where no file exists) and record the shard list (names,
 * lengths, checksums) on w. */
int wpk_shards_finish(wpack_writer *w);
/* After the manifest is complete and synced, before its rename: the shards
 * get their final names, tied to the manifest's rename (removed again when
 * it does not happen: atomic_file.h). */
int wpk_shards_place(wpack_writer *w);
/* Free the shard state. remove_files (not committed): remove every shard
 * file written. */
void wpk_shards_free(wpack_writer *w, int remove_files);

#endif
