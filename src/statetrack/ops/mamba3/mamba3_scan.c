/* Mamba-3's complex scan on the CPU (exponential-trapezoidal rule), forward and backward, float32, one thread.
 *
 *   a_t = ar_t + i ai_t  (per head and slot: exp(Delta A) exp(i phi), formed by the caller)
 *   u_t = x_t B_t        (per channel p and slot n; B_t = Br + i Bi)
 *   h_t = a_t (h_{t-1} + beta_t u_{t-1}) + gamma_t u_t            y_t = sum_n Re(conj(C_t,n) h_t,n)
 *
 * Each (b, head) pair runs its own time loop over its channels' N2 complex slots of state (and the last
 * input terms u_{t-1}, which the trapezoid reads): one pass per step, no (B, T, H, P, N2)
 * tensor but the state sequence kept for the backward pass (laid out (B, H, T, P, N2): one contiguous
 * block per head and step). A head's P x N2 state is a heap array of the call, walked channel by channel at
 * each step, so the gradients summed over the head's channels stay in registers. The backward pass runs the reverse recurrence of the state gradient
 * G_{t-1} = conj(a_t) G_t (plus the readout's C_t gy_t), recomputes u_t from x and B, and reduces every
 * gradient step by step: those of a, B, C (per head and slot) and gamma, beta (per head) are summed over
 * the head's channels.
 *
 * Layouts (contiguous, float32): ar, ai, Br, Bi, Cr, Ci and their gradients (B, T, H, N2); x, y, gy, gx
 * (B, T, H, P); gamma, beta and their gradients (B, T, H); h0*, u0*, hT*, uT*, gh0*, gu0*, ghT*, guT*
 * (B, H, P, N2); Hr, Hi (B, H, T, P, N2). Python side: statetrack.ops.mamba3.scan (autograd, dispatch).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NMAX 32

void statetrack_mamba3_fwd(int64_t B, int64_t T, int64_t H, int64_t P, int64_t N,
                           const float *ar, const float *ai, const float *x, const float *Br, const float *Bi,
                           const float *Cr, const float *Ci, const float *gamma, const float *beta,
                           const float *h0r, const float *h0i, const float *u0r, const float *u0i,
                           float *Hr, float *Hi, float *y, float *hTr, float *hTi, float *uTr, float *uTi) {
    const int64_t S = P * N;  /* one head's state: P channels x N slots */
    float *st = malloc(4 * S * sizeof(float));
    float *hr = st, *hi = st + S, *ur = st + 2 * S, *ui = st + 3 * S;
    for (int64_t b = 0; b < B; b++) {
        for (int64_t h = 0; h < H; h++) {
            const int64_t s0 = (b * H + h) * S;
            memcpy(hr, h0r + s0, S * sizeof(float));
            memcpy(hi, h0i + s0, S * sizeof(float));
            memcpy(ur, u0r + s0, S * sizeof(float));
            memcpy(ui, u0i + s0, S * sizeof(float));
            for (int64_t t = 0; t < T; t++) {
                const int64_t k = (b * T + t) * H + h;  /* (b, t, h) */
                const float g = gamma[k], be = beta[k];
                const float *art = ar + k * N, *ait = ai + k * N, *Brt = Br + k * N, *Bit = Bi + k * N;
                const float *Crt = Cr + k * N, *Cit = Ci + k * N;
                for (int64_t p = 0; p < P; p++) {
                    const float xv = x[k * P + p];
                    float *hrp = hr + p * N, *hip = hi + p * N, *urp = ur + p * N, *uip = ui + p * N;
                    float acc = 0.0f;
                    for (int64_t n = 0; n < N; n++) {
                        const float wr = hrp[n] + be * urp[n], wi = hip[n] + be * uip[n];
                        const float nur = xv * Brt[n], nui = xv * Bit[n];
                        hrp[n] = art[n] * wr - ait[n] * wi + g * nur;
                        hip[n] = art[n] * wi + ait[n] * wr + g * nui;
                        urp[n] = nur;
                        uip[n] = nui;
                        acc += Crt[n] * hrp[n] + Cit[n] * hip[n];
                    }
                    y[k * P + p] = acc;
                }
                if (Hr) {
                    memcpy(Hr + (s0 * T) + t * S, hr, S * sizeof(float));
                    memcpy(Hi + (s0 * T) + t * S, hi, S * sizeof(float));
                }
            }
            memcpy(hTr + s0, hr, S * sizeof(float));
            memcpy(hTi + s0, hi, S * sizeof(float));
            memcpy(uTr + s0, ur, S * sizeof(float));
            memcpy(uTi + s0, ui, S * sizeof(float));
        }
    }
    free(st);
}

void statetrack_mamba3_bwd(int64_t B, int64_t T, int64_t H, int64_t P, int64_t N,
                           const float *ar, const float *ai, const float *x, const float *Br, const float *Bi,
                           const float *Cr, const float *Ci, const float *gamma, const float *beta,
                           const float *h0r, const float *h0i, const float *u0r, const float *u0i,
                           const float *Hr, const float *Hi, const float *gy,
                           const float *ghTr, const float *ghTi, const float *guTr, const float *guTi,
                           float *gar, float *gai, float *gx, float *gBr, float *gBi, float *gCr, float *gCi,
                           float *ggamma, float *gbeta, float *gh0r, float *gh0i, float *gu0r, float *gu0i) {
    const int64_t S = P * N;
    /* G_t (the state's gradient) and V (the gradient reaching u_t from step t+1), per channel and slot */
    float *st = malloc(4 * S * sizeof(float));
    float *gr = st, *gi = st + S, *vr = st + 2 * S, *vi = st + 3 * S;
    for (int64_t b = 0; b < B; b++) {
        for (int64_t h = 0; h < H; h++) {
            const int64_t s0 = (b * H + h) * S;
            const float *Hrs = Hr + s0 * T, *His = Hi + s0 * T;
            for (int64_t j = 0; j < S; j++) {
                gr[j] = ghTr ? ghTr[s0 + j] : 0.0f;
                gi[j] = ghTi ? ghTi[s0 + j] : 0.0f;
                vr[j] = guTr ? guTr[s0 + j] : 0.0f;
                vi[j] = guTi ? guTi[s0 + j] : 0.0f;
            }
            for (int64_t t = T - 1; t >= 0; t--) {
                const int64_t k = (b * T + t) * H + h;
                const int64_t kp = (b * T + t - 1) * H + h;  /* (b, t - 1, h), read for t >= 1 */
                const float g = gamma[k], be = beta[k];
                const float *art = ar + k * N, *ait = ai + k * N, *Brt = Br + k * N, *Bit = Bi + k * N;
                const float *Crt = Cr + k * N, *Cit = Ci + k * N;
                const float *Brp = t ? Br + kp * N : 0, *Bip = t ? Bi + kp * N : 0;
                float gart[NMAX] = {0}, gait[NMAX] = {0}, gBrt[NMAX] = {0}, gBit[NMAX] = {0};
                float gCrt[NMAX] = {0}, gCit[NMAX] = {0};
                float dg = 0.0f, db = 0.0f;
                for (int64_t p = 0; p < P; p++) {
                    const float xv = x[k * P + p], dy = gy[k * P + p];
                    const float xp = t ? x[kp * P + p] : 0.0f;
                    const int64_t o = p * N;
                    const float *hpr = t ? Hrs + (t - 1) * S + o : h0r + s0 + o;
                    const float *hpi = t ? His + (t - 1) * S + o : h0i + s0 + o;
                    const float *htr = Hrs + t * S + o, *hti = His + t * S + o;
                    float dx = 0.0f;
                    for (int64_t n = 0; n < N; n++) {
                        const float upr = t ? xp * Brp[n] : u0r[s0 + o + n];
                        const float upi = t ? xp * Bip[n] : u0i[s0 + o + n];
                        const float ur = xv * Brt[n], ui = xv * Bit[n];
                        /* G_t: what flowed back from step t+1 (in gr, gi), and the readout's share */
                        const float Gr = gr[o + n] + dy * Crt[n], Gi = gi[o + n] + dy * Cit[n];
                        gCrt[n] += dy * htr[n];
                        gCit[n] += dy * hti[n];
                        const float wr = hpr[n] + be * upr, wi = hpi[n] + be * upi;
                        gart[n] += Gr * wr + Gi * wi;        /* G conj(w) */
                        gait[n] += Gi * wr - Gr * wi;
                        dg += Gr * ur + Gi * ui;             /* Re(G conj(u_t)) */
                        const float cr = art[n] * Gr + ait[n] * Gi, ci = art[n] * Gi - ait[n] * Gr;  /* conj(a) G */
                        db += cr * upr + ci * upi;           /* Re(conj(a) G conj(u_{t-1})) */
                        const float Ur = g * Gr + vr[o + n], Ui = g * Gi + vi[o + n];  /* dL/du_t */
                        dx += Brt[n] * Ur + Bit[n] * Ui;
                        gBrt[n] += xv * Ur;
                        gBit[n] += xv * Ui;
                        gr[o + n] = cr;                      /* dL/dh_{t-1} */
                        gi[o + n] = ci;
                        vr[o + n] = be * cr;                 /* dL/du_{t-1}, through beta_t a_t u_{t-1} */
                        vi[o + n] = be * ci;
                    }
                    gx[k * P + p] = dx;
                }
                memcpy(gar + k * N, gart, N * sizeof(float));
                memcpy(gai + k * N, gait, N * sizeof(float));
                memcpy(gBr + k * N, gBrt, N * sizeof(float));
                memcpy(gBi + k * N, gBit, N * sizeof(float));
                memcpy(gCr + k * N, gCrt, N * sizeof(float));
                memcpy(gCi + k * N, gCit, N * sizeof(float));
                ggamma[k] = dg;
                gbeta[k] = db;
            }
            memcpy(gh0r + s0, gr, S * sizeof(float));
            memcpy(gh0i + s0, gi, S * sizeof(float));
            memcpy(gu0r + s0, vr, S * sizeof(float));
            memcpy(gu0i + s0, vi, S * sizeof(float));
        }
    }
    free(st);
}
