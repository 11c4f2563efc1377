// Streams and events. Every device has a current stream per thread; kernels
// are launched on it. On the CPU, streams are a no-op (work is synchronous).
#pragma once

#include <cstdint>
#include <memory>

#include "kiln/device.h"

namespace kiln {

class Event;

class Stream {
 public:
  // The device's default stream (CUDA's legacy default stream).
  static Stream default_stream(Device device);
  // The current stream of `device` for the calling thread.
  static Stream current(Device device);
  // A new non-blocking stream on `device` (priority 0 = normal, < 0 = higher).
  static Stream create(Device device, int priority = 0);

  Device device() const { return device_; }
  // cudaStream_t as an integer (0 = legacy default stream).
  uintptr_t handle() const { return reinterpret_cast<uintptr_t>(handle_); }
  void* native() const { return handle_; }

  void synchronize() const;
  // True when all work queued so far has finished.
  bool query() const;
  // Work queued on this stream after the call waits for `event`.
  void wait(const Event& event) const;
  // Work queued on this stream after the call waits for everything queued on `other` so far.
  void wait(const Stream& other) const;

  bool operator==(const Stream& o) const { return device_ == o.device_ && handle_ == o.handle_; }
  bool operator!=(const Stream& o) const { return !(*this == o); }

  // Wraps an existing cudaStream_t (not owned), e.g. one a DLPack consumer names.
  static Stream from_handle(Device device, uintptr_t handle);

 private:
  Stream(Device d, void* h, std::shared_ptr<void> owner) : device_(d), handle_(h), owner_(std::move(owner)) {}
  Device device_;
  void* handle_ = nullptr;
  std::shared_ptr<void> owner_;  // keeps a created stream alive while copies exist
  friend class StreamGuard;
};

// Makes `stream` the current stream of its device for this thread until destroyed.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_;
};

class Event {
 public:
  // enable_timing=true allows elapsed_time.
  explicit Event(Device device, bool enable_timing = true);
  ~Event();
  Event(Event&&) noexcept;
  Event& operator=(Event&&) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(const Stream& stream);
  void record();  // on the current stream of the event's device
  void synchronize() const;
  bool query() const;
  // Milliseconds from this event to `end`; both recorded and complete.
  float elapsed_time(const Event& end) const;
  void* native() const { return handle_; }
  Device device() const { return device_; }

 private:
  Device device_;
  void* handle_ = nullptr;
  bool timing_ = true;
  bool recorded_ = false;
};

// A CUDA graph: the work queued on a capture stream between capture_begin and
// capture_end, replayed by one launch. Memory that the captured ops allocate
// comes from the capture stream's cache and stays reserved for the graph while
// it lives (empty_cache leaves it), so replays find their buffers intact: give
// the graph a stream of its own and queue nothing else on it. Tensors made during
// the capture (outputs) keep their memory as long as they live; the graph writes
// them again at each replay.
class CudaGraph {
 public:
  explicit CudaGraph(const Stream& capture_stream);  // a stream made by Stream::create
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // Starts capturing; the capture stream is current on this thread until capture_end.
  void capture_begin();
  void capture_end();
  // Launches the graph on `stream` (ordered after the work queued there so far).
  void replay(const Stream& stream) const;
  bool captured() const { return exec_ != nullptr; }

 private:
  Stream stream_;
  void* exec_ = nullptr;
  std::unique_ptr<StreamGuard> guard_;
};

}  // namespace kiln
