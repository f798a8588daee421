/* dtype.c - the built-in dtype table (spec: Data types). */
#include <string.h>

#include "internal.h"

typedef struct {
    const char *name;
    unsigned size;
    int is_float;
} dtype_row;

/* Indexed by code; code 0 is invalid. */
static const dtype_row table[] = {
    [WPACK_DTYPE_F64] = {"f64", 8, 1},       [WPACK_DTYPE_F32] = {"f32", 4, 1},
    [WPACK_DTYPE_F16] = {"f16", 2, 1},       [WPACK_DTYPE_BF16] = {"bf16", 2, 1},
    [WPACK_DTYPE_F8E4M3FN] = {"f8e4m3fn", 1, 1}, [WPACK_DTYPE_F8E5M2] = {"f8e5m2", 1, 1},
    [WPACK_DTYPE_I64] = {"i64", 8, 0},       [WPACK_DTYPE_I32] = {"i32", 4, 0},
    [WPACK_DTYPE_I16] = {"i16", 2, 0},       [WPACK_DTYPE_I8] = {"i8", 1, 0},
    [WPACK_DTYPE_U64] = {"u64", 8, 0},       [WPACK_DTYPE_U32] = {"u32", 4, 0},
    [WPACK_DTYPE_U16] = {"u16", 2, 0},       [WPACK_DTYPE_U8] = {"u8", 1, 0},
    [WPACK_DTYPE_BOOL] = {"bool", 1, 0},
};

static const dtype_row *row(int dtype)
{
    if (dtype <= 0 || (size_t)dtype >= sizeof table / sizeof table[0])
        return NULL;
    return &table[dtype];
}

size_t wpack_dtype_size(int dtype)
{
    const dtype_row *r = row(dtype);
    return r ? r->size : 0;
}

const char *wpack_dtype_name(int dtype)
{
    const dtype_row *r = row(dtype);
    return r ? r->name : NULL;
}

int wpack_dtype_from_name(const char *name)
{
    for (size_t i = 1; name && i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].name, name) == 0)
            return (int)i;
    return 0;
}

int wpack_dtype_is_float(int dtype)
{
    const dtype_row *r = row(dtype);
    return r ? r->is_float : 0;
}
