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
#include "torch_scan.h"
#include "wpack.h"
#include "wpack_import.h"
#include "zipread.h"

/* The midpoint of [mn, mx], finite for finite bounds (mx - mn passes
 * DBL_MAX for a range such as [-1e308, 1e308]). */
double calib_mid(double mn, double mx);

/* One range-only activation record (TensorRT, ONNX Runtime): count 0, mean
 * the midpoint, variance 0 (spec A.1: placeholders, not observations). */
int calib_range(stats_sink_fn sink, void *ctx, const char *key, double mn, double mx,
                char *err, size_t errlen);
/* The same per channel (n > 1: along axis; n 1: per-tensor). */
int calib_ranges(stats_sink_fn sink, void *ctx, const char *key, uint32_t n, uint32_t axis,
                 const double *mn, const double *mx, char *err, size_t errlen);

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
/* The same in parts, for a checkpoint packed as an input (torch_pack.c):
 * scan the observers of buf (key: the sub-dict, as torch_scan_buffer), say
 * whether a checkpoint name is observer state that stays out of the tensors
 * (every observer and fake-quant buffer, except a learnable fake-quant's
 * scale and zero_point), emit the records (keys under prefix; summary: one
 * line naming them) and free. */
typedef struct calib_obs calib_obs;
int calib_obs_scan(const uint8_t *p, size_t len, const char *key, wpk_zip_read_fn read,
                   void *read_ctx, calib_obs **out, char *err, size_t errlen);
/* calib_obs_scan in parts, to share one scan with the packer
 * (torch_scan_buffer_pre): an empty set (NULL: out of memory, said in err,
 * where the visits' failures go too) and the visitor that fills it. The
 * values the set holds are bounded by input_len, the checkpoint's size
 * (+ 2^20: WPACK_E_LIMIT past it). */
calib_obs *calib_obs_new(size_t input_len, char *err, size_t errlen);
int calib_obs_visit(void *set, const torch_item *it);
int calib_obs_drops(const calib_obs *set, const char *name);
uint64_t calib_obs_buffers(const calib_obs *set);          /* observer buffers seen */
uint64_t calib_obs_weight_observers(const calib_obs *set); /* weight_fake_quant ones */
int calib_obs_emit(const calib_obs *set, const char *prefix, stats_sink_fn sink, void *ctx,
                   char *summary, size_t sumlen, char *err, size_t errlen);
void calib_obs_free(calib_obs *set);
/* Is this buffer a legacy imatrix .dat (its framing checks out to the end)? */
int calib_imatrix_dat_sniff(const uint8_t *p, size_t len);

/* Activation ranges of ar out to fd (WPACK_EXPORT_TRT_CALIB or
 * WPACK_EXPORT_ORT_CALIB_JSON). */
int calib_export(const wpack_archive *ar, int fd, int format, wpack_import_warn_fn warn,
                 void *warn_user, char *err, size_t errlen);

#endif
