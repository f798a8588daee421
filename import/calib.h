/* calib.h - calibration data in other tools' formats (issue 18; spec
 * appendix A.1): TensorRT calibration caches, ONNX Runtime calibration
 * tables (JSON) and llama.cpp imatrix files (legacy .dat and GGUF), each
 * turned into wpack stats records; and activation ranges back out as a
 * TensorRT cache or an ONNX Runtime JSON table. */
#ifndef WPACK_IMPORT_CALIB_H
#define WPACK_IMPORT_CALIB_H

#include <stddef.h>
#include <stdint.h>

#include "manifest_stats.h"
#include "wpack.h"

/* One range-only activation record (TensorRT, ONNX Runtime): count 0, mean
 * the midpoint, variance 0 (spec A.1: placeholders, not observations). */
int calib_range(stats_sink_fn sink, void *ctx, const char *key, double mn, double mx,
                char *err, size_t errlen);

/* Each parser takes the whole file in memory (bounded by its size) and calls
 * sink once per record; on a fault: a code and a message naming the line or
 * entry (without the path: the caller adds it). */
int calib_trt_parse(const uint8_t *p, size_t len, stats_sink_fn sink, void *ctx, char *err,
                    size_t errlen);
int calib_ort_parse(const uint8_t *p, size_t len, stats_sink_fn sink, void *ctx, char *err,
                    size_t errlen);
int calib_imatrix_dat_parse(const uint8_t *p, size_t len, stats_sink_fn sink, void *ctx,
                            char *err, size_t errlen);
int calib_imatrix_gguf_parse(const uint8_t *p, size_t len, stats_sink_fn sink, void *ctx,
                             char *err, size_t errlen);
/* torch.ao observer buffers of a torch.save checkpoint (calib_torch.c). */
int calib_torch_parse(const uint8_t *p, size_t len, stats_sink_fn sink, void *ctx, char *err,
                      size_t errlen);
/* Is this buffer a legacy imatrix .dat (its framing checks out to the end)? */
int calib_imatrix_dat_sniff(const uint8_t *p, size_t len);

/* Activation ranges of ar out to fd (WPACK_EXPORT_TRT_CALIB or
 * WPACK_EXPORT_ORT_CALIB_JSON). */
int calib_export(const wpack_archive *ar, int fd, int format, char *err, size_t errlen);

#endif
