// CUDA runtime glue: errors, device guard, streams and events behind
// core/cuda_hooks.h, host<->device byte copies.
#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "core/backend.h"
#include "core/cuda_hooks.h"
#include "core/env.h"
#include "cuda/common.h"
#include "kiln/stream.h"

namespace kiln::cuda_backend {

void throw_cuda_error(cudaError_t err, const char* what, const char* file, int line) {
  throw Error(detail::format("CUDA error ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ") in ", what,
                             " at ", file, ":", line));
}

int current_device() {
  int d = 0;
  KILN_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

cudaStream_t current_stream() {
  return static_cast<cudaStream_t>(Stream::current(Device(DeviceType::CUDA, current_device())).native());
}

namespace {
// One attribute per device, read once.
struct DeviceAttributes {
  int sms = 1, arch = 0;  // arch: compute capability as 10 * major + minor
};
const DeviceAttributes& device_attributes() {
  static std::once_flag once;
  static std::vector<DeviceAttributes> attrs;
  std::call_once(once, [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
    attrs.resize(n);
    for (int i = 0; i < n; ++i) {
      int major = 0, minor = 0;
      cudaDeviceGetAttribute(&attrs[i].sms, cudaDevAttrMultiProcessorCount, i);
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, i);
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, i);
      attrs[i].arch = major * 10 + minor;
    }
  });
  static const DeviceAttributes none;
  const int d = current_device();
  return d < static_cast<int>(attrs.size()) ? attrs[d] : none;
}
}  // namespace

int sm_count() { return device_attributes().sms; }
int device_arch() { return device_attributes().arch; }

int resident_blocks(const void* kernel, int threads, size_t dynamic_smem) {
  static std::mutex mu;
  static std::map<std::tuple<int, const void*, int, size_t>, int> cache;
  const auto key = std::make_tuple(current_device(), kernel, threads, dynamic_smem);
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  int per_sm = 0;
  KILN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, dynamic_smem));
  return cache[key] = std::max(1, per_sm) * sm_count();
}

void allow_dynamic_smem(const void* kernel, size_t bytes) {
  static std::mutex mu;
  static std::map<std::pair<int, const void*>, size_t> allowed;
  const auto key = std::make_pair(current_device(), kernel);
  std::lock_guard<std::mutex> lock(mu);
  size_t& have = allowed[key];
  if (have >= bytes) return;
  KILN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  have = bytes;
}

bool chained_launch_enabled() {
  static const bool on = env_switch_on("KILN_CHAINED_LAUNCH");
  return on;
}

DeviceGuard::DeviceGuard(int index) {
  KILN_CHECK(cuda::is_available(), "CUDA is not available: ", cuda::availability().reason);
  KILN_CHECK(index >= 0 && index < cuda::device_count(), "device cuda:", index, " does not exist (",
             cuda::device_count(), " CUDA devices)");
  KILN_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != index) KILN_CUDA_CHECK(cudaSetDevice(index));
}
DeviceGuard::~DeviceGuard() {
  int now = -1;
  if (previous_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
}

void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t nbytes) {
  if (nbytes == 0) return;
  const cudaMemcpyKind kind = dst_dev.is_cuda() ? (src_dev.is_cuda() ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                                                : cudaMemcpyDeviceToHost;
  cudaStream_t s = current_stream();
  if (kind == cudaMemcpyDeviceToDevice && dst_dev != src_dev) {
    KILN_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_dev.index, src, src_dev.index, nbytes, s));
  } else {
    KILN_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, kind, s));
  }
  // The host reads (D2H) or may free (H2D) its buffer right after: wait.
  if (kind != cudaMemcpyDeviceToDevice) KILN_CUDA_CHECK(cudaStreamSynchronize(s));
}

int32_t* host_flag() {
  struct Word {
    int32_t* p = nullptr;
    ~Word() {
      if (p) cudaFreeHost(p);  // at thread exit; an error (the runtime already gone) is moot
    }
  };
  thread_local Word word;
  if (!word.p) {
    void* p = nullptr;
    // portable: any device may write it; with unified addressing its host address is the device's
    KILN_CUDA_CHECK(cudaHostAlloc(&p, sizeof(int32_t), cudaHostAllocMapped | cudaHostAllocPortable));
    word.p = static_cast<int32_t*>(p);
  }
  return word.p;
}

// ---- streams and events ----
void* stream_create(int device, int priority) {
  DeviceGuard g(device);
  int lo = 0, hi = 0;
  KILN_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  const int p = std::max(hi, std::min(lo, priority));
  cudaStream_t s;
  KILN_CUDA_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, p));
  return s;
}
void stream_destroy(int device, void* stream) {
  int prev = -1;
  cudaGetDevice(&prev);
  cudaSetDevice(device);
  cudaStreamDestroy(static_cast<cudaStream_t>(stream));
  if (prev >= 0) cudaSetDevice(prev);
}
void stream_synchronize(int device, void* stream) {
  DeviceGuard g(device);
  KILN_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
}
bool stream_query(int device, void* stream) {
  DeviceGuard g(device);
  const cudaError_t e = cudaStreamQuery(static_cast<cudaStream_t>(stream));
  if (e == cudaErrorNotReady) return false;
  KILN_CUDA_CHECK(e);
  return true;
}
void stream_wait_event(int device, void* stream, void* event) {
  DeviceGuard g(device);
  KILN_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event), 0));
}
void* event_create(int device, bool timing) {
  DeviceGuard g(device);
  cudaEvent_t e;
  KILN_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
  return e;
}
void event_destroy(int device, void* event) { cudaEventDestroy(static_cast<cudaEvent_t>(event)); }
void event_record(int device, void* event, void* stream) {
  DeviceGuard g(device);
  KILN_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)));
}
void event_synchronize(void* event) { KILN_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event))); }
bool event_query(void* event) {
  const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(event));
  if (e == cudaErrorNotReady) return false;
  KILN_CUDA_CHECK(e);
  return true;
}
float event_elapsed_ms(void* start, void* end) {
  float ms = 0;
  KILN_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)));
  return ms;
}

// ---- graphs ----
void graph_capture_begin(int device, void* stream) {
  DeviceGuard g(device);
  // relaxed: the caching allocator may cudaMalloc while the capture runs
  KILN_CUDA_CHECK(cudaStreamBeginCapture(static_cast<cudaStream_t>(stream), cudaStreamCaptureModeRelaxed));
}
void* graph_capture_end(int device, void* stream) {
  DeviceGuard g(device);
  cudaGraph_t graph = nullptr;
  KILN_CUDA_CHECK(cudaStreamEndCapture(static_cast<cudaStream_t>(stream), &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  KILN_CUDA_CHECK(err);
  return exec;
}
void graph_launch(int device, void* exec, void* stream) {
  DeviceGuard g(device);
  KILN_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), static_cast<cudaStream_t>(stream)));
}
void graph_destroy(int device, void* exec) {
  DeviceGuard g(device);
  cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec));
}

}  // namespace kiln::cuda_backend
