// swa_harness._core: the harness's own C++ (sweep files, inputs, golden, baseline, verdict) for
// Python. swa_harness/__init__.py is the API users see (harness/python/README.md); this file only
// binds what it needs, so that a verdict computed from Python is the one `run` computes.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "swa/dtype.hpp"
#include "swa/dut/dut.hpp"
#include "swa/harness/store/results_store.hpp"
#include "swa/harness/case/case_schema.hpp"
#include "swa/harness/case/sweep_file.hpp"
#include "swa/harness/case/tolerance.hpp"
#include "swa/harness/judge/evaluate.hpp"
#include "swa/harness/run/meta.hpp"
#include "swa/harness/store/junit.hpp"
#include "swa/harness/store/output_guard.hpp"
#include "swa/harness/store/results_file.hpp"
#include "swa/kernel_fields.hpp"
#include "swa/kv_format.hpp"
#include "abi_convert.hpp"
#include "python_fields.hpp"

namespace py = pybind11;
using namespace swa;
using namespace swa::harness;

namespace {

// A DUT that writes a given output (float32, [nTokens, heads, head_size]) into every call's rows:
// judge() runs it through the same evaluate() as `run`, so the verdict, metrics and reason are the
// run's. It keeps no KV cache (the cache is not judged: judge() has only the output).
class ReplayDut final : public dut::Dut {
 public:
  explicit ReplayDut(const float* out) : out_(out) {}
  std::string name() const override { return "python"; }
  dut::Traits traits() const override {
    dut::Traits t;
    t.cache = dut::CacheReport::none;
    return t;
  }
  dut::Support supports(const AttnParams&) const override { return dut::Support::yes(); }
  dut::Status prefill(const AttnParams& p) override { return write(p); }
  dut::Status chunked_prefill(const AttnParams& p, dut::KvCache&, int) override { return write(p); }
  dut::Status decode_step(const AttnParams& p, dut::KvCache&, int) override { return write(p); }

 private:
  dut::Status write(const AttnParams& p) {
    const std::int64_t rows = p.seq_offsets[p.batch];
    auto* out = static_cast<unsigned char*>(p.out);
    const std::size_t bytes = dtype_bytes(p.dtype);
    for (std::int64_t r = 0; r < rows; ++r)
      for (int h = 0; h < p.heads_q; ++h)
        for (int d = 0; d < p.head_size; ++d)
          store_as(p.dtype, out_[(r * p.heads_q + h) * p.head_size + d],
                   out + (r * p.out_row_stride + h * p.out_head_stride + d) * bytes);
    return dut::Status::success();
  }
  const float* out_;
};

// A Python function as a DUT in this process: the python: DUT's glue (swa_harness/_dut_glue.py, a copy
// of dut/python/swa_python_dut.py) called directly with the GIL held, so a test session runs kernels
// through the harness's own schedule and KV cache check without a worker.
class FunctionDut final : public dut::Dut {
 public:
  FunctionDut(py::object glue, std::string spec, const swa_dut_v2_traits& traits)
      : glue_(std::move(glue)), spec_(std::move(spec)), described_(traits) {}
  std::string name() const override { return "python:" + spec_; }
  dut::Traits traits() const override { return dut::abi::to_traits(described_); }
  std::optional<double> last_kernel_ms() const override { return last_ms_; }
  dut::Support supports(const AttnParams& p) const override {
    if (const std::string outside = dut::abi::outside_traits(described_, p); !outside.empty())
      return dut::Support::skip(outside);
    const py::tuple r = glue_.attr("call")(spec_, "supports", 0, dut::python::params_fields(dut::abi::to_c(p)), py::none());
    return r[0].cast<int>() ? dut::Support::yes() : dut::Support::skip(r[1].cast<std::string>());
  }
  dut::Status prefill(const AttnParams& p) override { return call("prefill", p, nullptr, 0); }
  dut::Status chunked_prefill(const AttnParams& p, dut::KvCache& cache, int index) override {
    return call("chunked_prefill", p, &cache, index);
  }
  dut::Status decode_step(const AttnParams& p, dut::KvCache& cache, int step) override {
    return call("decode_step", p, &cache, step);
  }

 private:
  dut::Status call(const char* op, const AttnParams& p, dut::KvCache* cache, int index) {
    std::optional<dut::abi::CacheView> view;
    if (cache) view.emplace(*cache);
    const py::tuple r = glue_.attr("call")(spec_, op, index, dut::python::params_fields(dut::abi::to_c(p)),
                                           view ? py::object(dut::python::cache_fields(view->c)) : py::none());
    if (view) view->sync_back(*cache);
    last_ms_ = r[2].cast<double>() >= 0 ? std::optional<double>(r[2].cast<double>()) : std::nullopt;
    if (r[0].cast<int>() == 0) return dut::Status::success();
    return dut::Status::failure(name() + ": " + r[1].cast<std::string>());
  }
  py::object glue_;
  std::string spec_;
  swa_dut_v2_traits described_;
  std::optional<double> last_ms_;
};

// The golden cache the module reads and fills, as `run` does: its default folder
// (~/.cache/swa-harness/golden, or $XDG_CACHE_HOME's) unless set_golden_cache() named another or none.
struct CacheSetting {
  bool chosen = false;
  std::unique_ptr<GoldenCache> cache;
};
CacheSetting& cache_setting() {
  static CacheSetting setting;
  return setting;
}
GoldenCache* golden_cache() {
  CacheSetting& s = cache_setting();
  if (!s.chosen) {
    s.chosen = true;
    if (const auto where = GoldenCache::default_dir()) try {
        s.cache = std::make_unique<GoldenCache>(*where, GoldenCache::kDefaultMaxBytes);
      } catch (const std::exception&) {  // as run: a cache that cannot be opened is no cache
      }
  }
  return s.cache.get();
}
void set_golden_cache(const std::optional<std::string>& dir) {
  CacheSetting& s = cache_setting();
  s.chosen = true;
  s.cache.reset();
  if (!dir) return;
  try {
    s.cache = std::make_unique<GoldenCache>(*dir, GoldenCache::kDefaultMaxBytes);
  } catch (const std::exception& e) {
    throw py::value_error("golden cache " + *dir + ": " + e.what());
  }
}

// A scenario's inputs, golden and baseline, built once (the same bits every DUT gets).
struct PyReference {
  Scenario scenario;
  std::unique_ptr<Reference> ref;
};

template <typename T>
py::array_t<T> array(const std::vector<T>& v, std::vector<py::ssize_t> shape) {
  py::array_t<T> a(shape);
  std::memcpy(a.mutable_data(), v.data(), v.size() * sizeof(T));
  return a;
}

// The inputs as kernels read them: float32 / float16 / bfloat16 bits (uint16), as the python: DUT gives them.
py::array storage_array(const std::vector<unsigned char>& bytes, DType dtype, std::vector<py::ssize_t> shape) {
  py::dtype type = dtype == DType::fp32 ? py::dtype("float32") : dtype == DType::fp16 ? py::dtype("float16")
                                                                                      : py::dtype("uint16");
  py::array a(type, shape);
  if (static_cast<std::size_t>(a.nbytes()) != bytes.size()) throw std::runtime_error("the inputs' size is not their shape's");
  std::memcpy(a.mutable_data(), bytes.data(), bytes.size());
  return a;
}

// A kernel field for Python: enums by name (as in exec requests), numbers as they are.
py::object field_value(DType v) { return py::str(std::string(dtype_name(v))); }
py::object field_value(RunMode v) { return py::str(std::string(mode_name(v))); }
py::object field_value(CachePolicy v) { return py::str(std::string(cache_name(v))); }
py::object field_value(MaskFormat v) { return py::str(std::string(mask_format_name(v))); }
py::object field_value(KvFormat v) { return py::str(std::string(kv_format_name(v))); }
template <class T>
  requires std::is_arithmetic_v<T>
py::object field_value(T v) {
  return py::cast(v);
}
// Fields without an exec name (tensors, strides) are the arrays above: `Named` false, nothing to convert.
template <bool Named, class T>
void put_field(py::dict& d, const char* name, const T& value) {
  if constexpr (Named) d[name] = field_value(value);
}

py::dict reference_arrays(const PyReference& r) {
  const Problem& pb = r.ref->problem;
  const AttnParams& p = pb.params;
  const py::ssize_t n = pb.seq_offsets.back();
  py::dict d;
  d["q"] = storage_array(pb.q_storage, p.dtype, {n, p.heads_q, p.head_size});
  d["k"] = storage_array(pb.k_storage, p.dtype, {n, p.heads_kv, p.head_size});
  d["v"] = storage_array(pb.v_storage, p.dtype, {n, p.heads_kv, p.head_size});
  d["seq_lens"] = py::array_t<std::int32_t>(pb.spec.seq_lens.size(), pb.spec.seq_lens.data());
  d["seq_offsets"] = py::array_t<std::int64_t>(pb.seq_offsets.size(), pb.seq_offsets.data());
  d["golden"] = array(r.ref->golden.out, {n, p.heads_q, p.head_size});
  d["baseline"] = array(r.ref->baseline(), {n, p.heads_q, p.head_size});
  d["mask"] = pb.mask.empty() ? py::object(py::none()) : py::object(array(pb.mask, {p.mask_rows, p.mask_rows}));
  d["sinks"] = pb.sinks.empty() ? py::object(py::none()) : py::object(array(pb.sinks, {p.heads_q}));
  // Every kernel field with an exec name, by that name (window_left, scale, mode, ...): generated from
  // the field list, so a new field reaches Python users without a line here.
#define SWA_REFERENCE_FIELD(field, member, minor, exec) put_field<sizeof(exec) != 1>(d, exec, p.member);
  SWA_KERNEL_FIELDS(SWA_REFERENCE_FIELD)
#undef SWA_REFERENCE_FIELD
  return d;
}

Tolerance tolerance_of(const Scenario& s, const std::optional<std::string>& profile);
py::dict row_dict(const ResultRow& row);

ResultRow judge_output(const PyReference& r, py::array_t<float, py::array::c_style | py::array::forcecast> out,
               const std::optional<std::string>& profile) {
  const AttnParams& p = r.ref->problem.params;
  const py::ssize_t n = r.ref->problem.seq_offsets.back();
  if (out.ndim() != 3 || out.shape(0) != n || out.shape(1) != p.heads_q || out.shape(2) != p.head_size)
    throw py::value_error("out must have the shape [" + std::to_string(n) + ", " + std::to_string(p.heads_q) + ", " +
                          std::to_string(p.head_size) + "] (tokens, heads, head_size) of scenario " + r.scenario.id());
  ReplayDut replay(out.data());
  return evaluate(r.scenario, *r.ref, replay, "python", tolerance_of(r.scenario, profile), false).row;
}

Tolerance tolerance_of(const Scenario& s, const std::optional<std::string>& profile) {
  if (!profile) return s.tolerance;
  const auto parsed = parse_profile(*profile);
  if (!parsed) throw py::value_error("profile '" + *profile + "' is not one of " + profile_choices());
  return tolerance_for(*parsed, s.dtype);
}

py::dict row_dict(const ResultRow& row) {
  py::dict d;
  for (const auto& [name, cell] : result_cells(row)) std::visit([&, &key = name](const auto& v) { d[key.c_str()] = v; }, cell);
  return d;
}

// Runs the Python function `spec` names (TARGET:FUNCTION[:key=value...], loaded through the glue once
// per spec) on the scenario through evaluate(), as `run --dut python:SPEC --in-process` would: the row
// and the output the function wrote (float32, [tokens, heads, head_size]).
py::tuple evaluate_function(const PyReference& r, const std::string& spec, const std::optional<std::string>& profile,
                            bool check_cache) {
  py::object glue = py::module_::import("swa_harness._dut_glue");
  py::dict described;
  try {
    described = glue.attr("load")(spec, dut::python::describe_choices());
  } catch (py::error_already_set& e) {
    if (!e.matches(glue.attr("LoadError"))) throw;
    throw py::value_error("python:" + spec + " cannot be loaded: " + std::string(py::str(e.value())));
  }
  FunctionDut dut(glue, spec, dut::python::traits_from_description(described));
  const Evaluation e = evaluate(r.scenario, *r.ref, dut, dut.name(), tolerance_of(r.scenario, profile),
                                check_cache && r.scenario.cache_check);
  const AttnParams& p = r.ref->problem.params;
  py::object out = py::none();
  if (!e.out.empty()) out = array(e.out, {static_cast<py::ssize_t>(r.ref->problem.seq_offsets.back()), p.heads_q, p.head_size});
  return py::make_tuple(e.row, out);
}

// The rows of a test session, for the same results file and JUnit as `run` (pytest's --swa-out).
struct Session {
  std::vector<ScenarioRow> scenarios;
  std::vector<ResultRow> results;
  void add(const PyReference& r, const ResultRow& row) {
    if (std::none_of(scenarios.begin(), scenarios.end(), [&](const ScenarioRow& s) { return s.id == r.scenario.id(); }))
      scenarios.push_back(scenario_row(r.scenario, &r.ref->problem.params));
    results.push_back(row);
  }
  void write(const std::string& path, const std::string& junit, const std::string& sweep_file,
             const std::string& command) const {
    ResultsContents c;
    c.meta = collect_meta(sweep_file, "", command);
    c.scenarios = scenarios;
    c.results = results;
    if (!path.empty()) {
      const ResultsFileLock lock(path, command);  // a run writing the same file: refused, naming it
      write_results(path, c);
    }
    if (!junit.empty()) write_junit(junit, "swa_harness", results);
  }
};

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "swa-harness's C++ for Python: see swa_harness (harness/python/README.md)";
  py::class_<Scenario>(m, "Scenario")
      .def_property_readonly("id", &Scenario::id)
      .def_property_readonly("sweep", [](const Scenario& s) { return s.sweep; })
      .def_property_readonly("params", [](const Scenario& s) { return case_attributes(s); },
                             "every case parameter by its sweep-file key, as text")
      .def_property_readonly("duts", [](const Scenario& s) { return s.duts; })
      .def("__repr__", [](const Scenario& s) { return "<Scenario " + s.id() + ">"; });
  m.def(
      "scenarios",
      [](const std::string& path, const std::optional<std::string>& sweep, const std::optional<std::string>& filter) {
        try {
          const SweepFile file = load_sweep_file(path);
          return select_scenarios(file, sweep, filter, Shard{});
        } catch (const std::exception& e) {
          throw py::value_error(e.what());
        }
      },
      py::arg("path"), py::arg("sweep") = py::none(), py::arg("filter") = py::none());
  m.def("version", [] { return version_line("swa_harness"); }, "the version line --version prints");
  m.def("choices", &dut::python::describe_choices,
        "the names of dtypes, modes, cache policies, KV formats and mask formats, as sweep files, describe() "
        "and the exec protocol spell them");
  m.def("set_golden_cache", &set_golden_cache, py::arg("folder"),
        "read and store goldens in this folder; None: compute every golden (run's --no-golden-cache)");
  py::class_<ResultRow>(m, "Row").def("cells", &row_dict, "every /results column by its name");
  py::class_<Session>(m, "Session")
      .def(py::init<>())
      .def("add", &Session::add)
      .def("__len__", [](const Session& s) { return s.results.size(); })
      .def("write", &Session::write, py::arg("path"), py::arg("junit"), py::arg("sweep_file"), py::arg("command"));
  m.def(
      "guard_output",
      [](const std::string& option, const std::string& path, const std::string& kind, bool force,
         const std::vector<std::pair<std::string, std::string>>& others, const std::string& force_option) {
        if (kind != "results" && kind != "junit") throw py::value_error("kind '" + kind + "' is not one of results|junit");
        try {
          check_output_path(option, path, kind == "results" ? OutputFileKind::results : OutputFileKind::junit, force,
                            others, force_option);
        } catch (const std::invalid_argument& e) {
          throw py::value_error(e.what());
        }
      },
      py::arg("option"), py::arg("path"), py::arg("kind"), py::arg("force"), py::arg("others"),
      py::arg("force_option") = "--force",
      "run's checks of an output path (kind: results|junit; others: [(what it is, path)]): ValueError naming the "
      "option, the path and why it would destroy something");
  py::class_<PyReference>(m, "Reference")
      .def(py::init([](const Scenario& s) {
             auto r = std::make_unique<PyReference>();
             r->scenario = s;
             GoldenCache* cache = golden_cache();
             py::gil_scoped_release unlocked;  // the golden takes a while on big cases
             r->ref = std::make_unique<Reference>(r->scenario, cache);
             return r;
           }),
           py::arg("scenario"))
      .def("arrays", &reference_arrays)
      .def("judge", &judge_output, py::arg("out"), py::arg("profile") = py::none())
      .def("evaluate_function", &evaluate_function, py::arg("spec"), py::arg("profile") = py::none(),
           py::arg("check_cache") = true);
}
