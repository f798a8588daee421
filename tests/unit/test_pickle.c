/* test_pickle.c - the restricted unpickler: what torch emits parses, the rest
 * is refused with a message naming it, and no prefix of a pickle crashes. */
#include <stdint.h>

#include "pickle.h"
#include "testlib.h"

#define P(s) (const uint8_t *)(s), sizeof(s) - 1

static int load(const uint8_t *b, size_t n, pk_value **root, char *err, size_t errlen)
{
    pk_state *st;
    int rc = pk_load(b, n, &st, root, err, errlen);
    pk_free(st);
    return rc;
}

/* {'a': 5, 'b': [1.5, True, None], 'c': 'xyz', 'd': -2} with memo, protocol 2 */
static const char dict_pkl[] = "\x80\x02}q\x00(X\x01\x00\x00\x00" "aK\x05X\x01\x00\x00\x00" "b]q\x01"
                               "(G?\xf8\x00\x00\x00\x00\x00\x00\x88Ne"
                               "X\x01\x00\x00\x00" "cX\x03\x00\x00\x00xyz"
                               "X\x01\x00\x00\x00" "d\x8a\x01\xfeu.";

static void test_dict(void)
{
    pk_state *st;
    pk_value *root;
    char err[256];
    int rc = pk_load(P(dict_pkl), &st, &root, err, sizeof err);
    CHECK_EQ(rc, WPACK_OK);
    if (rc) {
        printf("  %s\n", err);
        pk_free(st);
        return;
    }
    CHECK_EQ(root->kind, PK_DICT);
    CHECK_EQ(root->n, 8);
    CHECK_EQ(root->items[1]->i, 5);
    CHECK_EQ(root->items[3]->kind, PK_LIST);
    CHECK_EQ(root->items[3]->n, 3);
    CHECK(root->items[3]->items[0]->f == 1.5, "float");
    CHECK_EQ(root->items[3]->items[1]->kind, PK_BOOL);
    CHECK_EQ(root->items[3]->items[2]->kind, PK_NONE);
    CHECK(root->items[5]->slen == 3 && memcmp(root->items[5]->s, "xyz", 3) == 0, "str");
    CHECK_EQ(root->items[7]->i, -2);
    pk_free(st);
}

static void test_every_prefix_fails_cleanly(void)
{
    char err[256];
    pk_value *root;
    for (size_t n = 0; n + 1 < sizeof dict_pkl - 1; n++) {
        int rc = load((const uint8_t *)dict_pkl, n, &root, err, sizeof err);
        CHECK(rc != WPACK_OK && err[0], "prefix %zu: rc %d", n, rc);
    }
}

static void test_forbidden_globals(void)
{
    static const struct {
        const uint8_t *p;
        size_t n;
        const char *name;
    } cases[] = {
        {P("\x80\x02" "cos\nsystem\nX\x02\x00\x00\x00id\x85R."), "os.system"},
        {P("\x80\x02" "cbuiltins\neval\n."), "builtins.eval"},
        {P("\x80\x02" "ctorch.storage\n_load_from_bytes\n."), "torch.storage._load_from_bytes"},
        {P("\x80\x02" "ctorch\nload\n."), "torch.load"},
        {P("\x80\x04\x8c\x02os\x8c\x05popen\x93."), "os.popen"},
        {P("\x80\x02" "c__builtin__\ngetattr\n."), "__builtin__.getattr"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[512];
        pk_value *root;
        int rc = load(cases[i].p, cases[i].n, &root, err, sizeof err);
        CHECK_EQ(rc, WPACK_E_UNSUPPORTED);
        CHECK(strstr(err, cases[i].name) != NULL, "message '%s' lacks %s", err, cases[i].name);
    }
}

static void test_calling_a_storage_type_refused(void)
{
    char err[256];
    pk_value *root;
    int rc = load(P("\x80\x02" "ctorch\nFloatStorage\n)R."), &root, err, sizeof err);
    CHECK_EQ(rc, WPACK_E_UNSUPPORTED);
}

static void test_opcodes_outside_the_subset(void)
{
    char err[256];
    pk_value *root;
    CHECK_EQ(load(P("\x80\x02(i__main__\nX\n."), &root, err, sizeof err), WPACK_E_UNSUPPORTED);
    CHECK(strstr(err, "opcode 0x69") != NULL, "%s", err);
    CHECK_EQ(load(P("\x80\x06N."), &root, err, sizeof err), WPACK_E_UNSUPPORTED); /* protocol 6 */
    CHECK_EQ(load(P("a."), &root, err, sizeof err), WPACK_E_INPUT);             /* underflow */
    CHECK_EQ(load(P("NN."), &root, err, sizeof err), WPACK_E_INPUT);            /* 2 left */
    CHECK_EQ(load(P("h\x05."), &root, err, sizeof err), WPACK_E_INPUT);         /* empty memo */
    CHECK_EQ(load(P("Nr\xff\xff\xff\x7f."), &root, err, sizeof err), WPACK_E_LIMIT);
    CHECK_EQ(load(P("X\xff\xff\xff\xff."), &root, err, sizeof err), WPACK_E_LIMIT);
}

/* Ints outside 64 bits (LONG1 9 bytes, LONG4) load as opaque values that the
 * importer skips; a 9-byte int whose last byte only extends the sign is an
 * ordinary int64. */
static void test_big_ints(void)
{
    char err[256];
    pk_state *st;
    pk_value *root;
    CHECK_EQ(pk_load(P("\x8a\x09\x01\x02\x03\x04\x05\x06\x07\x08\x09."), &st, &root, err,
                     sizeof err), WPACK_OK);
    CHECK(root && root->kind == PK_OPAQUE && strstr(root->why, "64 bits"), "%s", err);
    pk_free(st);
    CHECK_EQ(pk_load(P("\x8b\x09\x00\x00\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09."), &st, &root,
                     err, sizeof err), WPACK_OK);
    CHECK(root && root->kind == PK_OPAQUE, "%s", err);
    pk_free(st);
    CHECK_EQ(pk_load(P("\x8a\x09\xfe\xff\xff\xff\xff\xff\xff\xff\xff."), &st, &root, err,
                     sizeof err), WPACK_OK);
    CHECK(root && root->kind == PK_INT && root->i == -2, "%s", err);
    pk_free(st);
    CHECK_EQ(load(P("\x8b\xff\xff\xff\xff."), &root, err, sizeof err), WPACK_E_INPUT);
}

/* Work and memory follow the pickle's size: memo indices and container items. */
static void test_budgets(void)
{
    char err[256];
    pk_value *root;
    /* LONG_BINPUT 4,000,000 in a tiny pickle: no 32 MB memo table */
    CHECK_EQ(load(P("Nr\x00\x09\x3d\x00."), &root, err, sizeof err), WPACK_E_LIMIT);
    CHECK(strstr(err, "memo index 4000000 above") != NULL, "%s", err);
    CHECK_EQ(load(P("Nr\x00\x01\x00\x00."), &root, err, sizeof err), WPACK_OK); /* 256 */
    /* OrderedDict(list) on one memoised list, again and again */
    static uint8_t big[200000];
    size_t n = 0;
    const char head[] = "\x80\x02" "ccollections\nOrderedDict\nq\x00" "](";
    memcpy(big, head, sizeof head - 1);
    n += sizeof head - 1;
    for (int i = 0; i < 100; i++) {
        memcpy(big + n, "K\x01K\x02\x86", 5); /* (1, 2) */
        n += 5;
    }
    memcpy(big + n, "eq\x01", 3);
    n += 3;
    size_t list_end = n;
    while (n + 20 < sizeof big) {
        memcpy(big + n, "h\x00h\x01\x85R0", 7);
        n += 7;
    }
    memcpy(big + n, "00N.", 4);
    n += 4;
    CHECK_EQ(load(big, n, &root, err, sizeof err), WPACK_E_LIMIT);
    CHECK(strstr(err, "containers would hold more than") != NULL, "%s", err);
    CHECK_EQ(load(big, list_end + 7 * 10, &root, err, sizeof err), WPACK_E_INPUT); /* a few copies: fine, then truncated */
    CHECK(strstr(err, "truncated") != NULL, "%s", err);
}

static void test_protocol4_memoize_frame(void)
{
    char err[256];
    pk_state *st;
    pk_value *root;
    /* FRAME, EMPTY_LIST, MEMOIZE, SHORT_BINUNICODE 'hi', APPEND, BINGET 0 -> TUPLE2 (l, l) */
    static const char p4[] = "\x80\x04\x95\x0c\x00\x00\x00\x00\x00\x00\x00]\x94\x8c\x02hia"
                             "h\x00\x86.";
    int rc = pk_load(P(p4), &st, &root, err, sizeof err);
    CHECK_EQ(rc, WPACK_OK);
    if (!rc) {
        CHECK_EQ(root->kind, PK_TUPLE);
        CHECK(root->n == 2 && root->items[0] == root->items[1], "memo shares the list");
        CHECK_EQ(root->items[0]->n, 1);
    }
    pk_free(st);
}

static void test_ordered_dict_and_tensor(void)
{
    /* OrderedDict() with SETITEM of a rebuilt tensor over a persistent storage */
    static const char p[] =
        "\x80\x02" "ccollections\nOrderedDict\n)R"
        "X\x01\x00\x00\x00w"
        "ctorch._utils\n_rebuild_tensor_v2\n("
        "(X\x07\x00\x00\x00storage" "ctorch\nHalfStorage\n" "X\x01\x00\x00\x00" "0"
        "X\x03\x00\x00\x00" "cpu" "K\x06tQ"
        "K\x01" "K\x02K\x02\x86" "K\x01K\x02\x86" "\x89" "ccollections\nOrderedDict\n)R" "tR"
        "s}b.";
    char err[256];
    pk_state *st;
    pk_value *root;
    int rc = pk_load(P(p), &st, &root, err, sizeof err);
    CHECK_EQ(rc, WPACK_OK);
    if (rc)
        printf("  %s\n", err);
    if (!rc) {
        CHECK_EQ(root->kind, PK_DICT);
        pk_value *t = root->items[1];
        CHECK_EQ(t->kind, PK_TENSOR);
        CHECK_EQ(t->dtype, WPACK_DTYPE_F16);
        const pk_view *vw = t->view;
        CHECK_EQ(vw->offset, 1);
        CHECK(vw->rank == 2 && vw->dims[0] == 2 && vw->strides[0] == 1 && vw->strides[1] == 2, "view");
        CHECK_EQ(vw->storage->i, 6);
    }
    pk_free(st);
}

int main(void)
{
    RUN(test_dict);
    RUN(test_every_prefix_fails_cleanly);
    RUN(test_forbidden_globals);
    RUN(test_calling_a_storage_type_refused);
    RUN(test_opcodes_outside_the_subset);
    RUN(test_big_ints);
    RUN(test_budgets);
    RUN(test_protocol4_memoize_frame);
    RUN(test_ordered_dict_and_tensor);
    return tl_finish();
}
