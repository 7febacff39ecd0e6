/* Mamba's selective scan on the CPU, forward and backward, float32, one thread.
 *
 *   a_t = exp(Delta_t A)  (Mamba)   or   2 exp(Delta_t A) - 1  (Negative Mamba)
 *   h_t = a_t * h_{t-1} + (Delta_t u_t) B_t          y_t = C_t h_t
 *
 * Each (b, e) pair runs its own time loop with its N-vector of state in registers (N <= NMAX): the
 * transition, the update and the readout of a step are one pass over N numbers, and the only
 * (B, T, E, N) tensor is the state sequence kept for the backward pass (laid out (B, E, T, N), so
 * each pair reads and writes one contiguous stream). The backward pass runs the reverse recurrence
 * of the state gradient g_t = C_t gy_t + a_{t+1} g_{t+1} the same way, recomputes a_t, and reduces
 * every gradient step by step (no (B, T, E, N) tensor written). exp2 is a polynomial that the
 * compiler vectorises (relative error below 1e-7 in float32 over [0, 1)), so the file needs no vector maths library.
 *
 * Layouts (contiguous, float32): dt, xu, gy, y, gxu, gdt (B, T, E); Bm, Cm, gB, gC (B, T, N);
 * A2 = A log2(e) and A (E, N); h0, hT, gh0 (B, E, N); H (B, E, T, N); Q (B, E, N).
 * Python side: statetrack.ops.cpu_kernels (build and load), statetrack.ops.mamba.scan (autograd).
 */
#include <stdint.h>
#include <string.h>

#define NMAX 64

static inline float exp2_poly(float x) {
    /* 2^x = 2^i 2^f, i = floor(x), f in [0, 1): 2^f by a degree-6 polynomial fitted for relative error */
    x = x < -126.0f ? -126.0f : (x > 126.0f ? 126.0f : x);
    float fi = __builtin_floorf(x);
    float f = x - fi;
    float p = 2.1702133e-4f;
    p = p * f + 1.2439678e-3f;
    p = p * f + 9.6788481e-3f;
    p = p * f + 5.5483334e-2f;
    p = p * f + 2.4022985e-1f;
    p = p * f + 6.9314700e-1f;
    p = p * f + 1.0f;
    int32_t bits = ((int32_t)fi + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* One step of a (b, e) pair: a_t from Delta_t (d), h <- a_t h + x B_t, and the readout C_t h. */
static inline float pair_step(int64_t N, float off, float d, float x, const float *a2, const float *Bt,
                              const float *Ct, float *h) {
    float a[NMAX];
    for (int64_t n = 0; n < N; n++) a[n] = exp2_poly(d * a2[n] + off) - off;
    float acc = 0.0f;
    for (int64_t n = 0; n < N; n++) {
        h[n] = a[n] * h[n] + x * Bt[n];
        acc += h[n] * Ct[n];
    }
    return acc;
}

/* Keep v rounded as it stands: the compiler may not fuse the product that made it into a later sum. */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define ROUNDED(v) __asm__("" : "+x"(v))
#elif defined(__GNUC__) && defined(__aarch64__)
#define ROUNDED(v) __asm__("" : "+w"(v))
#else
#define ROUNDED(v) do { volatile float rounded_ = (v); (v) = rounded_; } while (0)
#endif

/* The forward over every (b, e) pair, specialised for its two callers (gated is a constant in each):
 * gated = 0: y_t = C_t h_t with x_t = v_t = Delta_t u_t formed by the caller, the states kept in H where
 * given; gated = 1: y_t = (C_t h_t + D u_t) g_t with v_t = u_t and x_t = Delta_t u_t formed here, each
 * product and sum of it rounded on its own. B_t and C_t rows bc apart. */
static inline __attribute__((always_inline)) void forward(
    int gated, int64_t B, int64_t T, int64_t E, int64_t N, int neg, const float *dt, const float *A2,
    const float *v, const float *Bm, const float *Cm, int64_t bc, const float *D, const float *g,
    const float *h0, float *H, float *y, float *hT) {
    const float off = neg ? 1.0f : 0.0f;
    for (int64_t b = 0; b < B; b++) {
        for (int64_t e = 0; e < E; e++) {
            float h[NMAX], a2[NMAX];
            memcpy(h, h0 + (b * E + e) * N, N * sizeof(float));
            memcpy(a2, A2 + e * N, N * sizeof(float));
            float *Hbe = H ? H + (b * E + e) * T * N : 0;
            for (int64_t t = 0; t < T; t++) {
                const int64_t i = (b * T + t) * E + e;
                const float *Bt = Bm + (b * T + t) * bc, *Ct = Cm + (b * T + t) * bc;
                if (!gated) {
                    y[i] = pair_step(N, off, dt[i], v[i], a2, Bt, Ct, h);
                    if (Hbe) memcpy(Hbe + t * N, h, N * sizeof(float));
                    continue;
                }
                float x = dt[i] * v[i];
                ROUNDED(x);
                const float acc = pair_step(N, off, dt[i], x, a2, Bt, Ct, h);
                float skip = D[e] * v[i];
                ROUNDED(skip);
                float sum = acc + skip;
                ROUNDED(sum);
                y[i] = sum * g[i];
            }
            memcpy(hT + (b * E + e) * N, h, N * sizeof(float));
        }
    }
}

void statetrack_mamba_fwd(int64_t B, int64_t T, int64_t E, int64_t N, int neg,
                          const float *dt, const float *A2, const float *xu, const float *Bm,
                          const float *Cm, const float *h0, float *H, float *y, float *hT) {
    forward(0, B, T, E, N, neg, dt, A2, xu, Bm, Cm, N, 0, 0, h0, H, y, hT);
}

void statetrack_mamba_bwd(int64_t B, int64_t T, int64_t E, int64_t N, int neg,
                          const float *dt, const float *A, const float *A2, const float *xu,
                          const float *Bm, const float *Cm, const float *h0, const float *H,
                          const float *gy, const float *ghT,
                          float *gdt, float *gxu, float *gB, float *gC, float *Q, float *gh0) {
    const float off = neg ? 1.0f : 0.0f;
    memset(gB, 0, B * T * N * sizeof(float));
    memset(gC, 0, B * T * N * sizeof(float));
    for (int64_t b = 0; b < B; b++) {
        for (int64_t e = 0; e < E; e++) {
            float g[NMAX], an[NMAX], ar[NMAX], a2[NMAX], q[NMAX], ee[NMAX];
            const float *Hbe = H + (b * E + e) * T * N, *h0be = h0 + (b * E + e) * N;
            memcpy(ar, A + e * N, N * sizeof(float));
            memcpy(a2, A2 + e * N, N * sizeof(float));
            if (ghT) memcpy(g, ghT + (b * E + e) * N, N * sizeof(float));
            else memset(g, 0, N * sizeof(float));
            for (int64_t n = 0; n < N; n++) { an[n] = 1.0f; q[n] = 0.0f; }
            for (int64_t t = T - 1; t >= 0; t--) {
                const int64_t i = (b * T + t) * E + e;
                const float d = dt[i], x = xu[i], gyv = gy[i];
                const float *Bt = Bm + (b * T + t) * N, *Ct = Cm + (b * T + t) * N;
                const float *ht = Hbe + t * N, *hp = t ? Hbe + (t - 1) * N : h0be;
                float *gBt = gB + (b * T + t) * N, *gCt = gC + (b * T + t) * N;
                for (int64_t n = 0; n < N; n++) ee[n] = exp2_poly(d * a2[n] + off);
                float gd = 0.0f, gx = 0.0f;
                for (int64_t n = 0; n < N; n++) {
                    g[n] = gyv * Ct[n] + an[n] * g[n];
                    const float P = g[n] * hp[n] * ee[n];  /* dL/d(Delta_t A) */
                    gd += P * ar[n];
                    q[n] += P * d;
                    gx += g[n] * Bt[n];
                    gBt[n] += x * g[n];
                    gCt[n] += gyv * ht[n];
                    an[n] = ee[n] - off;
                }
                gdt[i] = gd;
                gxu[i] = gx;
            }
            for (int64_t n = 0; n < N; n++) {
                gh0[(b * E + e) * N + n] = an[n] * g[n];
                Q[(b * E + e) * N + n] = q[n];
            }
        }
    }
}

/* Evaluation (no states kept): the forward above with Delta_t u_t formed here, B_t and C_t read in place
 * from the rows of the projection that made them (row stride bc), and the layer's skip term and gate
 * applied to the readout:
 *
 *   out_t = (C_t h_t + D u_t) * g_t            (g = silu(z), the layer's gate)
 *
 * in the arithmetic of the PyTorch ops it replaces (Delta u, D u, the sum and the gate each rounded on
 * its own), so that evaluation gives the numbers it gave before; ops.mamba checks that once per process.
 * Layouts: dt, u, g, out (B, T, E) contiguous; Bm, Cm (B, T, N) with strides (T bc, bc, 1); D (E). */
void statetrack_mamba_fwd_gated(int64_t B, int64_t T, int64_t E, int64_t N, int neg,
                                const float *dt, const float *A2, const float *u, const float *Bm,
                                const float *Cm, int64_t bc, const float *D, const float *g,
                                const float *h0, float *out, float *hT) {
    forward(1, B, T, E, N, neg, dt, A2, u, Bm, Cm, bc, D, g, h0, 0, out, hT);
}
