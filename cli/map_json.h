/* map_json.h - the --map FILE.json of `wpack resolve`: a JSON object
 * {"global symbol": "entry name", ...} (CLI-only, uses libjansson). */
#ifndef WPACK_RESOLVER_MAP_JSON_H
#define WPACK_RESOLVER_MAP_JSON_H

#include <stddef.h>

typedef struct wpk_name_map {
    char **globals, **entries;
    size_t n;
} wpk_name_map;

/* 0 ok; otherwise a message in err ("map.json:3:5: ...") and non-zero. */
int wpk_name_map_load(const char *path, wpk_name_map *m, char *err, size_t errlen);
void wpk_name_map_free(wpk_name_map *m);

#endif
