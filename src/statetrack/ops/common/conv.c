/* The depthwise causal convolution without gradients (evaluation, validation), float32, one thread.
 *
 *   y_t = bias + sum_j x_{t-K+1+j} w_j      (x before the chunk: the buffer of the previous K-1 inputs)
 *
 * in the arithmetic of ops.conv's PyTorch form (_shifted_sum, then the bias): the first tap a product,
 * each later tap a fused multiply-add in tap order, the bias added last. That form makes K passes over a
 * (B, K-1+T, C) concatenation of the buffer and the chunk; here each output row is formed once, in cache.
 * ops.conv checks once per process that both round alike (they do where PyTorch's own kernels fuse the
 * multiply-add of addcmul_) and keeps the PyTorch form otherwise.
 *
 * Layouts (float32): x (B, T, C) with strides (sb, st, 1) (a slice of a wider projection is read in
 * place); y (B, T, C), buf (B, C, K-1), wt (K, C) the weights by tap, bias (C) or NULL, contiguous.
 * Python side: statetrack.ops.cpu_kernels (build and load), statetrack.ops.conv.
 */
#include <math.h>
#include <stdint.h>

void statetrack_causal_conv(int64_t B, int64_t T, int64_t C, int64_t K, const float *x, int64_t sb,
                            int64_t st, const float *buf, const float *wt, const float *bias, float *y) {
    for (int64_t b = 0; b < B; b++) {
        const float *xb = x + b * sb, *hb = buf + b * C * (K - 1);
        for (int64_t t = 0; t < T; t++) {
            float *yt = y + (b * T + t) * C;
            for (int64_t j = 0; j < K; j++) {
                const int64_t s = t + j - (K - 1); /* the input's step; < 0: from the buffer */
                const float *w = wt + j * C;
                if (s >= 0) {
                    const float *xs = xb + s * st;
                    if (j == 0)
                        for (int64_t c = 0; c < C; c++) yt[c] = xs[c] * w[c];
                    else
                        for (int64_t c = 0; c < C; c++) yt[c] = fmaf(xs[c], w[c], yt[c]);
                } else {
                    const float *hs = hb + (K - 1 + s);
                    if (j == 0)
                        for (int64_t c = 0; c < C; c++) yt[c] = hs[c * (K - 1)] * w[c];
                    else
                        for (int64_t c = 0; c < C; c++) yt[c] = fmaf(hs[c * (K - 1)], w[c], yt[c]);
                }
            }
            if (bias)
                for (int64_t c = 0; c < C; c++) yt[c] += bias[c];
        }
    }
}
