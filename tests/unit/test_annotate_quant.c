/* test_annotate_quant.c - the text of `--annotate --form quant`
 * (resolver/attrdict.c): P.range = !quant.calibrated<f32<MIN:MAX>> with the
 * record's f64 values reading back exactly (-0.0, subnormals, DBL_MAX, values
 * that are not f32), and the records that type cannot hold (per-channel,
 * min == max, non-finite: a verified archive has none, but the text rule
 * does not trust that) keep the attrs form. The CLI side, with mlir-opt-19
 * reading the output, is tests/cli/test_annotate_quant.sh. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resolve_int.h"
#include "testlib.h"

/* A per-tensor (channels 1) or per-channel record over vals: min[C],
 * max[C], absmax[C], mean[C], variance[C] as the reader lays them out. */
static wpack_stats make_stats(double *vals, uint32_t channels)
{
    wpack_stats st;
    memset(&st, 0, sizeof st);
    st.key = "m.0";
    st.kind = WPACK_STATS_ACTIVATION;
    st.granularity = channels > 1 ? WPACK_GRAN_CHANNEL : WPACK_GRAN_TENSOR;
    st.axis = channels > 1 ? 1 : 0;
    st.channels = channels;
    st.min = vals[0];
    st.max = vals[channels];
    st.absmax = vals[2 * channels];
    st.priv_[0] = vals;
    return st;
}

static char *text_of(const wpack_stats *st, int form)
{
    wpk_strbuf a = {0};
    wpk_stats_attr_text(&a, st, "wpack", form);
    return a.p;
}

/* "wpack.range = !quant.calibrated<f32<MIN:MAX>>": the two numbers as
 * strtod reads them (as MLIR's parser does), 0 if the text is not that. */
static int parse_range(const char *s, double *mn, double *mx)
{
    const char *head = "wpack.range = !quant.calibrated<f32<";
    if (strncmp(s, head, strlen(head)) != 0)
        return 0;
    char *end;
    *mn = strtod(s + strlen(head), &end);
    if (*end != ':')
        return 0;
    const char *second = end + 1;
    *mx = strtod(second, &end);
    /* MLIR's float literal needs a '.' in each number */
    int dots = strchr(s + strlen(head), '.') && strchr(second, '.');
    return dots && strcmp(end, ">>") == 0;
}

static int same_bits(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

static void test_quant_values_exact(void)
{
    static const double pairs[][2] = {
        {-1.5, 2.25}, {-23.5, 18.9}, {0.1, 0.30000000000000004}, {-0.0, 1.0},
        {-1e-20, 1e20}, {4.9406564584124654e-324, 1e-300}, {-DBL_MAX, DBL_MAX},
        {-3.4028234663852886e38, 3.4028234663852886e38}, {1.0, 1e15}, {-123456789.0, 1e16},
        {0.0, 1.1754943508222875e-38}, {-2.5, -1.25}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        double mn = pairs[i][0], mx = pairs[i][1];
        double vals[5] = {mn, mx, fmax(fabs(mn), fabs(mx)), mn, 0};
        wpack_stats st = make_stats(vals, 1);
        CHECK(wpk_stats_quant_unfit(&st) == NULL, "pair %zu unfit", i);
        char *t = text_of(&st, WPACK_ANNOTATE_QUANT);
        double a, b;
        CHECK(t && parse_range(t, &a, &b), "pair %zu: '%s'", i, t ? t : "(null)");
        if (t && parse_range(t, &a, &b))
            CHECK(same_bits(a, mn) && same_bits(b, mx), "pair %zu: '%s' reads %.17g:%.17g", i, t,
                  a, b);
        free(t);
    }
}

static void test_quant_text_form(void)
{
    double vals[5] = {-1.5, 10.0, 10.0, 0, 0};
    wpack_stats st = make_stats(vals, 1);
    char *t = text_of(&st, WPACK_ANNOTATE_QUANT);
    CHECK(t && strcmp(t, "wpack.range = !quant.calibrated<f32<-1.5:10.0>>") == 0, "'%s'", t);
    free(t);
    vals[0] = -0.0; /* the sign of zero survives */
    st = make_stats(vals, 1);
    t = text_of(&st, WPACK_ANNOTATE_QUANT);
    CHECK(t && strcmp(t, "wpack.range = !quant.calibrated<f32<-0.0:10.0>>") == 0, "'%s'", t);
    free(t);
    /* the attrs form of the same record is what it always was */
    vals[0] = -1.5;
    st = make_stats(vals, 1);
    t = text_of(&st, WPACK_ANNOTATE_ATTRS);
    CHECK(t && strcmp(t, "wpack.min = -1.5 : f32, wpack.max = 10.0 : f32, wpack.absmax = 10.0 : f32") == 0,
          "'%s'", t);
    free(t);
}

static void test_quant_unfit_keeps_attrs(void)
{
    double eq[5] = {2.0, 2.0, 2.0, 2.0, 0};
    wpack_stats st = make_stats(eq, 1);
    CHECK(wpk_stats_quant_unfit(&st) && strcmp(wpk_stats_quant_unfit(&st), "min == max") == 0, "eq");
    char *t = text_of(&st, WPACK_ANNOTATE_QUANT);
    CHECK(t && strcmp(t, "wpack.min = 2.0 : f32, wpack.max = 2.0 : f32, wpack.absmax = 2.0 : f32") == 0,
          "'%s'", t);
    free(t);
    double zeros[5] = {-0.0, 0.0, 0.0, 0.0, 0}; /* -0 < +0 is false: an empty range too */
    st = make_stats(zeros, 1);
    CHECK(wpk_stats_quant_unfit(&st) != NULL, "-0:0");
    double inf[5] = {-INFINITY, 1.0, INFINITY, 0, 0};
    st = make_stats(inf, 1);
    CHECK(wpk_stats_quant_unfit(&st) && strcmp(wpk_stats_quant_unfit(&st), "not finite") == 0, "inf");
    t = text_of(&st, WPACK_ANNOTATE_QUANT);
    CHECK(t && strncmp(t, "wpack.min = 0xFF800000 : f32,", 29) == 0, "'%s'", t);
    free(t);
    double nan_[5] = {-1.0, NAN, NAN, 0, 0};
    st = make_stats(nan_, 1);
    CHECK(wpk_stats_quant_unfit(&st) != NULL, "nan");
    double ch[10] = {-1, 0, 1, 2, 1, 2, 0, 0, 0, 0}; /* 2 channels: min[2] max[2] absmax[2] ... */
    st = make_stats(ch, 2);
    CHECK(wpk_stats_quant_unfit(&st) && strcmp(wpk_stats_quant_unfit(&st), "per-channel") == 0, "ch");
    t = text_of(&st, WPACK_ANNOTATE_QUANT);
    CHECK(t && strcmp(t, "wpack.axis = 1 : i64, wpack.min = dense<[-1.0, 0.0]> : tensor<2xf32>, "
                         "wpack.max = dense<[1.0, 2.0]> : tensor<2xf32>, "
                         "wpack.absmax = dense<[1.0, 2.0]> : tensor<2xf32>") == 0, "'%s'", t);
    free(t);
}

static void test_form_names(void)
{
    CHECK_EQ(wpack_annotate_form_from_name("attrs"), WPACK_ANNOTATE_ATTRS);
    CHECK_EQ(wpack_annotate_form_from_name("quant"), WPACK_ANNOTATE_QUANT);
    CHECK_EQ(wpack_annotate_form_from_name("Quant"), -1);
    CHECK_EQ(wpack_annotate_form_from_name(""), -1);
    CHECK_EQ(wpack_annotate_form_from_name(NULL), -1);
    wpack_resolve_options o;
    wpack_resolve_options_init(&o);
    CHECK_EQ(o.annotate_form, WPACK_ANNOTATE_ATTRS);
}

int main(void)
{
    RUN(test_quant_values_exact);
    RUN(test_quant_text_form);
    RUN(test_quant_unfit_keeps_attrs);
    RUN(test_form_names);
    return tl_finish();
}
