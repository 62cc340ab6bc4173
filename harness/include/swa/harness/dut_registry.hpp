#pragma once
#include <memory>
#include <string>
#include <vector>

#include "swa/dut/dut.hpp"

namespace swa::harness {

// DUTs by name: baseline, cpu, mutant:<fault>. Throws std::invalid_argument listing the names it knows.
std::unique_ptr<dut::Dut> make_dut(const std::string& name);
std::string dut_choices();

}  // namespace swa::harness
