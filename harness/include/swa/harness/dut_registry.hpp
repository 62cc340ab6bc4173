#pragma once
#include <memory>
#include <string>
#include <vector>

#include "swa/dut/dut.hpp"

namespace swa::harness {

// DUTs by name: baseline, cpu, mutant:<fault>, plugin:PATH (a shared library with the C ABI of
// swa/dut_v1.h), exec:'COMMAND' (the process protocol). Throws std::invalid_argument naming the
// problem (an unknown name lists the names it knows; a bad plugin says what is wrong with it).
std::unique_ptr<dut::Dut> make_dut(const std::string& name);
std::string dut_choices();
// Time limit of each exec: DUT run (default 300 s).
void set_exec_timeout(double seconds);

}  // namespace swa::harness
