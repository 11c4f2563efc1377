#include "cuda/tma.h"

#include <cudaTypedefs.h>

#include <string>

#include "cuda/common.h"

namespace kiln::cuda_backend {

namespace {

PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    KILN_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found));
    KILN_CHECK(found == cudaDriverEntryPointSuccess && p != nullptr,
               "the CUDA driver has no cuTensorMapEncodeTiled (query result ", static_cast<int>(found), ")");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

}  // namespace

bool tensor_map_fits(const void* base, int rank, const uint64_t* strides) {
  if ((reinterpret_cast<uintptr_t>(base) & 15) != 0) return false;
  for (int i = 0; i + 1 < rank; ++i)
    if (strides[i] % 16 != 0 || strides[i] >= (uint64_t{1} << 40)) return false;
  return true;
}

CUtensorMap tensor_map(DType dtype, int rank, const void* base, const uint64_t* dims, const uint64_t* strides,
                       const uint32_t* box) {
  KILN_CHECK(rank >= 2 && rank <= 3, "tensor map: rank ", rank, " (2 or 3 supported)");
  KILN_CHECK(tensor_map_fits(base, rank, strides), "tensor map: base or a stride not a multiple of 16 bytes (stride 1 = ",
             strides[0], " bytes)");
  CUtensorMapDataType type;
  switch (dtype) {
    case DType::BFloat16: type = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16; break;
    case DType::Float16: type = CU_TENSOR_MAP_DATA_TYPE_FLOAT16; break;
    case DType::Float8_e4m3fn: type = CU_TENSOR_MAP_DATA_TYPE_UINT8; break;
    default: KILN_CHECK(false, "tensor map: dtype ", dtype, " (bfloat16, float16, float8_e4m3fn supported)");
  }
  const uint64_t bytes = itemsize(dtype);
  KILN_CHECK(box[0] * bytes % 16 == 0 && box[0] <= 256, "tensor map: inner box of ", box[0], " elements");
  CUtensorMap map;
  const cuuint32_t ones[3] = {1, 1, 1};
  const CUresult r = encode_tiled()(&map, type,
                                    static_cast<cuuint32_t>(rank), const_cast<void*>(base), dims, strides, box, ones,
                                    CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  KILN_CHECK(r == CUDA_SUCCESS, "cuTensorMapEncodeTiled failed with CUresult ", static_cast<int>(r), " (dims ", dims[0],
             " x ", dims[1], ", box ", box[0], " x ", box[1], ")");
  return map;
}

}  // namespace kiln::cuda_backend
