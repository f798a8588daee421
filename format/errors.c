/* errors.c - names and descriptions of the stable error codes. */
#include "internal.h"

typedef struct {
    int code;
    const char *name;
    const char *text;
} error_row;

static const error_row rows[] = {
    {WPACK_OK, "WPACK_OK", "no error"},
    {WPACK_E_IO, "WPACK_E_IO", "input/output error"},
    {WPACK_E_NOMEM, "WPACK_E_NOMEM", "out of memory"},
    {WPACK_E_INVALID_ARGUMENT, "WPACK_E_INVALID_ARGUMENT", "invalid argument"},
    {WPACK_E_NOT_FOUND, "WPACK_E_NOT_FOUND", "not found"},
    {WPACK_E_STATE, "WPACK_E_STATE", "call out of order"},
    {WPACK_E_EXISTS, "WPACK_E_EXISTS", "name already added"},
    {WPACK_E_NO_VIEW, "WPACK_E_NO_VIEW", "entry has no bytes in the file"},
    {WPACK_E_SAME_FILE, "WPACK_E_SAME_FILE", "output is the same file as an input"},
    {WPACK_E_TOO_LARGE, "WPACK_E_TOO_LARGE", "output would exceed its size cap"},
    {WPACK_E_FILE_TYPE, "WPACK_E_FILE_TYPE", "not a regular file inside its directory"},
    {WPACK_E_EMPTY, "WPACK_E_EMPTY", "nothing to do"},
    {WPACK_E_BAD_MAGIC, "WPACK_E_BAD_MAGIC", "not a wpack archive (bad magic)"},
    {WPACK_E_VERSION, "WPACK_E_VERSION", "unsupported format version"},
    {WPACK_E_FEATURE, "WPACK_E_FEATURE", "unknown required feature"},
    {WPACK_E_ENDIAN, "WPACK_E_ENDIAN", "wrong endianness marker"},
    {WPACK_E_ALIGNMENT, "WPACK_E_ALIGNMENT", "invalid alignment"},
    {WPACK_E_TRUNCATED, "WPACK_E_TRUNCATED", "file is truncated"},
    {WPACK_E_HEADER_CHECKSUM, "WPACK_E_HEADER_CHECKSUM", "superblock or trailer checksum mismatch"},
    {WPACK_E_TRAILER, "WPACK_E_TRAILER", "trailer disagrees with superblock"},
    {WPACK_E_RESERVED, "WPACK_E_RESERVED", "reserved field is not zero"},
    {WPACK_E_INDEX_CHECKSUM, "WPACK_E_INDEX_CHECKSUM", "index checksum mismatch"},
    {WPACK_E_LAYOUT, "WPACK_E_LAYOUT", "regions or sections misplaced"},
    {WPACK_E_LIMIT, "WPACK_E_LIMIT", "count or length above the format limit"},
    {WPACK_E_NAME, "WPACK_E_NAME", "invalid name"},
    {WPACK_E_UNSORTED, "WPACK_E_UNSORTED", "names not sorted"},
    {WPACK_E_DUPLICATE, "WPACK_E_DUPLICATE", "duplicate name"},
    {WPACK_E_DTYPE, "WPACK_E_DTYPE", "invalid dtype"},
    {WPACK_E_RANK, "WPACK_E_RANK", "rank above the limit"},
    {WPACK_E_SHAPE, "WPACK_E_SHAPE", "shape not allowed"},
    {WPACK_E_OVERFLOW, "WPACK_E_OVERFLOW", "size computation overflows"},
    {WPACK_E_SIZE, "WPACK_E_SIZE", "stored length disagrees with shape and dtype"},
    {WPACK_E_BOUNDS, "WPACK_E_BOUNDS", "offset or length out of bounds"},
    {WPACK_E_MISALIGNED, "WPACK_E_MISALIGNED", "data not aligned"},
    {WPACK_E_OVERLAP, "WPACK_E_OVERLAP", "extents overlap or leave a hole"},
    {WPACK_E_KIND, "WPACK_E_KIND", "invalid entry kind"},
    {WPACK_E_ALIAS, "WPACK_E_ALIAS", "invalid alias"},
    {WPACK_E_CODEC, "WPACK_E_CODEC", "unknown codec"},
    {WPACK_E_METADATA, "WPACK_E_METADATA", "invalid metadata"},
    {WPACK_E_NAMEMAP, "WPACK_E_NAMEMAP", "invalid name map"},
    {WPACK_E_STATS, "WPACK_E_STATS", "invalid calibration statistics"},
    {WPACK_E_CHECKSUM, "WPACK_E_CHECKSUM", "tensor checksum mismatch"},
    {WPACK_E_PADDING, "WPACK_E_PADDING", "padding is not zero"},
    {WPACK_E_DECODE, "WPACK_E_DECODE", "compressed bytes do not decode"},
    {WPACK_E_SHARD, "WPACK_E_SHARD", "shard missing or inconsistent"},
    {WPACK_E_VALUE, "WPACK_E_VALUE", "value not allowed for its dtype"},
    {WPACK_E_INPUT, "WPACK_E_INPUT", "malformed input file"},
    {WPACK_E_UNSUPPORTED, "WPACK_E_UNSUPPORTED", "unsupported input"},
};

static const error_row *find_row(int code)
{
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (rows[i].code == code)
            return &rows[i];
    return NULL;
}

const char *wpack_error_name(int code)
{
    const error_row *r = find_row(code);
    return r ? r->name : "WPACK_E_UNKNOWN";
}

const char *wpack_error_describe(int code)
{
    const error_row *r = find_row(code);
    return r ? r->text : "unknown error";
}

unsigned wpack_version_number(void)
{
    return WPACK_VERSION_NUMBER;
}

const char *wpack_version_string(void)
{
    return WPACK_VERSION_STRING;
}
