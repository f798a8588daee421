/* writer_room.c - wpack_writer_room: the output cap (max_data_bytes) as a
 * public question, so libwpack-import can check a whole checkpoint against
 * it before writing anything without reaching into the writer's internals. */
#include "writer.h"

int wpack_writer_room(wpack_writer *w, const char *what, uint64_t nbytes)
{
    if (!w)
        return WPACK_E_INVALID_ARGUMENT;
    return wpk_writer_room(w, what ? what : "tensor data", nbytes);
}
