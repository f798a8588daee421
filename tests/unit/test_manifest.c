/* test_manifest.c - manifest_parse_buffer (import/manifest.c): the example
 * of import/README.md parsed field by field, each rule broken once with its
 * code and message, and no entries left behind by a refused manifest. */
#include <stdint.h>

#include "manifest.h"
#include "testlib.h"

static int parse(const char *json, mf_manifest *m, char *err, size_t errlen)
{
    return manifest_parse_buffer(json, strlen(json), m, err, errlen);
}

static void test_example(void)
{
    const char *json =
        "{\"tensors\": [\n"
        "  {\"name\": \"enc.w\", \"dtype\": \"f32\", \"shape\": [2, 3], \"file\": \"w.bin\","
        " \"offset\": 8, \"endian\": \"little\"},\n"
        "  {\"name\": \"enc.b\", \"dtype\": \"BF16\", \"shape\": [], \"file\": \"sub/b.bin\","
        " \"endian\": \"big\"}],\n"
        " \"metadata\": {\"source\": \"exporter-x\", \"version\": 2, \"scale\": 0.5, \"ok\": true}}";
    mf_manifest m;
    char err[300] = "";
    CHECK_EQ(parse(json, &m, err, sizeof err), WPACK_OK);
    CHECK(err[0] == 0, "message '%s'", err);
    CHECK_EQ(m.ntensors, 2);
    if (m.ntensors == 2) {
        const mf_tensor *a = &m.tensors[0], *b = &m.tensors[1];
        CHECK(strcmp(a->name, "enc.w") == 0 && strcmp(a->file, "w.bin") == 0, "names");
        CHECK_EQ(a->dtype, WPACK_DTYPE_F32);
        CHECK_EQ(a->rank, 2);
        CHECK(a->dims[0] == 2 && a->dims[1] == 3, "dims");
        CHECK_EQ(a->nbytes, 24);
        CHECK_EQ(a->offset, 8);
        CHECK_EQ(a->big, 0);
        CHECK_EQ(b->dtype, WPACK_DTYPE_BF16);
        CHECK_EQ(b->rank, 0);
        CHECK_EQ(b->nbytes, 2);
        CHECK_EQ(b->offset, 0);
        CHECK_EQ(b->big, 1);
    }
    CHECK_EQ(m.nmeta, 4);
    if (m.nmeta == 4) {
        CHECK(strcmp(m.meta[0].key, "source") == 0 && m.meta[0].type == WPACK_META_STRING &&
                  strcmp(m.meta[0].str, "exporter-x") == 0, "source");
        CHECK(m.meta[1].type == WPACK_META_I64 && m.meta[1].i64 == 2, "version");
        CHECK(m.meta[2].type == WPACK_META_F64 && m.meta[2].f64 == 0.5, "scale");
        CHECK(m.meta[3].type == WPACK_META_BOOL && m.meta[3].boolean == 1, "ok");
    }
    manifest_free(&m);
    CHECK(m.tensors == NULL && m.ntensors == 0, "manifest_free clears");
}

/* The buffer needs no NUL: a manifest cut out of a larger one parses. */
static void test_not_terminated(void)
{
    const char text[] = "{\"tensors\": []}garbage";
    mf_manifest m;
    char err[300];
    CHECK_EQ(manifest_parse_buffer(text, 15, &m, err, sizeof err), WPACK_OK);
    CHECK_EQ(m.ntensors, 0);
    manifest_free(&m);
    CHECK_EQ(manifest_parse_buffer(text, sizeof text - 1, &m, err, sizeof err), WPACK_E_INPUT);
}

static void refused(const char *json, int code, const char *msg)
{
    mf_manifest m;
    char err[300] = "";
    int rc = parse(json, &m, err, sizeof err);
    CHECK(rc == code, "%s: rc %d, want %d (%s)", json, rc, code, err);
    CHECK(strstr(err, msg) != NULL, "%s: message '%s' lacks '%s'", json, err, msg);
    CHECK(m.tensors == NULL && m.meta == NULL && m.ntensors == 0 && m.nmeta == 0,
          "%s: a refused manifest holds entries", json);
    char tiny[4];
    CHECK_EQ(parse(json, &m, tiny, sizeof tiny), code);
}

#define T(x) "{\"tensors\": [{\"name\": \"w\", \"dtype\": \"f32\", \"shape\": [2], \"file\": \"w.bin\"" x "}]}"

static void test_rules(void)
{
    refused("{\"tensors\": [", WPACK_E_INPUT, "manifest JSON:");
    refused("{\"tensors\": [], \"tensors\": []}", WPACK_E_INPUT, "duplicate");
    refused("[]", WPACK_E_INPUT, "want {\"tensors\"");
    refused("{\"tensors\": [], \"metadata\": []}", WPACK_E_INPUT, "want {\"tensors\"");
    refused("{\"tensors\": [1]}", WPACK_E_INPUT, "tensors[0]: needs string name");
    refused("{\"tensors\": [{\"name\": \"w\", \"dtype\": \"f128\", \"shape\": [], \"file\": \"w\"}]}",
            WPACK_E_UNSUPPORTED, "unknown dtype 'f128'");
    refused("{\"tensors\": [{\"name\": \"w\", \"dtype\": \"f32\", \"shape\": [], \"file\": \"../w\"}]}",
            WPACK_E_INPUT, "must be a relative path without '..'");
    refused("{\"tensors\": [{\"name\": \"w\", \"dtype\": \"f32\", \"shape\": [], \"file\": \"/w\"}]}",
            WPACK_E_INPUT, "relative path");
    refused("{\"tensors\": [{\"name\": \"w\", \"dtype\": \"f32\", \"shape\": [], \"file\": \"a\\\\w\"}]}",
            WPACK_E_INPUT, "relative path");
    refused("{\"tensors\": [{\"name\": \"w\", \"dtype\": \"f32\", \"shape\": [1,1,1,1,1,1,1,1,1], "
            "\"file\": \"w\"}]}", WPACK_E_RANK, "rank above 8");
    refused("{\"tensors\": [{\"name\": \"w\", \"dtype\": \"f32\", \"shape\": [-1], \"file\": \"w\"}]}",
            WPACK_E_INPUT, "shape[0] is not an int >= 0");
    refused("{\"tensors\": [{\"name\": \"w\", \"dtype\": \"u8\", \"shape\": [4294967296, 4294967296], "
            "\"file\": \"w\"}]}", WPACK_E_OVERFLOW, "element count overflows");
    refused("{\"tensors\": [{\"name\": \"w\", \"dtype\": \"f64\", \"shape\": [4611686018427387904], "
            "\"file\": \"w\"}]}", WPACK_E_OVERFLOW, "byte size overflows");
    refused(T(", \"offset\": -1"), WPACK_E_INPUT, "offset is not an int >= 0");
    refused(T(", \"endian\": \"middle\""), WPACK_E_INPUT, "endian must be little or big");
    refused("{\"tensors\": [], \"metadata\": {\"a\": [1]}}", WPACK_E_INPUT,
            "metadata 'a': only strings, numbers and booleans");
    /* the second entry is bad: the first one is not kept either */
    refused("{\"tensors\": [{\"name\": \"a\", \"dtype\": \"f32\", \"shape\": [], \"file\": \"a\"}, 7]}",
            WPACK_E_INPUT, "tensors[1]");
}

int main(void)
{
    RUN(test_example);
    RUN(test_not_terminated);
    RUN(test_rules);
    return tl_finish();
}
