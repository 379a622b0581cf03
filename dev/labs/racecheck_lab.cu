// racecheck_lab.cu — does compute-sanitizer's racecheck follow an ordering made by an arrival at
// a named barrier (`bar.arrive`), as attention step 8 uses to hand a tile number from its
// producer warp to its consumers?
//
// One block of nine warps: warp 0 writes N numbers, one at a time, into one int of shared
// memory, and warps 1–8 read each, in one of three protocols:
//   0 `__syncthreads` after the write and after the reads;
//   1 two named barriers (`written`, `read`), every thread waiting at both (`bar.sync`);
//   2 step 8's: the writer arrives at `written` (`bar.arrive`) and waits at `read`; the readers
//     wait at `written` and arrive at `read`.
// Every protocol orders each write after the reads of the number before and before the reads of
// its own. Each reader sums what it read; every sum must be N(N − 1)/2. Run under racecheck, a
// report for protocol 2 and none for 0 and 1 says the tool does not follow arrivals.
//
// Usage: racecheck_lab PROTOCOL (0, 1 or 2); prints the protocol and whether every sum is right.
#include <cstdio>
#include <cstdlib>

constexpr int N = 64, READERS = 256, THREADS = 32 + READERS, WRITTEN = 1, READ = 2;

__device__ __forceinline__ void wait_at(int id) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(THREADS) : "memory");
}
__device__ __forceinline__ void arrive_at(int id) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "n"(THREADS) : "memory");
}

__global__ void hand_over(int protocol, int* sums) {
    __shared__ int slot;
    const int tid = threadIdx.x;
    if (tid < 32) {  // the writer warp; lane 0 writes
        for (int n = 0; n < N; ++n) {
            if (protocol == 0) {
                if (tid == 0) slot = n;
                __syncthreads();  // written
                __syncthreads();  // read
            } else {
                if (tid == 0) slot = n;
                if (protocol == 1) wait_at(WRITTEN); else arrive_at(WRITTEN);
                wait_at(READ);
            }
        }
        return;
    }
    int sum = 0;
    for (int n = 0; n < N; ++n) {
        if (protocol == 0) {
            __syncthreads();
            sum += slot;
            __syncthreads();
        } else {
            wait_at(WRITTEN);
            sum += slot;
            if (protocol == 1) wait_at(READ); else arrive_at(READ);
        }
    }
    sums[tid - 32] = sum;
}

int main(int argc, char** argv) {
    const int protocol = argc > 1 ? atoi(argv[1]) : 2;
    int* d = nullptr;
    cudaMalloc(&d, READERS * sizeof(int));
    hand_over<<<1, THREADS>>>(protocol, d);
    int h[READERS];
    const cudaError_t e = cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    int wrong = 0;
    for (int i = 0; i < READERS; ++i) wrong += h[i] != N * (N - 1) / 2;
    printf("protocol %d: %s, %d of %d sums wrong\n", protocol, cudaGetErrorString(e), wrong, READERS);
    cudaFree(d);
    return e != cudaSuccess || wrong != 0;
}
