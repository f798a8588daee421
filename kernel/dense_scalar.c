/* dense_scalar.c - the portable reference path: one plain dot product per
 * output, summed in k order in f32. Every SIMD path is tested against it. */
#include "dense.h"

static float weight_at(const wpack_linear *l, size_t idx)
{
    const uint8_t *p = l->weight;
    switch (l->weight_dtype) {
    case WPACK_DTYPE_F32: {
        float f;
        memcpy(&f, p + 4 * idx, 4);
        return f;
    }
    case WPACK_DTYPE_F16:
    case WPACK_DTYPE_BF16: {
        uint16_t h;
        memcpy(&h, p + 2 * idx, 2);
        return l->weight_dtype == WPACK_DTYPE_F16 ? wpk_f16_to_f32(h) : wpk_bf16_to_f32(h);
    }
    default:
        return (float)(int8_t)p[idx];
    }
}

void wpk_dense_rows_scalar(const wpk_dense_job *j, size_t o0, size_t o1)
{
    const wpack_linear *l = j->l;
    for (size_t b = 0; b < j->batch; b++) {
        const float *x = j->x + b * j->in;
        for (size_t o = o0; o < o1; o++) {
            float acc = 0.0f;
            size_t row = o * j->in;
            for (size_t k = 0; k < j->in; k++) {
                float xv;
                memcpy(&xv, x + k, 4); /* x may be unaligned */
                acc += xv * weight_at(l, row + k);
            }
            float r = wpk_dense_finish(l, o, acc, j->act);
            memcpy(j->y + b * j->out + o, &r, 4);
        }
    }
}
