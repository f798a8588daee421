/* safetensors_pack.c - a safetensors file, mapped, validated and streamed into a sink. */
#include <string.h>

#include "import.h"
#include "safetensors.h"

typedef struct {
    wpk_sink *s;
    const wpk_mapped *m;
    int with_meta;
} st_packer;

static int visit(void *user, const st_item *it)
{
    st_packer *sp = user;
    wpk_sink *s = sp->s;
    if (it->is_meta)
        return sp->with_meta ? wpk_sink_meta_string(s, it->name, it->value) : WPACK_OK;
    int rc = wpk_sink_begin(s, it->name, it->dtype, it->rank, it->dims);
    if (!rc) /* it->data is sp->m->p + it->file_offset */
        rc = wpk_sink_stream_mapped(s, sp->m, it->file_offset, it->nbytes);
    return rc ? rc : wpk_sink_end(s);
}

int safetensors_pack_mapped(wpk_sink *s, const wpk_mapped *m, int with_meta)
{
    st_packer sp = {.s = s, .m = m, .with_meta = with_meta};
    char err[1024];
    s->err[0] = 0;
    int rc = st_scan_buffer(m->p, m->len, visit, &sp, err, sizeof err);
    if (rc && !s->err[0])
        wpk_sink_fail(s, rc, "%s", err);
    return rc;
}

int safetensors_pack_file(wpk_sink *s, const char *path)
{
    wpk_mapped m;
    int rc = wpk_map_file(s, path, &m);
    if (rc)
        return rc;
    rc = safetensors_pack_mapped(s, &m, 1);
    wpk_unmap_file(&m);
    return rc;
}
