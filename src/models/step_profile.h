// Where a forward's time goes, op by op (kiln bench-decode --profile): each op of
// the model is timed between two CUDA events on the current stream (on the CPU,
// by the host clock: CPU ops return when done). Only eager launches can be timed
// so: a CUDA graph has no events between its kernels, so Qwen3Model turns graphs
// off while a profile is set. An op's time is from its first kernel's start to its
// last one's end, so the launch gaps of an eager step fall between ops, and the
// ops' sum is the step's time minus those gaps.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "kiln/device.h"
#include "kiln/stream.h"

namespace kiln {

class StepProfile {
 public:
  explicit StepProfile(Device device) : device_(device) {}

  // Times the work queued while it lives under `name`; a null profile times nothing.
  class Scope {
   public:
    Scope(StepProfile* profile, const char* name);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    StepProfile* profile_;
    size_t mark_ = 0;
  };

  struct Row {
    std::string name;
    int64_t calls = 0;
    double ms = 0;  // summed over the calls
  };
  // Waits for the timed work, then sums it by name, in the order the names first came.
  std::vector<Row> rows() const;
  void clear() { marks_.clear(); }

 private:
  struct Mark {
    const char* name;
    std::vector<Event> events;  // start and end (CUDA)
    std::chrono::steady_clock::time_point t0, t1;  // CPU
  };
  Device device_;
  std::vector<Mark> marks_;
};

}  // namespace kiln
