/* reserved_meta.c - the writer's check of the metadata keys this format
 * defines (spec section 9 and 19a; keys beginning with `wpack.` are the
 * spec's, decision 19). A caller may set them (the CLI sets wpack.layers,
 * a copy carries wpack.module_names, wpack_writer_set_shards writes a
 * shard list), but not with a type or form readers would refuse or
 * misread: `wpack.shards` = "x" on a plain archive was written as it came,
 * and every tool that reads the key (shard listings, set replacement)
 * had to guess. Keys beginning with `wpack.` that this library does not
 * know are kept: a copy of an archive of a later revision carries them.
 */
#include <string.h>

#include "bytes.h"
#include "writer.h"

static int want_string(wpack_writer *w, const char *key)
{
    const wpk_pending_meta *m = wpk_meta_named(w, key);
    if (m && m->type != WPACK_META_STRING)
        return wpk_wfail(w, WPACK_E_METADATA, "metadata '%s' is reserved (spec section 9) and must "
                                              "be a string", key);
    return WPACK_OK;
}

/* wpack.module_names: [other, key, other, key, ...], strings, sorted by
 * other name, each other name once, every name by the name rule. */
static int check_module_names(wpack_writer *w)
{
    const wpk_pending_meta *m = wpk_meta_named(w, "wpack.module_names");
    if (!m)
        return WPACK_OK;
    if (m->type != WPACK_META_ARRAY || m->elem != WPACK_META_STRING || !m->count || m->count % 2)
        return wpk_wfail(w, WPACK_E_METADATA,
                         "metadata 'wpack.module_names' is reserved (spec section 9): an array of "
                         "strings [other, key, ...], an even number of them");
    for (uint64_t j = 0; j < m->count; j++) {
        size_t len;
        const char *s = wpk_meta_elem_str(w, m, j, &len);
        const char *why = wpk_name_problem((const uint8_t *)s, len);
        if (why || (j >= 2 && j % 2 == 0 && strcmp(wpk_meta_elem_str(w, m, j - 2, NULL), s) >= 0)) {
            char q[256];
            wpk_quote(q, sizeof q, s, len);
            return wpk_wfail(w, WPACK_E_METADATA,
                             "metadata 'wpack.module_names' element %llu '%s': %s",
                             (unsigned long long)j, q,
                             why ? why : "other names must be sorted, each once");
        }
    }
    return WPACK_OK;
}

/* wpack.manifest: a shard's manifest, a file name beside it */
static int check_manifest(wpack_writer *w)
{
    const wpk_pending_meta *manifest = wpk_meta_named(w, "wpack.manifest");
    int rc = want_string(w, "wpack.manifest");
    if (rc || !manifest)
        return rc;
    const char *s = (const char *)w->strings.p + manifest->value, *why;
    if ((why = wpk_shard_name_problem(s, (size_t)manifest->count))) {
        char q[256];
        wpk_quote(q, sizeof q, s, (size_t)manifest->count);
        return wpk_wfail(w, WPACK_E_METADATA, "metadata 'wpack.manifest' '%s': %s", q, why);
    }
    return WPACK_OK;
}

int wpk_check_reserved_key(wpack_writer *w, const char *key)
{
    if (strncmp(key, "wpack.", 6) != 0)
        return WPACK_OK;
    if (strcmp(key, "wpack.producer") == 0 || strcmp(key, "wpack.layers") == 0)
        return want_string(w, key);
    if (strcmp(key, "wpack.manifest") == 0)
        return check_manifest(w);
    if (strcmp(key, "wpack.module_names") == 0)
        return check_module_names(w);
    return WPACK_OK; /* the shard list is whole only at finish */
}

int wpk_check_reserved_meta(wpack_writer *w, uint64_t *shards)
{
    int rc;
    if ((rc = want_string(w, "wpack.producer")) || (rc = want_string(w, "wpack.layers")) ||
        (rc = check_manifest(w)) || (rc = check_module_names(w)))
        return rc;
    /* any part of a shard list: the whole list, as a reader checks it */
    *shards = 0;
    if (wpk_meta_named(w, "wpack.shards") || wpk_meta_named(w, "wpack.shard_lengths") ||
        wpk_meta_named(w, "wpack.shard_index_xxh3"))
        return wpk_check_shard_list(w, shards);
    return WPACK_OK;
}
