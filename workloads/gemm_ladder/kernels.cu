// The hand-written rungs of the GEMM ladder: C[M,N] (fp32) = A[M,K] x B[K,N], A and B bf16 in row-major order,
// products accumulated in fp32. Compiled at run time by NVRTC (cupy.RawModule) for the GPU in use.
// run.py checks the shapes these kernels assume: M and N multiples of 128, K a multiple of 32.
#include <cuda_bf16.h>
#include <mma.h>

// Rung 1, naive: one thread per element of C, every operand read from global memory in the inner loop
// (two loads per multiply-add; L1 and L2 serve the reuse). Launch: block (32, 8), grid (N / 32, M / 8).
extern "C" __global__ void gemm_naive(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
                                      float* __restrict__ C, int M, int N, int K) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
        acc += __bfloat162float(A[(size_t)row * K + k]) * __bfloat162float(B[(size_t)k * N + col]);
    }
    C[(size_t)row * N + col] = acc;
}

// bf16 -> fp32 of the low and high half of a 32-bit word (bf16 is the top half of an fp32).
__device__ __forceinline__ float bf16_lo(unsigned int w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(unsigned int w) { return __uint_as_float(w & 0xffff0000u); }

// Rung 2, shared-memory tiled on CUDA cores: a block of 256 threads computes a 128 x 128 tile of C, staging
// 128 x 16 tiles of A (transposed) and 16 x 128 tiles of B in shared memory as fp32; each thread keeps an 8 x 8
// block of C in registers, so four 128-bit shared loads feed 64 FMAs. Two shared buffers: the next tiles are
// loaded into registers while the current ones are multiplied. Launch: block 256, grid (N / 128, M / 128).
extern "C" __global__ void __launch_bounds__(256, 2)
gemm_tiled(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B, float* __restrict__ C,
           int M, int N, int K) {
    __shared__ __align__(16) float As[2][16][128];  // As[k][m]
    __shared__ __align__(16) float Bs[2][16][128];  // Bs[k][n]
    const int t = threadIdx.x;
    const int m0 = blockIdx.y * 128, n0 = blockIdx.x * 128;
    // Each thread loads 8 consecutive bf16 (16 bytes) of the A tile and of the B tile per step.
    const int a_row = t >> 1, a_k = (t & 1) * 8;
    const int b_k = t >> 4, b_col = (t & 15) * 8;
    const __nv_bfloat16* a_ptr = A + (size_t)(m0 + a_row) * K + a_k;
    const __nv_bfloat16* b_ptr = B + (size_t)b_k * N + n0 + b_col;
    uint4 a_reg = *reinterpret_cast<const uint4*>(a_ptr);
    uint4 b_reg = *reinterpret_cast<const uint4*>(b_ptr);
    auto stage = [&](int buf) {
        const unsigned int aw[4] = {a_reg.x, a_reg.y, a_reg.z, a_reg.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            As[buf][a_k + 2 * i][a_row] = bf16_lo(aw[i]);
            As[buf][a_k + 2 * i + 1][a_row] = bf16_hi(aw[i]);
        }
        float4* b_dst = reinterpret_cast<float4*>(&Bs[buf][b_k][b_col]);
        b_dst[0] = make_float4(bf16_lo(b_reg.x), bf16_hi(b_reg.x), bf16_lo(b_reg.y), bf16_hi(b_reg.y));
        b_dst[1] = make_float4(bf16_lo(b_reg.z), bf16_hi(b_reg.z), bf16_lo(b_reg.w), bf16_hi(b_reg.w));
    };
    // This thread's 8 x 8 outputs: rows ty*4 + {0..3} and 64 + ty*4 + {0..3}, columns likewise with tx (the two
    // halves keep a quarter-warp's 128-bit shared loads on distinct banks).
    const int tx = t & 15, ty = t >> 4;
    float acc[8][8] = {};
    stage(0);
    __syncthreads();
    const int tiles = K / 16;
    for (int tile = 0; tile < tiles; ++tile) {
        const int buf = tile & 1;
        if (tile + 1 < tiles) {
            a_reg = *reinterpret_cast<const uint4*>(a_ptr + (size_t)(tile + 1) * 16);
            b_reg = *reinterpret_cast<const uint4*>(b_ptr + (size_t)(tile + 1) * 16 * N);
        }
#pragma unroll
        for (int k = 0; k < 16; ++k) {
            const float4 a0 = *reinterpret_cast<const float4*>(&As[buf][k][ty * 4]);
            const float4 a1 = *reinterpret_cast<const float4*>(&As[buf][k][64 + ty * 4]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[buf][k][tx * 4]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[buf][k][64 + tx * 4]);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; ++i) {
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] += a[i] * b[j];
            }
        }
        if (tile + 1 < tiles) stage(buf ^ 1);
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int row = m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);
        float* dst = C + (size_t)row * N + n0;
        *reinterpret_cast<float4*>(dst + tx * 4) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
        *reinterpret_cast<float4*>(dst + 64 + tx * 4) = make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
    }
}

// Rung 3, tensor cores through WMMA (the portable warp-level API, mma.sync underneath): a block of 8 warps
// computes a 128 x 128 tile of C, each warp a 64 x 32 part as 4 x 2 fragments of 16 x 16 with fp32 accumulators.
// 128 x 32 tiles of A and 32 x 128 tiles of B are staged in shared memory (rows padded by 8 elements), double
// buffered through registers as in rung 2. No Hopper-only instructions (wgmma, TMA): that is what cuBLAS adds.
// Launch: block 256, grid (N / 128, M / 128).
namespace wmma = nvcuda::wmma;
constexpr int WM_LDA = 40;   // 32 + 8 bf16 per staged row of A
constexpr int WM_LDB = 136;  // 128 + 8 bf16 per staged row of B

extern "C" __global__ void __launch_bounds__(256, 2)
gemm_wmma(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B, float* __restrict__ C,
          int M, int N, int K) {
    __shared__ __align__(32) __nv_bfloat16 As[2][128 * WM_LDA];
    __shared__ __align__(32) __nv_bfloat16 Bs[2][32 * WM_LDB];
    const int t = threadIdx.x;
    const int m0 = blockIdx.y * 128, n0 = blockIdx.x * 128;
    // Each thread loads two 16-byte pieces of the A tile (rows a_row and a_row + 64) and two of the B tile
    // (rows b_row and b_row + 16) per step.
    const int a_row = t >> 2, a_col = (t & 3) * 8;
    const int b_row = t >> 4, b_col = (t & 15) * 8;
    const __nv_bfloat16* a_ptr = A + (size_t)(m0 + a_row) * K + a_col;
    const __nv_bfloat16* b_ptr = B + (size_t)b_row * N + n0 + b_col;
    const size_t a_half = (size_t)64 * K, b_half = (size_t)16 * N;
    uint4 ra0 = *reinterpret_cast<const uint4*>(a_ptr);
    uint4 ra1 = *reinterpret_cast<const uint4*>(a_ptr + a_half);
    uint4 rb0 = *reinterpret_cast<const uint4*>(b_ptr);
    uint4 rb1 = *reinterpret_cast<const uint4*>(b_ptr + b_half);
    auto stage = [&](int buf) {
        *reinterpret_cast<uint4*>(&As[buf][a_row * WM_LDA + a_col]) = ra0;
        *reinterpret_cast<uint4*>(&As[buf][(a_row + 64) * WM_LDA + a_col]) = ra1;
        *reinterpret_cast<uint4*>(&Bs[buf][b_row * WM_LDB + b_col]) = rb0;
        *reinterpret_cast<uint4*>(&Bs[buf][(b_row + 16) * WM_LDB + b_col]) = rb1;
    };
    const int warp = t >> 5, wm = warp >> 2, wn = warp & 3;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4][2];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
    }
    stage(0);
    __syncthreads();
    const int tiles = K / 32;
    for (int tile = 0; tile < tiles; ++tile) {
        const int buf = tile & 1;
        if (tile + 1 < tiles) {
            const size_t a_next = (size_t)(tile + 1) * 32, b_next = (size_t)(tile + 1) * 32 * N;
            ra0 = *reinterpret_cast<const uint4*>(a_ptr + a_next);
            ra1 = *reinterpret_cast<const uint4*>(a_ptr + a_half + a_next);
            rb0 = *reinterpret_cast<const uint4*>(b_ptr + b_next);
            rb1 = *reinterpret_cast<const uint4*>(b_ptr + b_half + b_next);
        }
#pragma unroll
        for (int kk = 0; kk < 32; kk += 16) {
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> b[2];
#pragma unroll
            for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b[j], &Bs[buf][kk * WM_LDB + wn * 32 + j * 16], WM_LDB);
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
                wmma::load_matrix_sync(a, &As[buf][(wm * 64 + i * 16) * WM_LDA + kk], WM_LDA);
#pragma unroll
                for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a, b[j], acc[i][j]);
            }
        }
        if (tile + 1 < tiles) stage(buf ^ 1);
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            float* dst = C + (size_t)(m0 + wm * 64 + i * 16) * N + n0 + wn * 32 + j * 16;
            wmma::store_matrix_sync(dst, acc[i][j], N, wmma::mem_row_major);
        }
    }
}
