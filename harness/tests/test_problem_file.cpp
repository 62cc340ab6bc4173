#define BOOST_TEST_MODULE harness_problem_file
#include <boost/test/unit_test.hpp>
#include <filesystem>

#include "scratch_dir.hpp"
#include "swa/harness/judge/evaluate.hpp"
#include "swa/harness/case/problem_file.hpp"
#include "swa/kernel_fields.hpp"

namespace fs = std::filesystem;
using namespace swa;
using namespace swa::harness;

namespace {
const swa::test::ScratchDir scratch_dir("swa_problem_file_test");

fs::path scratch(const std::string& name) { return scratch_dir / name; }

Scenario decode_case() {
  Scenario s;
  s.mode = RunMode::decode;
  s.prompt_lens = {5, 9};
  s.heads = 4;
  s.kv_heads = 2;
  s.head_size = 16;
  s.window = 3;
  s.chunk = 2;
  s.decode_steps = 3;
  s.dtype = DType::bf16;
  s.seed = 7;
  return s;
}

std::string refusal(const fs::path& path) {
  try {
    read_problem_file(path);
  } catch (const h5::Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

BOOST_AUTO_TEST_CASE(a_dump_reads_back_whole) {
  const Scenario s = decode_case();
  const Reference ref(s);
  ProblemFile f = problem_inputs(ref.problem.params);
  f.kind = ProblemFileKind::dump;
  describe_case(f, s);
  f.reference = ref.golden.out;
  f.reference_lse = ref.golden.lse;
  f.baseline = ref.baseline();
  f.duts.push_back({3, "exec:./my kernel --x", ref.baseline(), {{"verdict", std::string("fail")}}});
  const fs::path path = scratch("dump.h5");
  write_problem_file(path, f);

  const ProblemFile r = read_problem_file(path);
  BOOST_TEST((r.kind == ProblemFileKind::dump));
  BOOST_TEST(r.tokens == 5 + 9 + 2 * 3);
  BOOST_TEST(r.q == ref.problem.q);  // the dtype-rounded inputs, exactly
  BOOST_TEST(r.k == ref.problem.k);
  BOOST_TEST(r.v == ref.problem.v);
  BOOST_TEST((r.seq_lens == std::vector<std::int32_t>{8, 12}));
  BOOST_TEST((r.prompt_lens == std::vector<std::int32_t>{5, 9}));
  BOOST_TEST(r.scenario_id == s.id());
  BOOST_TEST(r.case_params.at("batch") == "5,9");
  BOOST_TEST(std::get<std::int64_t>(r.kernel.at("window_left")) == 2);
  BOOST_TEST(std::get<std::string>(r.kernel.at("dtype")) == "bf16");
  BOOST_TEST(std::get<std::int64_t>(r.kernel.at("cache_slots")) == 3);
  BOOST_TEST(r.reference == ref.golden.out);
  BOOST_TEST(r.reference_lse == ref.golden.lse);
  BOOST_TEST(r.reference_source == "golden");
  BOOST_REQUIRE(r.duts.size() == 1u);
  BOOST_TEST(r.duts[0].index == 3);
  BOOST_TEST(r.duts[0].dut == "exec:./my kernel --x");
  BOOST_TEST(r.duts[0].out == ref.baseline());
  BOOST_TEST(std::get<std::string>(r.duts[0].attributes.at("verdict")) == "fail");
  // The per-element error the file adds is out - reference.
  h5::Handle file = h5::open_file_readonly(path);
  const std::vector<double> error = h5::read_doubles(file.id(), "duts/3/error");
  for (std::size_t i = 0; i < error.size(); ++i)
    BOOST_REQUIRE(error[i] == static_cast<double>(ref.baseline()[i]) - ref.golden.out[i]);
}

BOOST_AUTO_TEST_CASE(a_consumed_reference_gives_the_same_file_as_a_kept_one) {
  // The golden command moves the problem's float tensors into its file instead of reading them back
  // through the strides: the same values either way, GQA, a ragged batch and bf16 included.
  const Scenario s = decode_case();
  const Reference kept(s);
  const ProblemFile want = problem_file(s, kept, ProblemFileKind::golden);
  Reference consumed(s);
  const ProblemFile got = problem_file(s, std::move(consumed), ProblemFileKind::golden);
  BOOST_TEST(got.q == want.q);
  BOOST_TEST(got.k == want.k);
  BOOST_TEST(got.v == want.v);
  BOOST_TEST(got.reference == want.reference);
  BOOST_TEST(got.baseline == want.baseline);
  BOOST_TEST(got.q.size() == static_cast<std::size_t>(got.tokens) * 4 * 16);
  // Tensors of the wrong shape are refused, not written.
  BOOST_CHECK_THROW(problem_inputs(kept.problem.params, want.q, want.k, {}), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(a_request_is_the_inputs_part) {
  const Reference ref(decode_case());
  const fs::path path = scratch("request.h5");
  write_problem_file(path, problem_inputs(ref.problem.params));
  const ProblemFile r = read_problem_file(path);
  BOOST_TEST((r.kind == ProblemFileKind::request));
  BOOST_TEST(r.reference.empty());
  BOOST_TEST(r.duts.empty());
  BOOST_TEST(r.scenario_id.empty());
  h5::Handle file = h5::open_file_readonly(path);
  BOOST_TEST(h5::read_int_attr(file.id(), "protocol_version") == 2);
}

// The request's kernel attributes and its protocol version follow the field list
// (swa/kernel_fields.hpp): a 2.x minor version's attributes only for a case that uses them, and the
// version 2 + the highest minor version the case uses.
BOOST_AUTO_TEST_CASE(a_request_carries_each_versions_attributes_only_when_used) {
  struct Expected {
    const char* what;
    void (*set)(Scenario&);
    std::int64_t version;
    std::vector<const char*> present, absent;
  };
  const std::vector<Expected> cases = {
      {"plain", [](Scenario&) {}, 2, {"window_left", "scale", "cache", "mask_block"},
       {"softcap", "kv_format", "k_descale", "page_size", "pool_pages"}},
      {"soft-cap", [](Scenario& s) { s.softcap = 30.f; }, 3, {"softcap"}, {"kv_format", "page_size"}},
      {"sinks", [](Scenario& s) { s.sinks = Sinks::learned; }, 3, {"softcap"}, {"kv_format", "page_size"}},
      {"FP8 KV", [](Scenario& s) { s.kv_dtype = KvFormat::fp8_e4m3; }, 4, {"kv_format", "k_descale", "v_descale"},
       {"softcap", "page_size"}},
      {"paged", [](Scenario& s) { s.cache = CachePolicy::paged; }, 5, {"page_size", "pool_pages", "table_width"},
       {"softcap", "kv_format"}},
      {"paged FP8 with sinks",
       [](Scenario& s) {
         s.cache = CachePolicy::paged;
         s.kv_dtype = KvFormat::fp8_e5m2;
         s.sinks = Sinks::learned;
       },
       5, {"page_size", "kv_format", "softcap"}, {}},
  };
  for (const Expected& c : cases) {
    BOOST_TEST_CONTEXT(c.what) {
      Scenario s = decode_case();
      s.dtype = DType::fp32;
      c.set(s);
      const Reference ref(s);
      const fs::path path = scratch("request_versions.h5");
      write_problem_file(path, problem_inputs(ref.problem.params));
      h5::Handle file = h5::open_file_readonly(path);
      BOOST_TEST(h5::read_int_attr(file.id(), "protocol_version") == c.version);
      const ProblemFile r = read_problem_file(path);
      BOOST_TEST(r.protocol == c.version);
      for (const char* name : c.present) BOOST_TEST(r.kernel.count(name) == 1u, name << " is missing");
      for (const char* name : c.absent) BOOST_TEST(r.kernel.count(name) == 0u, name << " is sent");
      // Every 2.0 field with an exec name is always there, by its protocol name.
      for (const char* name : {"dtype", "mode", "heads", "kv_heads", "head_size", "window_right", "chunk",
                               "decode_steps", "mask_format", "mask_effective_window"})
        BOOST_TEST(r.kernel.count(name) == 1u, name << " is missing");
    }
  }
}

// The attributes read back (kernel_params) give the kernel fields that were written, for every field
// the request carries, in cases that use each minor version.
BOOST_AUTO_TEST_CASE(a_requests_attributes_read_back_to_the_kernels_fields) {
  const std::vector<void (*)(Scenario&)> cases = {
      [](Scenario&) {},
      [](Scenario& s) { s.mode = RunMode::prefill; s.window = 0; s.window_right = 4; },
      [](Scenario& s) { s.softcap = 30.f; s.sinks = Sinks::learned; },
      [](Scenario& s) { s.kv_dtype = KvFormat::fp8_e4m3; },
      [](Scenario& s) { s.cache = CachePolicy::paged; s.kv_dtype = KvFormat::fp8_e5m2; },
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    BOOST_TEST_CONTEXT("case " << i) {
      Scenario s = decode_case();
      cases[i](s);
      const Reference ref(s);
      const AttnParams& p = ref.problem.params;
      const fs::path path = scratch("round_trip.h5");
      write_problem_file(path, problem_inputs(p));
      const ProblemFile f = read_problem_file(path);
      std::vector<std::int64_t> offsets;
      const AttnParams got = kernel_params(f, path, offsets);
#define SWA_SAME_FIELD(field, member, minor, exec) \
  if constexpr (sizeof(exec) != 1) BOOST_TEST((got.member == p.member), exec << " differs");
      SWA_KERNEL_FIELDS(SWA_SAME_FIELD)
#undef SWA_SAME_FIELD
      BOOST_TEST(got.batch == p.batch);
      for (int b = 0; b <= p.batch; ++b) BOOST_TEST(got.seq_offsets[b] == p.seq_offsets[b]);
      BOOST_TEST(got.q == nullptr);
    }
  }
}

BOOST_AUTO_TEST_CASE(attributes_a_writer_could_not_have_written_are_refused_by_name) {
  const Reference ref(decode_case());
  const fs::path path = scratch("bad_attrs.h5");
  auto refusal_of = [&](void (*spoil)(ProblemFile&)) {
    ProblemFile f = problem_inputs(ref.problem.params);
    spoil(f);
    write_problem_file(path, f);
    const ProblemFile back = read_problem_file(path);
    std::vector<std::int64_t> offsets;
    try {
      kernel_params(back, path, offsets);
    } catch (const h5::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  BOOST_TEST(refusal_of([](ProblemFile& f) { f.kernel["mode"] = std::string("sideways"); }) ==
             path.string() + ": root attribute mode is 'sideways', not one of prefill|chunked_prefill|decode");
  BOOST_TEST(refusal_of([](ProblemFile& f) { f.kernel.erase("scale"); }) ==
             path.string() + ": root attribute scale is missing");
  BOOST_TEST(refusal_of([](ProblemFile& f) { f.kernel["chunk"] = 2.5; }) ==
             path.string() + ": root attribute chunk is not an integer");
  BOOST_TEST(refusal_of([](ProblemFile& f) { f.kernel["decode_steps"] = std::int64_t{1} << 40; }) ==
             path.string() + ": root attribute decode_steps is 1099511627776, out of range");
  BOOST_TEST(refusal_of([](ProblemFile&) {}).empty());
}

BOOST_AUTO_TEST_CASE(files_that_are_not_this_format_are_refused_by_name) {
  const fs::path old = scratch("old.h5");
  {
    h5::AtomicFile f(old);
    h5::write_dataset(f.id(), "q", std::vector<float>{1.f}, {1, 1, 1});
    h5::write_attr(f.id(), "scenario_id", std::string("mode=prefill/..."));
    f.commit();
  }
  BOOST_TEST(refusal(old).find(old.string() + ": predates the problem file format") != std::string::npos);

  const fs::path newer = scratch("newer.h5");
  {
    h5::AtomicFile f(newer);
    h5::write_attr(f.id(), "problem_file_format", std::int64_t{2});
    f.commit();
  }
  BOOST_TEST(refusal(newer).find("is problem file format 2, newer than this swa-harness reads (1)") != std::string::npos);

  // A misshapen tensor is named with its shape and the shape it should have.
  const Reference ref(decode_case());
  ProblemFile f = problem_inputs(ref.problem.params);
  f.v.resize(f.v.size() / 2);
  const fs::path bad = scratch("bad.h5");
  BOOST_CHECK_THROW(write_problem_file(bad, f), h5::Error);  // the writer checks shapes too
  BOOST_TEST(!fs::exists(bad));
  BOOST_TEST(refusal(scratch("missing.h5")).find("missing.h5: no such file") != std::string::npos);
}
