#include "kiln/stream.h"

#include <map>

#include "core/check.h"
#include "core/allocator.h"
#include "core/cuda_hooks.h"

namespace kiln {
namespace {
// Current stream per CUDA device for this thread; absent = the default stream.
thread_local std::map<int, Stream>* tl_current = nullptr;
std::map<int, Stream>& current_map() {
  if (!tl_current) tl_current = new std::map<int, Stream>();  // lives as long as the thread
  return *tl_current;
}
void check_cuda_device(const char* op, Device d) {
  KILN_CHECK(d.is_cuda() || d.is_cpu(), op, ": bad device");
  if (d.is_cuda()) KILN_CHECK(cuda::is_available(), op, ": CUDA is not available: ", cuda::availability().reason);
  if (d.is_cuda())
    KILN_CHECK(d.index >= 0 && d.index < cuda::device_count(), op, ": device ", d.str(), " does not exist (",
               cuda::device_count(), " CUDA devices)");
}
}  // namespace

Stream Stream::default_stream(Device device) { return Stream(device, nullptr, nullptr); }

Stream Stream::current(Device device) {
  if (device.is_cpu()) return default_stream(device);
  auto& m = current_map();
  auto it = m.find(device.index);
  return it == m.end() ? default_stream(device) : it->second;
}

Stream Stream::create(Device device, int priority) {
  if (device.is_cpu()) return default_stream(device);
  check_cuda_device("Stream::create", device);
  void* h = cuda_backend::stream_create(device.index, priority);
  const int dev = device.index;
  std::shared_ptr<void> owner(h, [dev](void* p) { cuda_backend::stream_destroy(dev, p); });
  return Stream(device, h, owner);
}

Stream Stream::from_handle(Device device, uintptr_t handle) {
  return Stream(device, reinterpret_cast<void*>(handle), nullptr);
}

void Stream::synchronize() const {
  if (device_.is_cuda()) cuda_backend::stream_synchronize(device_.index, handle_);
}

bool Stream::query() const { return device_.is_cpu() || cuda_backend::stream_query(device_.index, handle_); }

void Stream::wait(const Event& event) const {
  if (device_.is_cpu()) {
    event.synchronize();
    return;
  }
  if (event.device().is_cuda() && event.native()) cuda_backend::stream_wait_event(device_.index, handle_, event.native());
}

void Stream::wait(const Stream& other) const {
  if (other == *this || other.device().is_cpu()) return;
  Event e(other.device(), false);
  e.record(other);
  wait(e);
}

StreamGuard::StreamGuard(const Stream& stream) : previous_(Stream::current(stream.device())) {
  if (stream.device().is_cuda()) current_map().insert_or_assign(stream.device().index, stream);
}

StreamGuard::~StreamGuard() {
  if (previous_.device().is_cuda()) current_map().insert_or_assign(previous_.device().index, previous_);
}

Event::Event(Device device, bool enable_timing) : device_(device), timing_(enable_timing) {
  if (device.is_cuda()) {
    check_cuda_device("Event", device);
    handle_ = cuda_backend::event_create(device.index, enable_timing);
  }
}

Event::~Event() {
  if (handle_) cuda_backend::event_destroy(device_.index, handle_);
}

Event::Event(Event&& o) noexcept
    : device_(o.device_), handle_(o.handle_), timing_(o.timing_), recorded_(o.recorded_) {
  o.handle_ = nullptr;
}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    if (handle_) cuda_backend::event_destroy(device_.index, handle_);
    device_ = o.device_;
    handle_ = o.handle_;
    timing_ = o.timing_;
    recorded_ = o.recorded_;
    o.handle_ = nullptr;
  }
  return *this;
}

void Event::record(const Stream& stream) {
  KILN_CHECK(stream.device() == device_, "Event::record: event is on ", device_.str(), " but the stream is on ",
             stream.device().str());
  if (handle_) cuda_backend::event_record(device_.index, handle_, stream.native());
  recorded_ = true;
}

void Event::record() { record(Stream::current(device_)); }

void Event::synchronize() const {
  if (handle_ && recorded_) cuda_backend::event_synchronize(handle_);
}

bool Event::query() const { return !handle_ || !recorded_ || cuda_backend::event_query(handle_); }

float Event::elapsed_time(const Event& end) const {
  KILN_CHECK(device_.is_cuda() && end.device_.is_cuda(), "Event::elapsed_time: needs CUDA events");
  KILN_CHECK(timing_ && end.timing_, "Event::elapsed_time: both events need enable_timing=true");
  KILN_CHECK(recorded_ && end.recorded_, "Event::elapsed_time: both events must be recorded first");
  return cuda_backend::event_elapsed_ms(handle_, end.handle_);
}

CudaGraph::CudaGraph(const Stream& capture_stream) : stream_(capture_stream) {
  KILN_CHECK(stream_.device().is_cuda() && stream_.native() != nullptr,
             "CudaGraph: the capture stream must be a CUDA stream of its own (Stream::create), got ",
             stream_.device().str(), stream_.native() ? "" : "'s default stream");
}

CudaGraph::~CudaGraph() {
  guard_.reset();
  if (exec_) {
    cuda_backend::graph_destroy(stream_.device().index, exec_);
    cuda_backend::set_stream_reserved(stream_.device().index, stream_.native(), false);
  }
}

void CudaGraph::capture_begin() {
  KILN_CHECK(!exec_ && !guard_, "CudaGraph: already captured or capturing");
  cuda_backend::set_stream_reserved(stream_.device().index, stream_.native(), true);
  guard_ = std::make_unique<StreamGuard>(stream_);
  cuda_backend::graph_capture_begin(stream_.device().index, stream_.native());
}

void CudaGraph::capture_end() {
  KILN_CHECK(guard_ != nullptr, "CudaGraph: capture_end without capture_begin");
  void* exec = nullptr;
  try {
    exec = cuda_backend::graph_capture_end(stream_.device().index, stream_.native());
  } catch (...) {
    guard_.reset();
    cuda_backend::set_stream_reserved(stream_.device().index, stream_.native(), false);
    throw;
  }
  guard_.reset();
  exec_ = exec;
}

void CudaGraph::replay(const Stream& stream) const {
  KILN_CHECK(exec_ != nullptr, "CudaGraph: replay before capture_end");
  KILN_CHECK(stream.device() == stream_.device(), "CudaGraph: captured on ", stream_.device().str(),
             ", replayed on ", stream.device().str());
  cuda_backend::graph_launch(stream_.device().index, exec_, stream.native());
}

}  // namespace kiln
