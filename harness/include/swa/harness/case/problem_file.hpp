#pragma once
// The problem file: one HDF5 layout for every file that holds a problem's tensors, written and read
// here alone (harness/README.md, "Problem files"). The exec protocol's request is its inputs part; a
// `golden` file adds the case and the reference; a results dump and bisect's repro.h5 add the DUTs'
// outputs and their per-element error.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "swa/harness/base/h5.hpp"
#include "swa/harness/case/scenario.hpp"
#include "swa/kernel_fields.hpp"
#include "swa/params.hpp"

namespace swa::harness {

// Root attribute `problem_file_format`; a file without it predates the format and is refused by name.
inline constexpr std::int64_t kProblemFileFormat = 1;

// The exec protocol (duts/exec_dut.hpp) by version; a request says the lowest its case needs: 2 plus
// the highest swa/dut_v2.h minor version whose fields the case uses (swa/kernel_fields.hpp).
// 2: the response carries the KV cache (/cache). 3 (2.1): the request adds attribute softcap and
// dataset /sinks; sent only for cases that use them, so a DUT that speaks 2 keeps running every other
// case. 4 (2.2): the request adds attributes kv_format, k_descale and v_descale, and /cache holds FP8
// codes; sent only for FP8 KV cases. 5 (2.3): the request adds attributes page_size, pool_pages,
// table_width and dataset /page_tables (the page table each call sees), and /cache/k and /cache/v are
// the page pool; sent only for paged KV cases.
inline constexpr int kExecProtocolBase = 2;
inline constexpr int kExecProtocolVersion = kExecProtocolBase + kKernelFieldsLatestMinor;

enum class ProblemFileKind { request, golden, dump, repro };
inline constexpr ProblemFileKind kAllProblemFileKinds[] = {ProblemFileKind::request, ProblemFileKind::golden,
                                                           ProblemFileKind::dump, ProblemFileKind::repro};
const char* problem_file_kind_name(ProblemFileKind k);

struct ProblemFile {
  ProblemFileKind kind = ProblemFileKind::request;

  // Inputs, as the kernel reads them: dtype-rounded values, [tokens, heads, head_size].
  std::int64_t tokens = 0;
  int heads_q = 0, heads_kv = 0, head_size = 0;
  std::vector<float> q, k, v;
  std::vector<std::int32_t> seq_lens, prompt_lens;
  std::vector<float> mask;  // [mask_rows, mask_rows] when the kernel gets an ATB mask
  std::int64_t mask_rows = 0;
  std::vector<float> sinks;  // [heads_q] when the layer has attention sinks
  // A paged KV cache's page table as each call of the schedule sees it (its pages taken),
  // [calls, batch, table_width], -1 = no page (swa/paging.hpp).
  std::vector<std::int32_t> page_tables;
  // The kernel's parameters by the exec protocol's names (dtype, mode, window_left, scale, ...).
  std::map<std::string, h5::AttrValue> kernel;
  // The exec protocol version a request for this problem carries (kExecProtocolBase + the minor
  // version its fields need); problem_inputs sets it.
  int protocol = kExecProtocolBase;

  // The case it is (golden, dump, repro): its ID and every case parameter by its sweep-file key.
  std::string scenario_id;
  std::map<std::string, std::string> case_params;

  // The reference: the fp64 golden's output and row log-sum-exp, the same-precision baseline.
  std::vector<double> reference, reference_lse;
  std::vector<float> baseline;
  std::string reference_source = "golden";  // or the DUT bisect compared against

  // DUT outputs (dump, repro), keyed by the DUT's index in the run; the file adds each one's
  // per-element error, out - reference.
  struct DutOutput {
    int index = 0;
    std::string dut;
    std::vector<float> out;
    std::map<std::string, h5::AttrValue> attributes;  // threshold, ...
  };
  std::vector<DutOutput> duts;

  // Bisect's finding (repro): its class and evidence, and when it came from the recovered
  // attention, the fitted rows' weights against the golden's over every candidate key.
  struct Diagnosis {
    std::string name, source;
    std::vector<std::string> evidence;
    std::string confidence, why;  // high | medium | abstained, and why
    // The ablation, a row per feature turned off or swapped.
    struct AblationRow {
      std::string feature, change, outcome, case_id;
      bool inputs_redrawn = false;
    };
    std::vector<AblationRow> ablation;
    std::string fitted_case;                      // the case the rows were fitted at (head size may differ)
    std::vector<std::int32_t> rows;               // [R, 3]: sequence, token, query head
    std::vector<std::int32_t> candidates;         // [N, 3]: sequence, position, kv head
    std::vector<double> weights, golden_weights;  // [R, N]
  };
  std::optional<Diagnosis> diagnosis;
};


// The inputs part, read through the params' strides and dtype (what any DUT is given).
ProblemFile problem_inputs(const AttnParams& p);
// The same with Q, K and V given as the values the file holds, [tokens, heads, head_size] (a
// problem's float tensors, moved in instead of read back through the strides).
ProblemFile problem_inputs(const AttnParams& p, std::vector<float> q, std::vector<float> k, std::vector<float> v);
// Adds the case: its ID and parameters.
void describe_case(ProblemFile& f, const Scenario& s);

// Written to a temporary and renamed into place. Throws h5::Error.
void write_problem_file(const std::filesystem::path& path, const ProblemFile& f);
// Throws h5::Error naming the file and what is wrong: not a problem file, a file that predates the
// format, a newer format, a missing or misshapen tensor.
ProblemFile read_problem_file(const std::filesystem::path& path);

// The kernel's parameters back from a file's attributes (`f.kernel`, by the field list's exec names;
// batch and sequence lengths from /seq_lens); its tensor pointers are null, its strides those of
// contiguous [tokens, heads, head_size] rows. An appended field (2.x) left out keeps its default, as
// a request for an older protocol leaves it out. Throws h5::Error naming `path` and the attribute
// when one of 2.0's is missing, has the wrong type, or holds a name outside its allowed values.
// The AttnParams points into `f.seq_lens` and a kept offsets vector: use it while `f` and `offsets` live.
AttnParams kernel_params(const ProblemFile& f, const std::filesystem::path& path, std::vector<std::int64_t>& offsets);

}  // namespace swa::harness
