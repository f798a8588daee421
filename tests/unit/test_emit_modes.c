/*
 * test_emit_modes.c - the table of emit modes through its public face
 * (wpack_mlir.h: wpack_emit_from_name, wpack_emit_flags): every --emit name
 * maps to its WPACK_EMIT_* value and back through the flags; unknown names
 * and numbers are no mode; externalize refuses a mode the table says it
 * cannot write.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"
#include "wpack_mlir.h"

static void test_names(void)
{
    CHECK_EQ(wpack_emit_from_name("uri"), WPACK_EMIT_URI);
    CHECK_EQ(wpack_emit_from_name("iree"), WPACK_EMIT_IREE);
    CHECK_EQ(wpack_emit_from_name("inline"), WPACK_EMIT_INLINE);
    CHECK_EQ(wpack_emit_from_name("URI"), -1);
    CHECK_EQ(wpack_emit_from_name(""), -1);
    CHECK_EQ(wpack_emit_from_name(NULL), -1);
}

static void test_flags(void)
{
    CHECK_EQ(wpack_emit_flags(WPACK_EMIT_URI), WPACK_EMIT_CAN_EXTERNALIZE);
    CHECK_EQ(wpack_emit_flags(WPACK_EMIT_IREE), WPACK_EMIT_CAN_EXTERNALIZE | WPACK_EMIT_HAS_SCOPE);
    CHECK_EQ(wpack_emit_flags(WPACK_EMIT_INLINE), WPACK_EMIT_READS_BYTES);
    CHECK_EQ(wpack_emit_flags(-1), 0);
    CHECK_EQ(wpack_emit_flags(3), 0);
}

static void test_externalize_refuses_inline(void)
{
    char in[] = "/tmp/wpack-emitmodes.XXXXXX";
    int fd = mkstemp(in);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0)
        return;
    close(fd);
    wpack_externalize_options opt;
    wpack_externalize_options_init(&opt);
    opt.emit = WPACK_EMIT_INLINE;
    char out[64], ar[64];
    snprintf(out, sizeof out, "%s.out", in);
    snprintf(ar, sizeof ar, "%s.wpack", in);
    CHECK_EQ(wpack_externalize_file(in, out, ar, &opt, NULL), WPACK_E_INVALID_ARGUMENT);
    CHECK(access(out, F_OK) != 0 && access(ar, F_OK) != 0, "nothing written");
    opt.emit = 7;
    CHECK_EQ(wpack_externalize_file(in, out, ar, &opt, NULL), WPACK_E_INVALID_ARGUMENT);
    unlink(in);
}

int main(void)
{
    RUN(test_names);
    RUN(test_flags);
    RUN(test_externalize_refuses_inline);
    return tl_finish();
}
