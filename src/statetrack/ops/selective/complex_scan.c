/* The complex selective scan with its readout on the CPU (AUSSM, Simple AUSSM, DCD), forward and backward,
 * float32, one thread.
 *
 *   a_t = r_t (cos theta_t + i sin theta_t)
 *   h_t = a_t h_{t-1} + x_t B_t        y_t = Re(sum_n C_t,n h_t,n)
 *
 * per sequence b and channel e, with N complex slots: the transition's cosine, sine and modulus (E, N) (the
 * caller takes cos and sin of its angles; r NULL: modulus 1), x_t (E) real, B_t (N) real and C_t (N)
 * complex shared by the channels. Each sequence runs its own time loop over its E x N state, which stays in
 * the cache; no complex (B, T, E, N) tensor is read or written but, for the backward pass, the state
 * sequence. The backward pass runs the reverse recurrence of the state gradient G_{t-1} = conj(a_t) G_t
 * (plus the readout's gy_t conj(C_t)), and reduces every gradient step by step: those of B and C over the
 * channels, that of x over the slots; the transition's gradient leaves as those of its angle and modulus.
 *
 * Complex tensors are interleaved (re, im) float32 pairs, as complex64 is stored. Layouts (contiguous):
 * c, s, r, gth, gr (B, T, E, N) real; H (the states, for the backward pass) (B, T, E, N) complex; x, y,
 * gy, gx (B, T, E); Bm, gB (B, T, N) real; C, gC (B, T, N) complex; h0, hT, ghT, gh0 (B, E, N) complex.
 * r and gr are NULL together (modulus 1); ghT may be NULL (no gradient reaches the final state). Python
 * side: statetrack.ops.selective.scan (autograd, dispatch).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void statetrack_cscan_fwd(int64_t B, int64_t T, int64_t E, int64_t N, const float *c, const float *s,
                          const float *r, const float *x, const float *Bm, const float *C, const float *h0,
                          float *H, float *y, float *hT) {
    const int64_t S = E * N; /* one sequence's state, complex */
    float *h = malloc(2 * S * sizeof(float));
    for (int64_t b = 0; b < B; b++) {
        memcpy(h, h0 + 2 * b * S, 2 * S * sizeof(float));
        for (int64_t t = 0; t < T; t++) {
            const int64_t k = b * T + t; /* (b, t) */
            const float *Bt = Bm + k * N, *Ct = C + 2 * k * N;
            for (int64_t e = 0; e < E; e++) {
                const float xv = x[k * E + e];
                const int64_t o = k * S + e * N; /* (b, t, e, 0) */
                const float *ce = c + o, *se = s + o, *re = r ? r + o : 0;
                float *he = h + 2 * e * N;
                float acc = 0.0f;
                for (int64_t n = 0; n < N; n++) {
                    const float m = re ? re[n] : 1.0f;
                    const float ar = m * ce[n], ai = m * se[n], pr = he[2 * n], pi = he[2 * n + 1];
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

void statetrack_cscan_bwd(int64_t B, int64_t T, int64_t E, int64_t N, const float *c, const float *s,
                          const float *r, const float *x, const float *Bm, const float *C, const float *h0,
                          const float *H, const float *gy, const float *ghT, float *gth, float *gr, float *gx,
                          float *gB, float *gC, float *gh0) {
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
            const float *Bt = Bm + k * N, *Ct = C + 2 * k * N;
            const float *hp = t ? H + 2 * (k - 1) * S : h0 + 2 * b * S; /* h_{t-1} */
            const float *ht = H + 2 * k * S;
            float *gBt = gB + k * N, *gCt = gC + 2 * k * N;
            memset(gBt, 0, N * sizeof(float));
            memset(gCt, 0, 2 * N * sizeof(float));
            for (int64_t e = 0; e < E; e++) {
                const float xv = x[k * E + e], dy = gy[k * E + e];
                const int64_t o = k * S + e * N;
                const float *ce = c + o, *se = s + o, *re = r ? r + o : 0;
                const float *hpe = hp + 2 * e * N, *hte = ht + 2 * e * N;
                float *ge = g + 2 * e * N, *gthe = gth + o, *gre = gr ? gr + o : 0;
                float dx = 0.0f;
                for (int64_t n = 0; n < N; n++) {
                    /* G_t: what flowed back from step t+1, and the readout's dy conj(C) */
                    const float Gr = ge[2 * n] + dy * Ct[2 * n], Gi = ge[2 * n + 1] - dy * Ct[2 * n + 1];
                    gCt[2 * n] += dy * hte[2 * n]; /* y = Re(C h): dC = dy conj(h) */
                    gCt[2 * n + 1] -= dy * hte[2 * n + 1];
                    const float pr = hpe[2 * n], pi = hpe[2 * n + 1];
                    const float gar = Gr * pr + Gi * pi, gai = Gi * pr - Gr * pi; /* G conj(h_{t-1}) */
                    const float m = re ? re[n] : 1.0f, cn = ce[n], sn = se[n];
                    const float ar = m * cn, ai = m * sn;
                    gthe[n] = gai * ar - gar * ai; /* a = r e^(i theta): d/dtheta = i a */
                    if (gre) {
                        gre[n] = gar * cn + gai * sn;
                    }
                    dx += Gr * Bt[n]; /* the input x B is real: its share is Re(G) */
                    gBt[n] += Gr * xv;
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
