// Linked instead of src/cuda/ when kiln is built without CUDA: every CUDA entry
// point reports that, so a CPU-only build still links and says why.
#include "core/allocator.h"
#include "core/backend.h"
#include "core/check.h"
#include "core/cuda_hooks.h"

namespace kiln {

namespace {
[[noreturn]] void no_cuda(const char* what) {
  throw Error(std::string(what) + ": kiln was built without CUDA support (rebuild with a CUDA toolkit and "
              "-DKILN_CUDA=ON)");
}
}  // namespace

namespace cuda {
bool built_with_cuda() { return false; }
const Availability& availability() {
  static const Availability a{false, "kiln was built without CUDA support", 0, 0, 0};
  return a;
}
bool is_available() { return false; }
int device_count() { return 0; }
DeviceProperties get_device_properties(int) { no_cuda("get_device_properties"); }
int min_compute_capability() { return 0; }
void synchronize(int) { no_cuda("cuda::synchronize"); }
}  // namespace cuda

namespace cuda_backend {
DeviceGuard::DeviceGuard(int) { no_cuda("cuda device"); }
DeviceGuard::~DeviceGuard() = default;
void copy(const Tensor&, const Tensor&, bool) { no_cuda("copy"); }
void fill(const Tensor&, const Scalar&) { no_cuda("fill_"); }
void unary(UnaryOp op, const Tensor&, const Tensor&) { no_cuda(op_name(op)); }
void binary(BinaryOp op, const Tensor&, const Tensor&, const Tensor&, double) { no_cuda(op_name(op)); }
void compare(CompareOp op, const Tensor&, const Tensor&, const Tensor&) { no_cuda(op_name(op)); }
void where(const Tensor&, const Tensor&, const Tensor&, const Tensor&) { no_cuda("where"); }
void reduce(const ReduceArgs& a) { no_cuda(op_name(a.op)); }
void arange(const Tensor&, const Scalar&, const Scalar&) { no_cuda("arange"); }
void random(RandomKind, const Tensor&, double, double, uint64_t, uint64_t) { no_cuda("random"); }
void matmul(const Tensor&, const Tensor&, const Tensor&) { no_cuda("matmul"); }
void linear_rows(const LinearArgs&) { no_cuda("linear"); }
void softmax_rows(const Tensor&, const Tensor&, bool) { no_cuda("softmax"); }
void topk_rows(const Tensor&, const Tensor&, const Tensor&, bool) { no_cuda("topk"); }
void scaled_mm(const ScaledMmArgs&) { no_cuda("scaled_mm"); }
void grouped_mm(const GroupedMmArgs&) { no_cuda("grouped_mm"); }
void index_select_rows(const Tensor&, const Tensor&, const Tensor&) { no_cuda("index_select"); }
void moe_route(const MoeRouteArgs&) { no_cuda("moe_route"); }
void moe_combine(const Tensor&, const Tensor&, const Tensor&, const Tensor&) { no_cuda("moe_combine"); }
void attention_decode(const AttentionDecodeArgs&) { no_cuda("scaled_dot_product_attention"); }
void attention_prefill(const AttentionPrefillArgs&) { no_cuda("scaled_dot_product_attention"); }
void rms_norm_rows(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, float) { no_cuda("rms_norm"); }
void rms_norm_combine_rows(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                           const Tensor&, float) {
  no_cuda("moe_combine_rms_norm_residual");
}
void silu_and_mul_rows(const Tensor&, const Tensor&) { no_cuda("silu_and_mul"); }
void layer_norm_rows(const Tensor&, const Tensor&, const Tensor&, const Tensor&, float) { no_cuda("layer_norm"); }
void sample_rows(const Tensor&, const Tensor&, const Tensor&, int64_t, float) { no_cuda("sample"); }
void rotary(const Tensor&, const Tensor&, const Tensor&, const Tensor&, bool) { no_cuda("apply_rotary"); }
void qkv_rotary_cache(const QkvRotaryCacheArgs&) { no_cuda("qkv_rotary_cache"); }
void copy_bytes(void*, Device, const void*, Device, size_t) { no_cuda("copy to/from cuda"); }
int32_t* host_flag() { no_cuda("host_flag"); }
std::shared_ptr<Storage> allocate(size_t, int) { no_cuda("cuda allocation"); }
void record_stream(void*, const Stream&) { no_cuda("record_stream"); }
MemoryStats memory_stats(int) { no_cuda("memory_stats"); }
void reset_peak_memory_stats(int) { no_cuda("reset_peak_memory_stats"); }
void empty_cache(int) {}
void* stream_create(int, int) { no_cuda("Stream::create"); }
void stream_destroy(int, void*) {}
void stream_synchronize(int, void*) { no_cuda("Stream::synchronize"); }
bool stream_query(int, void*) { no_cuda("Stream::query"); }
void stream_wait_event(int, void*, void*) { no_cuda("Stream::wait"); }
void* event_create(int, bool) { no_cuda("Event"); }
void event_destroy(int, void*) {}
void event_record(int, void*, void*) { no_cuda("Event::record"); }
void event_synchronize(void*) { no_cuda("Event::synchronize"); }
bool event_query(void*) { no_cuda("Event::query"); }
float event_elapsed_ms(void*, void*) { no_cuda("Event::elapsed_time"); }
void graph_capture_begin(int, void*) { no_cuda("CudaGraph"); }
void* graph_capture_end(int, void*) { no_cuda("CudaGraph"); }
void graph_launch(int, void*, void*) { no_cuda("CudaGraph"); }
void graph_destroy(int, void*) {}
void set_stream_reserved(int, void*, bool) {}
}  // namespace cuda_backend

}  // namespace kiln
