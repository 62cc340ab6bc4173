// libswa_python_dut.so: the plugin behind `--dut python:TARGET:FUNCTION[:key=value...]`. It speaks
// swa/dut_v2.h to the harness like any plugin (so a worker process hosts it, and a crash, a hang or an
// exit costs one call), embeds CPython in that process, and hands each call to swa_python_dut.py,
// which imports the user's module once and calls the user's function with NumPy views of the
// worker's shared memory. The target comes in the environment variable SWA_PYTHON_DUT (set by the
// harness for this worker), because the ABI's describe takes no argument.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>

#include <pybind11/embed.h>
#include <pybind11/stl.h>

#include "python_fields.hpp"
#include "swa/dut_v2.h"

namespace py = pybind11;
namespace python = swa::dut::python;

namespace {

struct Host {
  py::object glue;     // swa_python_dut.py, loaded as a module
  std::string target;  // what SWA_PYTHON_DUT named when it loaded
};
Host* host = nullptr;  // never destroyed: finalizing Python would wait for a kernel's leaked threads
std::mutex load_mutex;

std::filesystem::path own_folder() {
  Dl_info info{};
  dladdr(reinterpret_cast<void*>(&own_folder), &info);
  return std::filesystem::path(info.dli_fname ? info.dli_fname : "").parent_path();
}

// NumPy's extension modules take the interpreter's symbols from the global scope; a plugin is
// loaded RTLD_LOCAL, and its libpython with it, so promote libpython to global first.
void make_libpython_global() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&Py_IsInitialized), &info) && info.dli_fname)
    dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
}

void say(swa_dut_v2_status* status, const std::string& text) {
  if (status) std::snprintf(status->message, sizeof status->message, "%s", text.c_str());
}

// Starts the interpreter (or joins the one this process already runs) and loads the target.
std::string load(swa_dut_v2_traits* traits) {
  const char* spec = std::getenv("SWA_PYTHON_DUT");
  if (!spec || !*spec) return "SWA_PYTHON_DUT is not set: load this library with --dut python:TARGET:FUNCTION";
  std::lock_guard lock(load_mutex);
  if (host && host->target != spec)
    return "this process already runs python:" + host->target +
           "; with --in-process a run takes one python: DUT (without it, each runs in its own worker)";
  if (!Py_IsInitialized()) {
    make_libpython_global();
    py::initialize_interpreter(/*init_signal_handlers=*/false);
    PyEval_SaveThread();  // every call takes the GIL itself, from whichever thread the harness calls
  }
  py::gil_scoped_acquire gil;
  try {
    if (!host) {
      const std::string glue = (own_folder() / "swa_python_dut.py").string();
      py::object util = py::module_::import("importlib.util");
      py::object module_spec = util.attr("spec_from_file_location")("_swa_python_dut", glue);
      if (module_spec.is_none()) return "cannot find its glue module " + glue;
      py::object module = util.attr("module_from_spec")(module_spec);
      module_spec.attr("loader").attr("exec_module")(module);
      host = new Host{module, spec};
    }
    const py::dict d = host->glue.attr("load")(spec, python::describe_choices());
    *traits = python::traits_from_description(d);
    return {};
  } catch (py::error_already_set& e) {
    const std::string kind = py::str(e.type().attr("__name__"));
    return "cannot be loaded: " + (kind == "LoadError" ? std::string(py::str(e.value())) : std::string(e.what()));
  } catch (const std::exception& e) {
    return std::string("cannot be loaded: ") + e.what();
  }
}

int call(const char* op, const swa_dut_v2_params* p, swa_dut_v2_cache* cache, int index, swa_dut_v2_status* status) {
  if (!host) {
    say(status, "the Python target is not loaded");
    return std::string(op) == "supports" ? 0 : 1;
  }
  py::gil_scoped_acquire gil;
  try {
    const py::tuple r = host->glue.attr("call")(host->target, op, index, python::params_fields(*p),
                                                cache ? py::object(python::cache_fields(*cache)) : py::none());
    say(status, r[1].cast<std::string>());
    status->kernel_ms = r[2].cast<double>();
    return r[0].cast<int>();
  } catch (py::error_already_set& e) {
    say(status, std::string("swa_python_dut.py failed: ") + e.what());
  } catch (const std::exception& e) {
    say(status, std::string("swa_python_dut failed: ") + e.what());
  }
  return std::string(op) == "supports" ? 1 : 2;  // a failure of supports is reported by the call
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) uint32_t swa_dut_v2_abi_version(void) { return SWA_DUT_V2_ABI_VERSION; }

// Why describe failed: the ABI's describe has no status, so the loader asks for this (plugin_abi.cpp).
static std::string describe_error;
__attribute__((visibility("default"))) const char* swa_dut_internal_describe_error(void) { return describe_error.c_str(); }

__attribute__((visibility("default"))) int swa_dut_v2_describe(swa_dut_v2_traits* traits) {
  describe_error = load(traits);
  return describe_error.empty() ? 0 : 1;
}

__attribute__((visibility("default"))) int swa_dut_v2_supports(const swa_dut_v2_params* p, swa_dut_v2_status* status) {
  return call("supports", p, nullptr, 0, status);
}

__attribute__((visibility("default"))) int swa_dut_v2_prefill(const swa_dut_v2_params* p, swa_dut_v2_status* status) {
  return call("prefill", p, nullptr, 0, status);
}

__attribute__((visibility("default"))) int swa_dut_v2_chunked_prefill(const swa_dut_v2_params* p, swa_dut_v2_cache* cache,
                                                                      int chunk_index, swa_dut_v2_status* status) {
  return call("chunked_prefill", p, cache, chunk_index, status);
}

__attribute__((visibility("default"))) int swa_dut_v2_decode_step(const swa_dut_v2_params* p, swa_dut_v2_cache* cache,
                                                                  int step, swa_dut_v2_status* status) {
  return call("decode_step", p, cache, step, status);
}

}  // extern "C"
