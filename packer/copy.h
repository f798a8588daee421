/* copy.h - copy a whole archive into a writer (convert, cast). */
#ifndef WPACK_PACKER_COPY_H
#define WPACK_PACKER_COPY_H

#include "wpack.h"

/* Copies block dtypes, every entry (data streamed through wpack_read_stream, so
 * compressed input is decoded and the writer's options decide how it is
 * stored; a sharded set's entries come from their shards), splats, aliases, metadata, the name map and every stats record.
 * The writer should have weight_stats off: the records are copied as they
 * are. err gets "what and where" on failure. */
int wpk_copy_archive(const wpack_archive *ar, wpack_writer *w, char *err, size_t errlen);
/* The same, calling done(user, entry) after each entry is copied (a
 * progress display; done may be NULL). */
typedef void (*wpk_copy_done_fn)(void *user, const wpack_tensor *t);
int wpk_copy_archive_cb(const wpack_archive *ar, wpack_writer *w, wpk_copy_done_fn done,
                        void *user, char *err, size_t errlen);

/* The pieces: one data entry (streamed; an external entry of a sharded
 * set is read from its shard), one metadata record (skipping the keys that
 * describe the source's own layout: a set's wpack.shards, shard lengths and
 * index checksums, which the copy does not have), one stats record. */
int wpk_copy_data(const wpack_archive *ar, wpack_writer *w, const wpack_tensor *t, char *err,
                  size_t errlen);
int wpk_copy_meta(const wpack_archive *ar, wpack_writer *w, const wpack_meta *m);
int wpk_copy_stats(wpack_writer *w, const wpack_stats *s);
/* The whole name map (err: "name map 'NAME': why" on failure). */
int wpk_copy_names(const wpack_archive *ar, wpack_writer *w, char *err, size_t errlen);

#endif
