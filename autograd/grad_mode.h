#pragma once
// Thread-local switches of the autograd engine.

namespace phasor {

struct GradMode {
  static bool enabled();
  static void set_enabled(bool enabled);
};

// Nothing is recorded while a NoGradGuard lives (optimizer steps, evaluation).
class NoGradGuard {
 public:
  NoGradGuard() : previous_(GradMode::enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// Sets grad mode to `enabled` while it lives (backward with create_graph turns it on).
class AutoGradMode {
 public:
  explicit AutoGradMode(bool enabled) : previous_(GradMode::enabled()) { GradMode::set_enabled(enabled); }
  ~AutoGradMode() { GradMode::set_enabled(previous_); }
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;

 private:
  bool previous_;
};

// When enabled, backward checks every gradient a node produces and throws,
// naming the op that created the node, at the first NaN or Inf.
struct AnomalyMode {
  static bool enabled();
  static void set_enabled(bool enabled);
};

class AnomalyGuard {
 public:
  AnomalyGuard() : previous_(AnomalyMode::enabled()) { AnomalyMode::set_enabled(true); }
  ~AnomalyGuard() { AnomalyMode::set_enabled(previous_); }
  AnomalyGuard(const AnomalyGuard&) = delete;
  AnomalyGuard& operator=(const AnomalyGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace phasor
