#include <pfx/driver/environment.hpp>
#include <pfx/driver/lane.hpp>

namespace pfx::driver {

LaneOptions lane_options_from_environment() { return lane_options_from_environment(LaneOptions{}); }

LaneOptions lane_options_from_environment(const LaneOptions& base) {
  const Config read = config_from_environment({.enabled = base.enabled, .keep_min = base.keep_min});
  LaneOptions options = base;
  options.enabled = read.enabled;
  options.keep_min = read.keep_min;
  return options;
}

}  // namespace pfx::driver
