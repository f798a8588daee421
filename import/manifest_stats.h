/* manifest_stats.h - calibration statistics from JSON (`wpack create --stats FILE`);
 * the schema is in import/README.md. */
#ifndef WPACK_PACKER_MANIFEST_STATS_H
#define WPACK_PACKER_MANIFEST_STATS_H

#include <stddef.h>

#include "wpack.h"

/* Add every record of the JSON file at path to the writer. Returns WPACK_OK
 * or an error with a message naming the record ("stats[3] 'enc.0': max has
 * 3 values, channels is 4"). Nothing is added when the file is bad. */
int stats_load_file(wpack_writer *w, const char *path, char *err, size_t errlen);
/* The same into any sink: sink(ctx, record, &why) is called once per record
 * (after the whole file parsed); a non-zero return stops the load, and the
 * error names the record and says why. */
typedef int (*stats_sink_fn)(void *ctx, const wpack_stats_in *s, const char **why);
/* The writer (ctx) as such a sink. */
int stats_to_writer(void *ctx, const wpack_stats_in *s, const char **why);
/* The kind of file is detected by content (import/calib_detect.c): the wpack
 * JSON schema, or a TensorRT calibration cache, an ONNX Runtime calibration
 * table (JSON), a llama.cpp imatrix (.dat or GGUF): spec appendix A.1. */
int stats_load_file_to(const char *path, stats_sink_fn sink, void *ctx, char *err, size_t errlen);
/* The wpack schema only, from a file or a buffer. */
int stats_load_json_file_to(const char *path, stats_sink_fn sink, void *ctx, char *err,
                            size_t errlen);
int stats_load_json_to(const char *buf, size_t len, stats_sink_fn sink, void *ctx, char *err,
                       size_t errlen);
/* The same from a buffer (for tests and fuzzing); w may be NULL to only check. */
int stats_load_buffer(wpack_writer *w, const char *buf, size_t len, char *err, size_t errlen);

#endif
