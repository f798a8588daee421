/* map_json.c - load the --map JSON object (see map_json.h). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "map_json.h"

int wpk_name_map_load(const char *path, wpk_name_map *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    /* never blocks on a FIFO; regular files only (format/open_input.c) */
    struct stat st;
    char msg[400];
    int code, fd = wpk_open_input(AT_FDCWD, path, 0, &st, &code, msg, sizeof msg);
    if (fd < 0) {
        wpk_fmt(err, errlen, "%s: %s", path, msg);
        return 1;
    }
    const char *p;
    size_t len;
    if (wpk_map_input(fd, &st, &p, &len)) {
        wpk_fmt(err, errlen, "%s: cannot map: %s", path, strerror(errno));
        close(fd);
        return 1;
    }
    close(fd);
    json_error_t je;
    json_t *root = json_loadb(p, len, JSON_REJECT_DUPLICATES, &je);
    wpk_unmap_input(p, len);
    if (!root) {
        wpk_fmt(err, errlen, "%s:%d:%d: %s", path, je.line, je.column, je.text);
        return 1;
    }
    if (!json_is_object(root)) {
        wpk_fmt(err, errlen, "%s: expected a JSON object of names {\"from\": \"to\", ...}", path);
        json_decref(root);
        return 1;
    }
    size_t n = json_object_size(root);
    m->globals = calloc(n ? n : 1, sizeof *m->globals);
    m->entries = calloc(n ? n : 1, sizeof *m->entries);
    if (!m->globals || !m->entries) {
        wpk_fmt(err, errlen, "out of memory");
        json_decref(root);
        wpk_name_map_free(m);
        return 1;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (!json_is_string(v)) {
            wpk_fmt(err, errlen, "%s: the value for \"%.200s\" is not a string", path, key);
            json_decref(root);
            wpk_name_map_free(m);
            return 1;
        }
        m->globals[m->n] = strdup(key);
        m->entries[m->n] = strdup(json_string_value(v));
        if (!m->globals[m->n] || !m->entries[m->n]) {
            m->n++;
            wpk_fmt(err, errlen, "out of memory");
            json_decref(root);
            wpk_name_map_free(m);
            return 1;
        }
        m->n++;
    }
    json_decref(root);
    return 0;
}

void wpk_name_map_free(wpk_name_map *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->globals[i]);
        free(m->entries[i]);
    }
    free(m->globals);
    free(m->entries);
    memset(m, 0, sizeof *m);
}
