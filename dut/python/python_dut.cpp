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
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

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

// str() of a Python object as UTF-8, whatever it holds: a lone surrogate is written as a backslash
// escape (a plain cast would fail with pybind11's "Unable to cast Python instance to C++ type" and
// lose the text), and a __str__ that raises gives `fallback`.
std::string text_of(py::handle h, const std::string& fallback = "<its text cannot be read>") {
  try {
    return py::bytes(py::str(h).attr("encode")("utf-8", "backslashreplace")).cast<std::string>();
  } catch (const std::exception&) {
    return fallback;
  }
}

// What an exception the glue let through says: its type and its text.
std::string exception_text(const py::error_already_set& e) {
  return text_of(e.type().attr("__name__"), "an exception") + ": " + text_of(e.value());
}

// The first key of the checked description that python_fields' traits_from_description cannot read,
// with its value: what a cast failure there could not read.
std::string unreadable_key(const py::dict& d) {
  auto readable = [&](const char* key, auto as) {
    if (!d.contains(key)) return true;
    try {
      as(d[key]);
      return true;
    } catch (const std::exception&) {
      return false;
    }
  };
  const auto text = [](py::handle v) { (void)v.cast<std::string>(); };
  const auto names = [](py::handle v) { (void)v.cast<std::vector<std::string>>(); };
  const auto ints = [](py::handle v) { (void)v.cast<std::vector<int>>(); };
  const auto int32 = [](py::handle v) { (void)v.cast<int32_t>(); };
  const auto boolean = [](py::handle v) { (void)v.cast<bool>(); };
  const std::pair<const char*, std::function<void(py::handle)>> keys[] = {
      {"name", text},          {"dtypes", names},     {"modes", names},         {"cache_policies", names},
      {"mask_formats", names}, {"head_sizes", ints},  {"query_tile", int32},    {"key_tile", int32},
      {"cache_private", boolean}};
  for (const auto& [key, as] : keys)
    if (!readable(key, as)) return std::string("'") + key + "' = " + text_of(py::repr(d[key]));
  return "no key stands out";
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
    const py::object answer = host->glue.attr("load")(spec, python::describe_choices());
    if (!py::isinstance<py::dict>(answer))
      return "cannot be loaded: swa_python_dut.py's load() returned " + text_of(py::repr(answer)) + ", not a dict";
    const py::dict d = answer.cast<py::dict>();
    try {
      *traits = python::traits_from_description(d);
    } catch (const py::cast_error&) {  // its what() is pybind11's bare "Unable to cast ..."
      return "cannot be loaded: its description (as swa_python_dut.py checked it) could not be read as the "
             "plugin's traits at " + unreadable_key(d);
    }
    return {};
  } catch (py::error_already_set& e) {
    const std::string kind = text_of(e.type().attr("__name__"));
    return "cannot be loaded: " + (kind == "LoadError" ? text_of(e.value()) : exception_text(e));
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
    const py::object answer = host->glue.attr("call")(host->target, op, index, python::params_fields(*p),
                                                      cache ? py::object(python::cache_fields(*cache)) : py::none());
    int rc = 0;
    std::string message;
    double kernel_ms = -1;
    try {
      const py::tuple r = answer.cast<py::tuple>();
      if (r.size() != 3) throw py::cast_error("not 3 items");
      rc = r[0].cast<int>();
      message = r[1].cast<std::string>();
      kernel_ms = r[2].cast<double>();
    } catch (const py::cast_error&) {
      say(status, std::string("swa_python_dut.py's answer to ") + op + " could not be read as (rc, message, kernel_ms): " +
                      text_of(py::repr(answer)));
      return std::string(op) == "supports" ? 1 : 2;
    }
    say(status, message);
    if (status) status->kernel_ms = kernel_ms;
    return rc;
  } catch (py::error_already_set& e) {
    say(status, "swa_python_dut.py failed: " + exception_text(e));
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
