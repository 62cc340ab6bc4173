#include "swa/harness/case/problem_file.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "swa/dut/kv_cache.hpp"
#include "swa/enum_names.hpp"
#include "swa/kernel_fields.hpp"
#include "swa/harness/case/case_schema.hpp"
#include "swa/harness/base/join.hpp"

namespace fs = std::filesystem;

namespace swa::harness {
namespace {

std::vector<float> gather(const AttnParams& p, const void* base, std::int64_t row_stride, std::int64_t head_stride,
                          int heads) {
  const std::int64_t n = total_tokens(p);
  std::vector<float> t(static_cast<std::size_t>(n) * heads * p.head_size);
  const auto* bytes = static_cast<const unsigned char*>(base);
  for (std::int64_t r = 0; r < n; ++r)
    for (int h = 0; h < heads; ++h)
      load_all_from(p.dtype, bytes + (r * row_stride + h * head_stride) * dtype_bytes(p.dtype),
                    static_cast<std::size_t>(p.head_size), &t[(r * heads + h) * p.head_size]);
  return t;
}

std::vector<hsize_t> shape(const ProblemFile& f, int heads) {
  return {static_cast<hsize_t>(f.tokens), static_cast<hsize_t>(heads), static_cast<hsize_t>(f.head_size)};
}

void write_attrs(hid_t obj, const std::map<std::string, h5::AttrValue>& attrs) {
  // Not a structured binding: clang before 16 cannot capture one in a lambda.
  for (const auto& attr : attrs) std::visit([&](const auto& v) { h5::write_attr(obj, attr.first, v); }, attr.second);
}

[[noreturn]] void refuse(const fs::path& path, const std::string& why) {
  throw h5::Error(path.string() + ": " + why);
}

template <class T>
std::vector<T> read_shaped(hid_t file, const fs::path& path, const std::string& name, const std::vector<hsize_t>& want,
                           std::vector<T> (*reader)(hid_t, const std::string&, std::vector<hsize_t>*)) {
  if (!h5::exists(file, name)) refuse(path, "has no /" + name);
  std::vector<hsize_t> dims;
  std::vector<T> data = reader(file, name, &dims);
  if (dims != want) {
    refuse(path, "/" + name + " has shape [" + join(dims, ",") + "], expected [" + join(want, ",") + "]");
  }
  return data;
}

std::vector<std::int32_t> to_int32(const std::vector<std::int64_t>& v) { return {v.begin(), v.end()}; }

std::int64_t int_attr(const std::map<std::string, h5::AttrValue>& attrs, const fs::path& path, const std::string& name) {
  const auto it = attrs.find(name);
  if (it == attrs.end() || !std::holds_alternative<std::int64_t>(it->second))
    refuse(path, "has no integer root attribute " + name);
  return std::get<std::int64_t>(it->second);
}

}  // namespace

namespace {

// A kernel field as a request attribute: enums by name, numbers as int64 or double.
h5::AttrValue request_value(DType v) { return std::string(dtype_name(v)); }
h5::AttrValue request_value(RunMode v) { return std::string(mode_name(v)); }
h5::AttrValue request_value(CachePolicy v) { return std::string(cache_name(v)); }
h5::AttrValue request_value(MaskFormat v) { return std::string(mask_format_name(v)); }
h5::AttrValue request_value(KvFormat v) { return std::string(kv_format_name(v)); }
h5::AttrValue request_value(float v) { return static_cast<double>(v); }
h5::AttrValue request_value(std::int64_t v) { return v; }
h5::AttrValue request_value(int v) { return std::int64_t{v}; }

// Fields without an exec name (tensors, strides) are not attributes: `Sent` false, nothing to convert.
template <bool Sent, class T>
void put_attr(std::map<std::string, h5::AttrValue>& a, const char* name, const T& value) {
  if constexpr (Sent) a[name] = request_value(value);
}

// And back: request_value's inverse, refusing what it could not have written.
[[noreturn]] void refuse_attr(const fs::path& path, const char* name, const std::string& what) {
  refuse(path, "root attribute " + std::string(name) + " " + what);
}
template <class E, std::size_t N, class NameOf>
E named(const h5::AttrValue& v, std::optional<E> (*parse)(std::string_view), const E (&all)[N], NameOf name_of,
        const fs::path& path, const char* name) {
  const std::string* text = std::get_if<std::string>(&v);
  if (!text) refuse_attr(path, name, "is not a string");
  if (const auto e = parse(*text)) return *e;
  std::string allowed;
  for (E e : all) allowed += (allowed.empty() ? "" : "|") + std::string(name_of(e));
  refuse_attr(path, name, "is '" + *text + "', not one of " + allowed);
}
void value_from(const h5::AttrValue& v, DType& out, const fs::path& path, const char* name) {
  out = named(v, parse_dtype, kAllDTypes, dtype_name, path, name);
}
void value_from(const h5::AttrValue& v, RunMode& out, const fs::path& path, const char* name) {
  out = named(v, parse_mode, kAllRunModes, mode_name, path, name);
}
void value_from(const h5::AttrValue& v, CachePolicy& out, const fs::path& path, const char* name) {
  out = named(v, parse_cache, kAllCachePolicies, cache_name, path, name);
}
void value_from(const h5::AttrValue& v, MaskFormat& out, const fs::path& path, const char* name) {
  out = named(v, parse_mask_format, kAllMaskFormats, mask_format_name, path, name);
}
void value_from(const h5::AttrValue& v, KvFormat& out, const fs::path& path, const char* name) {
  out = named(v, parse_kv_format, kAllKvFormats, kv_format_name, path, name);
}
void value_from(const h5::AttrValue& v, float& out, const fs::path& path, const char* name) {
  const double* d = std::get_if<double>(&v);
  if (!d) refuse_attr(path, name, "is not a floating-point number");
  out = static_cast<float>(*d);
}
template <class Int>
void int_from(const h5::AttrValue& v, Int& out, const fs::path& path, const char* name) {
  const std::int64_t* i = std::get_if<std::int64_t>(&v);
  if (!i) refuse_attr(path, name, "is not an integer");
  if (*i < std::numeric_limits<Int>::min() || *i > std::numeric_limits<Int>::max())
    refuse_attr(path, name, "is " + std::to_string(*i) + ", out of range");
  out = static_cast<Int>(*i);
}
void value_from(const h5::AttrValue& v, int& out, const fs::path& path, const char* name) { int_from(v, out, path, name); }
void value_from(const h5::AttrValue& v, std::int64_t& out, const fs::path& path, const char* name) {
  int_from(v, out, path, name);
}

// A field the request carries as an attribute: read when present; 2.0's must be.
template <bool Sent, class T>
void get_attr(const std::map<std::string, h5::AttrValue>& a, const char* name, int minor, T& member,
              const fs::path& path) {
  if constexpr (Sent) {
    const auto it = a.find(name);
    if (it != a.end())
      value_from(it->second, member, path, name);
    else if (minor == 0)
      refuse_attr(path, name, "is missing");
  }
}

}  // namespace

const char* problem_file_kind_name(ProblemFileKind k) {
  static constexpr EnumName<ProblemFileKind> kNames[] = {
      {ProblemFileKind::request, "request"}, {ProblemFileKind::golden, "golden"},
      {ProblemFileKind::dump, "dump"}, {ProblemFileKind::repro, "repro"}};
  static_assert(names_every(kNames, kAllProblemFileKinds), "a ProblemFileKind without its name");
  return name_in(kNames, k).data();
}

ProblemFile problem_inputs(const AttnParams& p) {
  return problem_inputs(p, gather(p, p.q, p.q_row_stride, p.q_head_stride, p.heads_q),
                        gather(p, p.k, p.k_row_stride, p.k_head_stride, p.heads_kv),
                        gather(p, p.v, p.v_row_stride, p.v_head_stride, p.heads_kv));
}

ProblemFile problem_inputs(const AttnParams& p, std::vector<float> q, std::vector<float> k, std::vector<float> v) {
  ProblemFile f;
  f.tokens = total_tokens(p);
  f.heads_q = p.heads_q;
  f.heads_kv = p.heads_kv;
  f.head_size = p.head_size;
  const auto elements = [&](int heads) { return static_cast<std::size_t>(f.tokens) * heads * p.head_size; };
  if (q.size() != elements(p.heads_q) || k.size() != elements(p.heads_kv) || v.size() != elements(p.heads_kv))
    throw std::invalid_argument("problem_inputs: Q, K or V does not have the problem's shape");
  f.q = std::move(q);
  f.k = std::move(k);
  f.v = std::move(v);
  f.seq_lens.assign(p.seq_lens, p.seq_lens + p.batch);
  for (int b = 0; b < p.batch; ++b) f.prompt_lens.push_back(static_cast<std::int32_t>(prompt_len(p, b)));
  if (p.mask) {
    f.mask_rows = p.mask_rows;
    f.mask.assign(p.mask, p.mask + p.mask_rows * p.mask_rows);
  }
  if (p.sinks) f.sinks.assign(p.sinks, p.sinks + p.heads_q);
  auto& a = f.kernel;
  // The kernel's fields by the field list's exec names; a field a 2.x minor version appended only when
  // the case uses that version's fields, so a DUT that speaks an older protocol keeps running the rest.
  const int minor_used = kernel_fields_minor_used(p);
#define SWA_REQUEST_ATTR(field, member, minor, exec) \
  if ((minor) == 0 || *kernel_field_used_first(p, minor)) put_attr<sizeof(exec) != 1>(a, exec, p.member);
  SWA_KERNEL_FIELDS(SWA_REQUEST_ATTR)
#undef SWA_REQUEST_ATTR
  f.protocol = kExecProtocolBase + minor_used;
  if (p.mode != RunMode::prefill) a["cache_slots"] = dut::kv_cache_layout(p).slots;
  if (p.mode != RunMode::prefill && p.cache == CachePolicy::paged) {  // only then: protocol 5
    dut::KvCache pages = dut::kv_cache_layout(p);
    a["table_width"] = pages.table_width;
    // The bookkeeping run_schedule does around each call, recorded as each call sees it.
    auto record = [&](RunMode call, int index) {
      dut::take_call_pages(p, pages, call, index);
      f.page_tables.insert(f.page_tables.end(), pages.page_table.begin(), pages.page_table.end());
      dut::free_call_pages(p, pages, call, index);
    };
    for (int c = 0, n = dut::chunk_count(p); c < n; ++c) record(RunMode::chunked_prefill, c);
    for (int t = 0; p.mode == RunMode::decode && t < p.decode_steps; ++t) record(RunMode::decode, t);
  }
  a["gqa"] = std::string("q head h reads kv head h / (heads / kv_heads)");
  a["window_convention"] = std::string("query i sees key j iff -window_right <= i - j <= window_left; -1: unbounded");
  return f;
}

void describe_case(ProblemFile& f, const Scenario& s) {
  f.scenario_id = s.id();
  f.case_params = case_attributes(s);
}

// /diagnosis: bisect's finding, its ablation table and its fitted attention.
void write_diagnosis(hid_t id, const ProblemFile::Diagnosis& d) {
  h5::Handle g = h5::create_group(id, "diagnosis");
  h5::write_attr(g.id(), "class", d.name);
  h5::write_attr(g.id(), "source", d.source);
  std::string evidence;
  for (const std::string& line : d.evidence) evidence += line + "\n";
  h5::write_attr(g.id(), "evidence", evidence);
  h5::write_attr(g.id(), "confidence", d.confidence);
  h5::write_attr(g.id(), "confidence_why", d.why);
  if (!d.ablation.empty()) {
    h5::Handle t = h5::create_group(g.id(), "ablation");  // one group per row, 00, 01, ... in order
    for (std::size_t i = 0; i < d.ablation.size(); ++i) {
      const auto& a = d.ablation[i];
      h5::Handle row = h5::create_group(t.id(), (i < 10 ? "0" : "") + std::to_string(i));
      h5::write_attr(row.id(), "feature", a.feature);
      h5::write_attr(row.id(), "change", a.change);
      h5::write_attr(row.id(), "outcome", a.outcome);
      h5::write_attr(row.id(), "case", a.case_id);
      h5::write_attr(row.id(), "inputs_redrawn", std::int64_t{a.inputs_redrawn});
    }
  }
  if (!d.rows.empty()) {
    const auto r = static_cast<hsize_t>(d.rows.size() / 3), n = static_cast<hsize_t>(d.candidates.size() / 3);
    h5::write_attr(g.id(), "fitted_case", d.fitted_case);
    h5::write_dataset(g.id(), "rows", d.rows, {r, 3});
    h5::write_dataset(g.id(), "candidates", d.candidates, {n, 3});
    h5::write_dataset(g.id(), "weights", d.weights, {r, n});
    h5::write_dataset(g.id(), "golden_weights", d.golden_weights, {r, n});
  }
}

void write_problem_file(const fs::path& path, const ProblemFile& f) {
  h5::AtomicFile file(path);
  const hid_t id = file.id();
  h5::write_dataset(id, "q", f.q, shape(f, f.heads_q));
  h5::write_dataset(id, "k", f.k, shape(f, f.heads_kv));
  h5::write_dataset(id, "v", f.v, shape(f, f.heads_kv));
  const auto batch = static_cast<hsize_t>(f.seq_lens.size());
  h5::write_dataset(id, "seq_lens", f.seq_lens, {batch});
  h5::write_dataset(id, "prompt_lens", f.prompt_lens, {batch});
  if (!f.mask.empty())
    h5::write_dataset(id, "mask", f.mask, {static_cast<hsize_t>(f.mask_rows), static_cast<hsize_t>(f.mask_rows)});
  if (!f.sinks.empty()) h5::write_dataset(id, "sinks", f.sinks, {static_cast<hsize_t>(f.heads_q)});
  if (!f.page_tables.empty()) {
    const auto width = static_cast<hsize_t>(std::get<std::int64_t>(f.kernel.at("table_width")));
    h5::write_dataset(id, "page_tables", f.page_tables, {f.page_tables.size() / (batch * width), batch, width});
  }
  write_attrs(id, f.kernel);
  h5::write_attr(id, "problem_file_format", kProblemFileFormat);
  h5::write_attr(id, "kind", std::string(problem_file_kind_name(f.kind)));
  if (f.kind == ProblemFileKind::request) h5::write_attr(id, "protocol_version", std::int64_t{f.protocol});

  if (!f.scenario_id.empty()) {
    h5::Handle c = h5::create_group(id, "case");
    h5::write_attr(c.id(), "id", f.scenario_id);
    for (const auto& [key, value] : f.case_params) h5::write_attr(c.id(), key, value);
  }
  if (!f.reference.empty()) {
    h5::Handle r = h5::create_group(id, "reference");
    h5::write_attr(r.id(), "source", f.reference_source);
    h5::write_dataset(r.id(), "out", f.reference, shape(f, f.heads_q));
    if (!f.reference_lse.empty())
      h5::write_dataset(r.id(), "lse", f.reference_lse, {static_cast<hsize_t>(f.tokens), static_cast<hsize_t>(f.heads_q)});
    if (!f.baseline.empty()) h5::write_dataset(r.id(), "baseline", f.baseline, shape(f, f.heads_q));
  }
  if (!f.duts.empty()) {
    h5::Handle duts = h5::create_group(id, "duts");
    for (const auto& d : f.duts) {
      h5::Handle g = h5::create_group(duts.id(), std::to_string(d.index));
      h5::write_dataset(g.id(), "out", d.out, shape(f, f.heads_q));
      if (f.reference.size() == d.out.size()) {
        std::vector<double> error(d.out.size());
        for (std::size_t i = 0; i < error.size(); ++i) error[i] = static_cast<double>(d.out[i]) - f.reference[i];
        h5::write_dataset(g.id(), "error", error, shape(f, f.heads_q));
      }
      h5::write_attr(g.id(), "dut", d.dut);
      write_attrs(g.id(), d.attributes);
    }
  }
  if (f.diagnosis) write_diagnosis(id, *f.diagnosis);
  file.commit();
}

AttnParams kernel_params(const ProblemFile& f, const fs::path& path, std::vector<std::int64_t>& offsets) {
  AttnParams p;
#define SWA_READ_ATTR(field, member, minor, exec) get_attr<sizeof(exec) != 1>(f.kernel, exec, minor, p.member, path);
  SWA_KERNEL_FIELDS(SWA_READ_ATTR)
#undef SWA_READ_ATTR
  p.batch = static_cast<int>(f.seq_lens.size());
  p.seq_lens = f.seq_lens.data();
  offsets.assign(1, 0);
  for (std::int32_t len : f.seq_lens) offsets.push_back(offsets.back() + len);
  p.seq_offsets = offsets.data();
  // Contiguous [tokens, heads, head_size] rows, as the file's tensors are.
  p.q_row_stride = p.out_row_stride = static_cast<std::int64_t>(p.heads_q) * p.head_size;
  p.k_row_stride = p.v_row_stride = static_cast<std::int64_t>(p.heads_kv) * p.head_size;
  p.q_head_stride = p.k_head_stride = p.v_head_stride = p.out_head_stride = p.head_size;
  p.mask_rows = f.mask_rows;
  return p;
}

// /duts/INDEX/out, with each DUT's name and attributes, in index order.
void read_dut_outputs(hid_t id, const fs::path& path, ProblemFile& f) {
  h5::Handle duts(H5Gopen2(id, "duts", H5P_DEFAULT), H5Gclose, "open /duts");
  for (const std::string& key : h5::member_names(duts.id())) {
    ProblemFile::DutOutput d;
    try {
      d.index = std::stoi(key);
    } catch (const std::exception&) {
      refuse(path, "/duts/" + key + " is not named by a DUT index");
    }
    d.out = read_shaped<float>(id, path, "duts/" + key + "/out", shape(f, f.heads_q), h5::read_floats);
    h5::Handle g(H5Gopen2(duts.id(), key.c_str(), H5P_DEFAULT), H5Gclose, "open /duts/" + key);
    d.attributes = h5::read_attrs(g.id());
    if (auto it = d.attributes.find("dut"); it != d.attributes.end() && std::holds_alternative<std::string>(it->second)) {
      d.dut = std::get<std::string>(it->second);
      d.attributes.erase(it);
    }
    f.duts.push_back(std::move(d));
  }
  std::sort(f.duts.begin(), f.duts.end(), [](const auto& a, const auto& b) { return a.index < b.index; });
}

ProblemFile read_problem_file(const fs::path& path) {
  if (!fs::is_regular_file(path)) refuse(path, "no such file");
  h5::Handle file = h5::open_file_readonly(path);
  const hid_t id = file.id();
  std::map<std::string, h5::AttrValue> root = h5::read_attrs(id);
  if (!root.count("problem_file_format"))
    refuse(path, "predates the problem file format (no root attribute problem_file_format): it was written by an "
                 "swa-harness older than format " + std::to_string(kProblemFileFormat) + "; regenerate it");
  const std::int64_t format = int_attr(root, path, "problem_file_format");
  if (format > kProblemFileFormat)
    refuse(path, "is problem file format " + std::to_string(format) + ", newer than this swa-harness reads (" +
                     std::to_string(kProblemFileFormat) + ")");
  ProblemFile f;
  const auto kind = root.count("kind") && std::holds_alternative<std::string>(root.at("kind"))
                        ? std::get<std::string>(root.at("kind")) : std::string();
  bool known = false;
  for (ProblemFileKind k : kAllProblemFileKinds)
    if (kind == problem_file_kind_name(k)) f.kind = k, known = true;
  if (!known) refuse(path, "root attribute kind '" + kind + "' is not one of request|golden|dump|repro");
  f.heads_q = static_cast<int>(int_attr(root, path, "heads"));
  f.heads_kv = static_cast<int>(int_attr(root, path, "kv_heads"));
  f.head_size = static_cast<int>(int_attr(root, path, "head_size"));
  if (const auto v = root.find("protocol_version"); v != root.end() && std::holds_alternative<std::int64_t>(v->second))
    f.protocol = static_cast<int>(std::get<std::int64_t>(v->second));
  for (const char* own : {"problem_file_format", "kind", "protocol_version"}) root.erase(own);
  f.kernel = std::move(root);

  f.seq_lens = to_int32(h5::read_int64s(id, "seq_lens"));
  for (auto len : f.seq_lens) f.tokens += len;
  const auto batch = static_cast<hsize_t>(f.seq_lens.size());
  f.prompt_lens = to_int32(read_shaped<std::int64_t>(id, path, "prompt_lens", {batch}, h5::read_int64s));
  f.q = read_shaped<float>(id, path, "q", shape(f, f.heads_q), h5::read_floats);
  f.k = read_shaped<float>(id, path, "k", shape(f, f.heads_kv), h5::read_floats);
  f.v = read_shaped<float>(id, path, "v", shape(f, f.heads_kv), h5::read_floats);
  if (h5::exists(id, "mask")) {
    std::vector<hsize_t> dims;
    f.mask = h5::read_floats(id, "mask", &dims);
    if (dims.size() != 2 || dims[0] != dims[1]) refuse(path, "/mask is not square");
    f.mask_rows = static_cast<std::int64_t>(dims[0]);
  }
  if (h5::exists(id, "sinks"))
    f.sinks = read_shaped<float>(id, path, "sinks", {static_cast<hsize_t>(f.heads_q)}, h5::read_floats);
  if (h5::exists(id, "page_tables")) f.page_tables = to_int32(h5::read_int64s(id, "page_tables"));
  if (h5::exists(id, "case")) {
    h5::Handle c(H5Gopen2(id, "case", H5P_DEFAULT), H5Gclose, "open /case");
    for (const auto& [key, value] : h5::read_attrs(c.id())) {
      if (!std::holds_alternative<std::string>(value)) continue;
      (key == "id" ? f.scenario_id : f.case_params[key]) = std::get<std::string>(value);
    }
  }
  if (h5::exists(id, "reference/out")) {
    h5::Handle r(H5Gopen2(id, "reference", H5P_DEFAULT), H5Gclose, "open /reference");
    if (H5Aexists(r.id(), "source") > 0) f.reference_source = h5::read_string_attr(r.id(), "source");
    f.reference = read_shaped<double>(id, path, "reference/out", shape(f, f.heads_q), h5::read_doubles);
    if (h5::exists(id, "reference/lse"))
      f.reference_lse = read_shaped<double>(id, path, "reference/lse",
                                            {static_cast<hsize_t>(f.tokens), static_cast<hsize_t>(f.heads_q)},
                                            h5::read_doubles);
    if (h5::exists(id, "reference/baseline"))
      f.baseline = read_shaped<float>(id, path, "reference/baseline", shape(f, f.heads_q), h5::read_floats);
  }
  if (h5::exists(id, "duts")) read_dut_outputs(id, path, f);
  return f;
}

}  // namespace swa::harness
