/*
 * fuzz_manifest.c - the raw-binary JSON manifest (import/manifest.c, `wpack
 * create manifest.json`): manifest_parse_buffer on the input, which checks
 * the JSON and every entry without opening a data file. When it accepts,
 * every entry must be what manifest_pack_file may act on: a name, a known
 * dtype, rank <= 8, nbytes = elements x dtype size (no overflow), a relative
 * file path without a ".." component or a backslash, and every metadata
 * value of one of the four scalar types. When it refuses, the message says
 * why and the manifest holds nothing. A 4-byte message buffer must give the
 * same answer. The input is also tried as a Hugging Face
 * model.safetensors.index.json (st_index_check).
 */
#include <jansson.h>

#include "fuzz.h"
#include "import.h"
#include "manifest.h"

/* The same JSON as a Hugging Face safetensors index (st_index_check): when
 * accepted, the shard names are distinct, sorted plain file names, and
 * every weight_map value is one of them. */
static void check_index(const char *buf, size_t size)
{
    json_t *root = json_loadb(buf, size, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(root) || !json_object_get(root, "weight_map")) {
        json_decref(root);
        return;
    }
    const char **files;
    size_t n;
    char err[300];
    if (st_index_check(root, &files, &n, err, sizeof err) == WPACK_OK) {
        for (size_t i = 0; i < n; i++)
            FUZZ_ASSERT(*files[i] && !strchr(files[i], '/') && strcmp(files[i], ".") != 0 &&
                            strcmp(files[i], "..") != 0 && (i == 0 || strcmp(files[i - 1], files[i]) < 0),
                        "shard name %zu '%.60s'", i, files[i]);
        const char *key;
        json_t *v;
        json_object_foreach(json_object_get(root, "weight_map"), key, v) {
            size_t k = 0;
            while (k < n && strcmp(files[k], json_string_value(v)) != 0)
                k++;
            FUZZ_ASSERT(k < n, "weight_map['%.40s'] names no listed shard", key);
        }
        free(files);
    }
    json_decref(root);
}

/* What manifest.c's safe_rel_path promises, checked independently. */
static int path_ok(const char *p)
{
    if (!*p || *p == '/' || strchr(p, '\\'))
        return 0;
    for (const char *c = p; *c;) {
        size_t n = strcspn(c, "/");
        if (n == 2 && c[0] == '.' && c[1] == '.')
            return 0;
        c += n;
        if (*c == '/')
            c++;
    }
    return 1;
}

static void check_manifest(const mf_manifest *m)
{
    for (size_t i = 0; i < m->ntensors; i++) {
        const mf_tensor *t = &m->tensors[i];
        FUZZ_ASSERT(t->name && t->file && path_ok(t->file), "tensor %zu: name or file '%.80s'", i,
                    t->file ? t->file : "(null)");
        size_t es = wpack_dtype_size(t->dtype);
        FUZZ_ASSERT(es > 0 && t->rank <= WPACK_MAX_RANK && (t->big == 0 || t->big == 1),
                    "tensor '%.40s': dtype %d, rank %u, big %d", t->name, t->dtype, t->rank, t->big);
        unsigned __int128 n = es;
        for (unsigned k = 0; k < t->rank; k++)
            n *= t->dims[k];
        FUZZ_ASSERT(n == t->nbytes, "tensor '%.40s': nbytes %llu, dims x size say otherwise",
                    t->name, (unsigned long long)t->nbytes);
    }
    for (size_t i = 0; i < m->nmeta; i++) {
        const mf_meta *e = &m->meta[i];
        FUZZ_ASSERT(e->key && (e->type == WPACK_META_STRING ? e->str != NULL
                                                             : e->type == WPACK_META_I64 ||
                                                                   e->type == WPACK_META_F64 ||
                                                                   e->type == WPACK_META_BOOL),
                    "metadata %zu: type %d", i, e->type);
        FUZZ_ASSERT(e->type != WPACK_META_BOOL || e->boolean == 0 || e->boolean == 1,
                    "metadata '%.40s': bool %d", e->key, e->boolean);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = (char *)fuzz_copy(data, size);
    char err[512], tiny[4] = {0};
    mf_manifest m, m2;
    err[0] = 0;
    int rc = manifest_parse_buffer(buf, size, &m, err, sizeof err);
    size_t len = strnlen(err, sizeof err);
    FUZZ_ASSERT(len < sizeof err && (rc == WPACK_OK) == (len == 0),
                "rc %d with message '%.80s'", rc, err);
    FUZZ_ASSERT(rc == WPACK_OK || rc == WPACK_E_INPUT || rc == WPACK_E_UNSUPPORTED ||
                    rc == WPACK_E_RANK || rc == WPACK_E_OVERFLOW || rc == WPACK_E_NOMEM,
                "rc %d (%s): %s", rc, wpack_error_name(rc), err);
    if (rc == WPACK_OK) {
        check_manifest(&m);
    } else {
        FUZZ_ASSERT(!m.tensors && !m.meta && !m.json_ && !m.ntensors && !m.nmeta,
                    "a refused manifest still holds entries");
    }
    int rc2 = manifest_parse_buffer(buf, size, &m2, tiny, sizeof tiny);
    FUZZ_ASSERT(rc2 == rc && strnlen(tiny, sizeof tiny) < sizeof tiny &&
                    m2.ntensors == m.ntensors && m2.nmeta == m.nmeta,
                "rc %d with a small message buffer, %d with a large one", rc2, rc);
    if (rc == WPACK_OK) {
        manifest_free(&m);
        manifest_free(&m2);
    }
    check_index(buf, size);
    free(buf);
    return 0;
}
