#include "models/step_profile.h"

namespace kiln {

StepProfile::Scope::Scope(StepProfile* profile, const char* name) : profile_(profile) {
  if (!profile_) return;
  mark_ = profile_->marks_.size();
  StepProfile::Mark m{name, {}, {}, {}};
  if (profile_->device_.is_cuda()) {
    m.events.emplace_back(profile_->device_);
    m.events.emplace_back(profile_->device_);
    m.events[0].record();
  } else {
    m.t0 = std::chrono::steady_clock::now();
  }
  profile_->marks_.push_back(std::move(m));
}

StepProfile::Scope::~Scope() {
  if (!profile_) return;
  StepProfile::Mark& m = profile_->marks_[mark_];
  if (profile_->device_.is_cuda()) m.events[1].record();
  else m.t1 = std::chrono::steady_clock::now();
}

std::vector<StepProfile::Row> StepProfile::rows() const {
  std::vector<Row> out;
  for (const Mark& m : marks_) {
    double ms;
    if (device_.is_cuda()) {
      m.events[1].synchronize();
      ms = m.events[0].elapsed_time(m.events[1]);
    } else {
      ms = std::chrono::duration<double, std::milli>(m.t1 - m.t0).count();
    }
    auto row = out.begin();
    while (row != out.end() && row->name != m.name) ++row;
    if (row == out.end()) row = out.insert(out.end(), Row{m.name, 0, 0});
    row->calls += 1;
    row->ms += ms;
  }
  return out;
}

}  // namespace kiln
