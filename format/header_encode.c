/* header_encode.c - the one encoder of superblocks and trailers (spec
 * section 3) that the writer and the in-place updater share. */
#include <string.h>

#include "bytes.h"
#include "internal.h"
#include "layout.h"

void wpk_header_seal(uint8_t *h, const char *magic)
{
    memcpy(h + WPK_H_MAGIC_OFF, magic, 8);
    wpk_st64(h + WPK_H_CHECKSUM_OFF, wpk_xxh3(h, WPK_H_CHECKSUM_OFF));
}

void wpk_header_encode(uint8_t *h, const char *magic, const wpk_generation *g)
{
    wpk_st64(h + WPK_H_GENERATION_OFF, g->generation);
    wpk_st64(h + WPK_H_INDEX_OFFSET_OFF, g->index_offset);
    wpk_st64(h + WPK_H_INDEX_LENGTH_OFF, g->index_length);
    wpk_st64(h + WPK_H_INDEX_CHECKSUM_OFF, g->index_checksum);
    wpk_st64(h + WPK_H_FILE_LENGTH_OFF, g->file_length);
    wpk_header_seal(h, magic);
}
