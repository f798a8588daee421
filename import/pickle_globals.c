/* pickle_globals.c - the only globals a pickle may name (pickle.h): the
 * callables and storage types of a torch.save state dict, each interpreted
 * by pickle.c, never imported or called. */
#include <string.h>

#include "pickle.h"
#include "wpack.h"

static const pk_allowed_global allowed[] = {
    {"collections", "OrderedDict", PKG_ORDERED_DICT, 0},
    {"torch._utils", "_rebuild_tensor_v2", PKG_REBUILD_TENSOR_V2, 0},
    {"torch._utils", "_rebuild_parameter", PKG_REBUILD_PARAMETER, 0},
    {"torch", "FloatStorage", PKG_STORAGE_TYPE, WPACK_DTYPE_F32},
    {"torch", "HalfStorage", PKG_STORAGE_TYPE, WPACK_DTYPE_F16},
    {"torch", "BFloat16Storage", PKG_STORAGE_TYPE, WPACK_DTYPE_BF16},
    {"torch", "DoubleStorage", PKG_STORAGE_TYPE, WPACK_DTYPE_F64},
    {"torch", "LongStorage", PKG_STORAGE_TYPE, WPACK_DTYPE_I64},
    {"torch", "IntStorage", PKG_STORAGE_TYPE, WPACK_DTYPE_I32},
    {"torch", "ShortStorage", PKG_STORAGE_TYPE, WPACK_DTYPE_I16},
    {"torch", "CharStorage", PKG_STORAGE_TYPE, WPACK_DTYPE_I8},
    {"torch", "ByteStorage", PKG_STORAGE_TYPE, WPACK_DTYPE_U8},
    {"torch", "BoolStorage", PKG_STORAGE_TYPE, WPACK_DTYPE_BOOL},
    {"torch", "ComplexFloatStorage", PKG_STORAGE_TYPE, 0, "complex"},
    {"torch", "ComplexDoubleStorage", PKG_STORAGE_TYPE, 0, "complex"},
    {"torch", "ComplexHalfStorage", PKG_STORAGE_TYPE, 0, "complex"},
    {"torch", "QUInt8Storage", PKG_STORAGE_TYPE, 0, "quantized"},
    {"torch", "QInt8Storage", PKG_STORAGE_TYPE, 0, "quantized"},
    {"torch", "QInt32Storage", PKG_STORAGE_TYPE, 0, "quantized"},
    {"torch", "QUInt4x2Storage", PKG_STORAGE_TYPE, 0, "quantized"},
    {"torch", "QUInt2x4Storage", PKG_STORAGE_TYPE, 0, "quantized"},
    {"torch._utils", "_rebuild_qtensor", PKG_REBUILD_QTENSOR, 0, "quantized"},
    {"torch", "per_tensor_affine", PKG_QSCHEME, 0, "quantized"},
    {"torch", "per_channel_affine", PKG_QSCHEME, 0, "quantized"},
    {"torch", "per_tensor_symmetric", PKG_QSCHEME, 0, "quantized"},
    {"torch", "per_channel_symmetric", PKG_QSCHEME, 0, "quantized"},
    {"torch", "per_channel_affine_float_qparams", PKG_QSCHEME, 0, "quantized"},
    {"_codecs", "encode", PKG_CODECS_ENCODE, 0, NULL},
};

const pk_allowed_global *pk_allowed_global_find(const char *mod, size_t mlen, const char *name,
                                                size_t nlen)
{
    for (size_t k = 0; k < sizeof allowed / sizeof allowed[0]; k++)
        if (strlen(allowed[k].module) == mlen && memcmp(allowed[k].module, mod, mlen) == 0 &&
            strlen(allowed[k].name) == nlen && memcmp(allowed[k].name, name, nlen) == 0)
            return &allowed[k];
    return NULL;
}
