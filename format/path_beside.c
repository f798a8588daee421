/* path_beside.c - the path of a file named NAME in the directory of PATH
 * (a shard beside its manifest, a file tied to an output's rename): the
 * directory part of PATH up to and including its last '/', then NAME. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

size_t wpk_dir_len(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? (size_t)(slash - path) + 1 : 0;
}

char *wpk_path_beside(const char *path, const char *name, size_t name_len)
{
    size_t dir = wpk_dir_len(path);
    if (name_len > SIZE_MAX - dir - 1)
        return NULL;
    char *p = malloc(dir + name_len + 1);
    if (p) {
        memcpy(p, path, dir);
        memcpy(p + dir, name, name_len);
        p[dir + name_len] = 0;
    }
    return p;
}
