/* reserved.c - the reserved fields of the public structs a caller fills
 * (wpack.h, "Structs never change size"): one check for every library. */
#include "internal.h"

int wpk_reserved_check(const char *what, const char *header, void *const *ptr, size_t nptr,
                       const uint64_t *u64, size_t nu64, char *err, size_t errlen)
{
    const char *field = NULL;
    size_t k = 0;
    for (size_t j = 0; !field && j < nptr; j++)
        if (ptr[j])
            field = "reserved_ptr", k = j;
    for (size_t j = 0; !field && j < nu64; j++)
        if (u64[j])
            field = "reserved", k = j;
    if (!field)
        return WPACK_OK;
    return wpk_fail_in(err, errlen, WPACK_E_INVALID_ARGUMENT, what,
                       "%s[%zu] is not zero (a field of a newer %s than this library's? start "
                       "from the struct's _init() call, or all zeros)", field, k, header);
}
