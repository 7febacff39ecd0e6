/* The complex selective scan with its readout on the CPU (AUSSM, Simple AUSSM, DCD), forward and backward,
 * float32, one thread.
 *
 *   h_t = a_t h_{t-1} + x_t B_t        y_t = Re(sum_n C_t,n h_t,n)
 *
 * per sequence b and channel e, with N complex slots: a_t (E, N) complex (formed by the caller from its
 * angles), x_t (E) real, B_t (N) real and C_t (N) complex shared by the channels. Each sequence runs its own
 * time loop over its E x N state, which stays in the cache; nothing of size (B, T, E, N) is read or written
 * but a and, for the backward pass, the state sequence. The backward pass runs the reverse recurrence of the
 * state gradient G_{t-1} = conj(a_t) G_t (plus the readout's gy_t conj(C_t)) and reduces every gradient
 * step by step: those of B and C over the channels, that of x over the slots.
 *
 * Complex tensors are interleaved (re, im) float32 pairs, as complex64 is stored. Layouts (contiguous):
 * a, ga, H (the states, for the backward pass) (B, T, E, N) complex; x, y, gy, gx (B, T, E); Bm, gB (B, T,
 * N) real; C, gC (B, T, N) complex; h0, hT, ghT, gh0 (B, E, N) complex. ghT may be NULL (no gradient
 * reaches the final state). Python side: statetrack.ops.selective (autograd, dispatch).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void statetrack_cscan_fwd(int64_t B, int64_t T, int64_t E, int64_t N, const float *a, const float *x,
                          const float *Bm, const float *C, const float *h0, float *H, float *y, float *hT) {
    const int64_t S = E * N; /* one sequence's state, complex */
    float *h = malloc(2 * S * sizeof(float));
    for (int64_t b = 0; b < B; b++) {
        memcpy(h, h0 + 2 * b * S, 2 * S * sizeof(float));
        for (int64_t t = 0; t < T; t++) {
            const int64_t k = b * T + t; /* (b, t) */
            const float *at = a + 2 * k * S, *Bt = Bm + k * N, *Ct = C + 2 * k * N;
            for (int64_t e = 0; e < E; e++) {
                const float xv = x[k * E + e];
                const float *ae = at + 2 * e * N;
                float *he = h + 2 * e * N;
                float acc = 0.0f;
                for (int64_t n = 0; n < N; n++) {
                    const float ar = ae[2 * n], ai = ae[2 * n + 1], pr = he[2 * n], pi = he[2 * n + 1];
                    const float hr = ar * pr - ai * pi + xv * Bt[n], hi = ar * pi + ai * pr;
                    he[2 * n] = hr;
                    he[2 * n + 1] = hi;
                    acc += Ct[2 * n] * hr - Ct[2 * n + 1] * hi;
                }
                y[k * E + e] = acc;
            }
            if (H) {
                memcpy(H + 2 * k * S, h, 2 * S * sizeof(float));
            }
        }
        memcpy(hT + 2 * b * S, h, 2 * S * sizeof(float));
    }
    free(h);
}

void statetrack_cscan_bwd(int64_t B, int64_t T, int64_t E, int64_t N, const float *a, const float *x,
                          const float *Bm, const float *C, const float *h0, const float *H, const float *gy,
                          const float *ghT, float *ga, float *gx, float *gB, float *gC, float *gh0) {
    const int64_t S = E * N;
    float *g = malloc(2 * S * sizeof(float)); /* dL/dh_t, complex, as it flows back */
    for (int64_t b = 0; b < B; b++) {
        if (ghT) {
            memcpy(g, ghT + 2 * b * S, 2 * S * sizeof(float));
        } else {
            memset(g, 0, 2 * S * sizeof(float));
        }
        for (int64_t t = T - 1; t >= 0; t--) {
            const int64_t k = b * T + t;
            const float *at = a + 2 * k * S, *Bt = Bm + k * N, *Ct = C + 2 * k * N;
            const float *hp = t ? H + 2 * (k - 1) * S : h0 + 2 * b * S; /* h_{t-1} */
            const float *ht = H + 2 * k * S;
            float *gat = ga + 2 * k * S, *gBt = gB + k * N, *gCt = gC + 2 * k * N;
            memset(gBt, 0, N * sizeof(float));
            memset(gCt, 0, 2 * N * sizeof(float));
            for (int64_t e = 0; e < E; e++) {
                const float xv = x[k * E + e], dy = gy[k * E + e];
                const float *ae = at + 2 * e * N, *hpe = hp + 2 * e * N, *hte = ht + 2 * e * N;
                float *ge = g + 2 * e * N, *gae = gat + 2 * e * N;
                float dx = 0.0f;
                for (int64_t n = 0; n < N; n++) {
                    /* G_t: what flowed back from step t+1, and the readout's dy conj(C) */
                    const float Gr = ge[2 * n] + dy * Ct[2 * n], Gi = ge[2 * n + 1] - dy * Ct[2 * n + 1];
                    gCt[2 * n] += dy * hte[2 * n]; /* y = Re(C h): dC = dy conj(h) */
                    gCt[2 * n + 1] -= dy * hte[2 * n + 1];
                    const float pr = hpe[2 * n], pi = hpe[2 * n + 1];
                    gae[2 * n] = Gr * pr + Gi * pi; /* G conj(h_{t-1}) */
                    gae[2 * n + 1] = Gi * pr - Gr * pi;
                    dx += Gr * Bt[n]; /* the input x B is real: its share is Re(G) */
                    gBt[n] += Gr * xv;
                    const float ar = ae[2 * n], ai = ae[2 * n + 1];
                    ge[2 * n] = ar * Gr + ai * Gi; /* conj(a) G = dL/dh_{t-1} */
                    ge[2 * n + 1] = ar * Gi - ai * Gr;
                }
                gx[k * E + e] = dx;
            }
        }
        memcpy(gh0 + 2 * b * S, g, 2 * S * sizeof(float));
    }
    free(g);
}
