/*
 * pickle.h - a restricted pickle interpreter for torch.save's data.pkl.
 *
 * It never executes anything: it understands the opcodes that Python's
 * pickler emits for state dicts (protocols 2 to 5) and builds a tree of plain
 * values. The only callables it knows are a whitelist, each interpreted
 * here, never looked up:
 *   collections.OrderedDict             -> a dict
 *   torch._utils._rebuild_tensor_v2     -> a tensor view of a storage
 *   torch._utils._rebuild_parameter     -> the tensor it wraps
 *   torch.{Float,Half,BFloat16,Double,Long,Int,Short,Char,Byte,Bool}Storage
 *                                       -> a storage dtype (in persistent ids)
 * and, recognised only so that the importer can refuse or skip them by name:
 *   torch.Complex{Float,Double,Half}Storage, torch.Q{UInt8,Int8,Int32,UInt4x2,
 *   UInt2x4}Storage, torch._utils._rebuild_qtensor, torch.per_*_affine/symmetric
 *   (complex and quantized tensors), _codecs.encode (protocol 2's bytes).
 * Ints above 64 bits become PK_OPAQUE values.
 * Any other global (os.system, builtins.eval, torch.storage._load_from_bytes,
 * ...) or opcode is an error that names it and its byte offset.
 *
 * Strings point into the pickle bytes (no copies). Limits bound memory and
 * time on hostile input: values, memo slots, stack depth, string lengths.
 */
#ifndef WPACK_PACKER_PICKLE_H
#define WPACK_PACKER_PICKLE_H

#include <stddef.h>
#include <stdint.h>

#include "wpack.h"

#define WPK_PICKLE_MAX_VALUES (1u << 24)   /* 16 M values */
#define WPK_PICKLE_MAX_MEMO (1u << 22)     /* highest memo index + 1 */
#define WPK_PICKLE_MAX_STACK (1u << 20)    /* stack entries (all marks together) */
#define WPK_PICKLE_MAX_STRING (64u << 20)  /* bytes in one string */
/* Work and memory grow with the pickle, never faster: each value needs an
 * opcode, memo indices stay below len + WPK_PICKLE_MEMO_SLACK, and the items
 * all containers hold together (a shared list copied into OrderedDict
 * again and again) stay within WPK_PICKLE_REFS_PER_BYTE per pickle byte
 * plus WPK_PICKLE_REFS_FLOOR. */
#define WPK_PICKLE_MEMO_SLACK 256u
#define WPK_PICKLE_REFS_PER_BYTE 2u
#define WPK_PICKLE_REFS_FLOOR 4096u
/* Memory: every value, item array, view, stack, mark and memo slot the
 * parse allocates stays within WPK_PICKLE_MEM_PER_BYTE per pickle byte plus
 * WPK_PICKLE_MEM_FLOOR (values live until pk_free: 8 M empty lists pushed
 * and popped would otherwise hold 450 MB). A state dict's pickle needs about
 * 15 bytes per byte (15 values, 3 item arrays and a view per ~100-byte
 * tensor); hostile ones up to ~70. */
#define WPK_PICKLE_MEM_PER_BYTE 32u
#define WPK_PICKLE_MEM_FLOOR (4u << 20)

typedef enum {
    PK_NONE = 1,
    PK_BOOL,
    PK_INT,
    PK_FLOAT,
    PK_STR,        /* UTF-8 */
    PK_BYTES,
    PK_TUPLE,
    PK_LIST,
    PK_DICT,       /* items: key, value, key, value, ... */
    PK_GLOBAL,     /* a whitelisted callable (g) */
    PK_STORAGE,    /* persistent id ('storage', type, key, location, numel) */
    PK_TENSOR,
    PK_MARK,       /* only on the stack */
    PK_OPAQUE      /* a value kept only to be skipped (why): an int above 64 bits */
} pk_kind;

typedef enum {
    PKG_ORDERED_DICT = 1,
    PKG_REBUILD_TENSOR_V2,
    PKG_REBUILD_PARAMETER,
    PKG_STORAGE_TYPE,  /* dtype in pk_value.dtype (0 and why: complex, quantized) */
    PKG_REBUILD_QTENSOR, /* a quantized tensor: a PK_TENSOR with why set */
    PKG_QSCHEME,       /* torch.per_tensor_affine, ...: only an argument */
    PKG_CODECS_ENCODE  /* _codecs.encode(str, 'latin1'): protocol 2's bytes */
} pk_global;

typedef struct {
    const char *module, *name;
    pk_global g;
    int dtype;
    const char *why; /* recognised only to be refused or skipped by the importer */
} pk_allowed_global;

/* The whitelist's entry for global mod.name (pickle_globals.c), or NULL:
 * no other global may appear in a pickle. */
const pk_allowed_global *pk_allowed_global_find(const char *mod, size_t mlen, const char *name,
                                                size_t nlen);

typedef struct pk_value pk_value;

/* A tensor's view of its storage (only tensors carry one: kept out of
 * pk_value so that the many other values stay small). */
typedef struct {
    pk_value *storage;
    uint64_t offset;            /* elements */
    unsigned rank;
    uint64_t dims[WPACK_MAX_RANK];
    uint64_t strides[WPACK_MAX_RANK];
} pk_view;

struct pk_value {
    union {
        int64_t i;              /* int, bool; storage: numel */
        double f;               /* float */
    };
    const char *s;              /* str, bytes, global, storage key: points into the pickle */
    size_t slen;
    union {
        pk_value **items;       /* tuple, list, dict (2 x n) */
        pk_view *view;          /* tensor: its view (NULL when why is set) */
    };
    uint32_t n, cap;            /* items */
    /* storage type, storage, tensor: "complex" or "quantized" when the
     * checkpoint holds one (recognised to be refused by name: dtype is 0);
     * opaque: what the value is */
    const char *why;
    pk_kind kind;
    uint8_t g;                  /* global: a pk_global */
    uint8_t dtype;              /* storage type, storage, tensor: WPACK_DTYPE_* */
    uint8_t shared;             /* held by more than its one stack slot (memo, DUP, ...) */
};

typedef struct pk_state pk_state;

/* Run the pickle in buf. On success *root is the unpickled object, valid
 * until pk_free(st). Returns WPACK_OK, WPACK_E_UNSUPPORTED (a global or
 * opcode outside the subset), WPACK_E_LIMIT, WPACK_E_NOMEM or WPACK_E_INPUT
 * (malformed), with a message ("pickle: global 'os.system' at byte 2 is not
 * allowed (only state-dict globals are)"). *st must be freed with pk_free
 * whatever the result. */
int pk_load(const uint8_t *buf, size_t len, pk_state **st, pk_value **root, char *err,
            size_t errlen);
void pk_free(pk_state *st);

#endif
