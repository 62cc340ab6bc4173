#pragma once
// A DUT that is another process, spoken to through HDF5 request and response files (the process
// protocol, harness/README.md): `--dut exec:'COMMAND ...'` runs `COMMAND ... REQUEST.h5 RESPONSE.h5`.
#include <memory>
#include <string>

#include "swa/dut/dut.hpp"
#include "swa/harness/case/problem_file.hpp"

namespace swa::harness {

// The protocol versions are problem_file.hpp's (the request is a problem file).

std::unique_ptr<dut::Dut> make_exec_dut(const std::string& command, double timeout_seconds);

}  // namespace swa::harness
