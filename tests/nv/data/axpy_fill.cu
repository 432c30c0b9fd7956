__device__ int table[4] = {1,2,3,4};
__device__ int* table_ptr = table;
__constant__ float scale[2] = {2.0f, 3.0f};
extern "C" __global__ void axpy(float* out, const float* in, int n, float a) {
  __shared__ float tile[64];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x & 63] = in[i < n ? i : 0];
  __syncthreads();
  if (i < n) out[i] = a * tile[threadIdx.x & 63] * scale[i & 1] + table_ptr[i & 3];
}
extern "C" __global__ void fill(int* out, int v) { out[threadIdx.x] = v; }
