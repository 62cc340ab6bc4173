#pragma once
// The readings of where a value is held in a narrower type (golden/readings.hpp): one intermediate
// rounded, the online state rounded per tile or spilled between a call's stages, the FP8 codec and
// its descales; settings of the readings table (readings_table.cpp), which names and words them.
#include <vector>

#include "readings_table.hpp"

namespace swa::harness {

std::vector<ReadingSetting> rounding_settings(const AttnParams& p);
std::vector<ReadingSetting> running_state_settings(const AttnParams& p);
std::vector<ReadingSetting> fp8_settings(const AttnParams& p);

}  // namespace swa::harness
