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

}  // namespace kiln
