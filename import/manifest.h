/* manifest.h - raw binary files described by a JSON manifest (`wpack create
 * manifest.json`; schema in import/README.md). Parsing is separate from the
 * data files: manifest_parse_buffer / manifest_parse_file check the JSON and
 * every entry (dtype, shape, byte size, a relative path without "..", the
 * metadata values) without opening anything; manifest_pack_file (import.h)
 * parses, then opens the files named and writes the tensors. */
#ifndef WPACK_PACKER_MANIFEST_H
#define WPACK_PACKER_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "wpack.h"

typedef struct {
    const char *name, *file;    /* file: relative to the manifest's directory */
    int dtype, big;             /* big: the file's elements are big-endian */
    unsigned rank;
    uint64_t dims[WPACK_MAX_RANK];
    uint64_t offset, nbytes;    /* where in file; nbytes = elements x dtype size */
} mf_tensor;

typedef struct {
    const char *key;
    int type;                   /* WPACK_META_STRING, _I64, _F64 or _BOOL */
    const char *str;
    int64_t i64;
    double f64;
    int boolean;
} mf_meta;

typedef struct {
    mf_tensor *tensors;         /* in the manifest's order */
    size_t ntensors;
    mf_meta *meta;              /* in the manifest's order */
    size_t nmeta;
    void *json_;                /* the parsed document: owns the strings */
} mf_manifest;

/* Parse the manifest in buf (len bytes, no NUL needed) into *m. On failure
 * returns the error code with a message in err ("tensor 'x': rank above 8",
 * "manifest JSON: ... (line 3)") and *m holds nothing; on success free it
 * with manifest_free(). */
int manifest_parse_buffer(const char *buf, size_t len, mf_manifest *m, char *err, size_t errlen);
/* The same for the file at path. */
int manifest_parse_file(const char *path, mf_manifest *m, char *err, size_t errlen);
void manifest_free(mf_manifest *m);

#endif
