#pragma once
// A call's params and KV cache as the dicts swa_python_dut.py takes: every field of swa_dut_v2_params
// by its name (golden/include/swa/kernel_fields.hpp's list), pointers as addresses, the enums by the
// names sweep files use. One conversion for the python: plugin (python_dut.cpp) and the swa_harness
// module (harness/python/core.cpp).
#include <pybind11/pybind11.h>

#include "swa/dut_v2.h"

namespace swa::dut::python {

pybind11::dict params_fields(const swa_dut_v2_params& c);
pybind11::dict cache_fields(const swa_dut_v2_cache& c);
// The names describe() may use for dtypes, modes, cache_policies, kv_formats and mask_formats.
pybind11::dict describe_choices();
// What swa_python_dut.load() returns (the module's describe(), checked) as a plugin's traits: a case
// outside them is a skip without a call. times_own_kernels is set: the glue reports p.kernel_ms for
// a call that set it (none otherwise: perf mode then times the call on the host's clock).
swa_dut_v2_traits traits_from_description(const pybind11::dict& d);

}  // namespace swa::dut::python
