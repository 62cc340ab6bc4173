#include "swa/harness/store/results_file.hpp"

#include "swa/harness/base/durable_file.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <functional>
#include <ctime>
#include <fstream>
#include <set>
#include <optional>
#include <variant>

#include "swa/harness/base/h5.hpp"
#include "swa/harness/base/join.hpp"
#include "swa/platform/child_process.hpp"

namespace fs = std::filesystem;

namespace swa::harness {

namespace {

// ---- compound tables from a column list ------------------------------------------------------
// A column names a cell of a row: a std::string (variable-length UTF-8 on disk), std::int64_t, double,
// or a Verdict (an HDF5 enum over int64 whose names are the verdicts; files written before it hold the
// name as a string and still read).
template <class Row>
struct Column {
  using Cell = std::variant<std::string*, std::int64_t*, double*, Verdict*>;
  std::string name;
  std::function<Cell(Row&)> cell;

  template <class T>
  Column(const char* n, T Row::*member) : name(n), cell([member](Row& r) -> Cell { return &(r.*member); }) {}
  Column(std::string n, std::function<Cell(Row&)> c) : name(std::move(n)), cell(std::move(c)) {}
};

// The scenario's ID and sweep, then one column per case parameter in the table's order, then the counts.
const std::vector<Column<ScenarioRow>>& scenario_columns() {
  using R = ScenarioRow;
  static const std::vector<Column<R>> c = [] {
    std::vector<Column<R>> cols = {{"id", &R::id}, {"sweep", &R::sweep}};
    const auto& params = case_params();
    for (std::size_t i = 0; i < params.size(); ++i)
      cols.emplace_back(std::string(params[i].column), [i, type = params[i].column_type](R& r) -> Column<R>::Cell {
        if (type == ColumnType::int64) return &r.params.ints[i];
        return &r.params.text[i];
      });
    cols.emplace_back("batch", &R::batch);
    cols.emplace_back("tokens", &R::tokens);
    cols.emplace_back("k_descale", &R::k_descale);
    cols.emplace_back("v_descale", &R::v_descale);
    cols.emplace_back("pool_pages", &R::pool_pages);
    return cols;
  }();
  return c;
}

const std::vector<Column<ResultRow>>& result_columns() {
  using R = ResultRow;
  static const std::vector<Column<R>> c = {
      {"scenario_id", &R::scenario_id}, {"dut", &R::dut}, {"dut_label", &R::dut_label}, {"dut_path", &R::dut_path},
      {"status", &R::status}, {"reason", &R::reason},
      {"dtype", &R::dtype}, {"mode", &R::mode},
      {"max_abs", &R::max_abs}, {"max_rel", &R::max_rel}, {"rel_floor", &R::rel_floor}, {"mean_abs", &R::mean_abs},
      {"rms", &R::rms}, {"rel_l2", &R::rel_l2}, {"nmse", &R::nmse}, {"cosine", &R::cosine},
      {"max_ulp", &R::max_ulp}, {"mean_ulp", &R::mean_ulp}, {"over_threshold", &R::over_threshold},
      {"nan_count", &R::nan_count}, {"inf_count", &R::inf_count},
      {"worst_seq", &R::worst_seq}, {"worst_token", &R::worst_token}, {"worst_head", &R::worst_head},
      {"worst_dim", &R::worst_dim}, {"worst_window_edge", &R::worst_window_edge},
      {"baseline_max_abs", &R::baseline_max_abs}, {"baseline_rel_l2", &R::baseline_rel_l2},
      {"baseline_mean_ulp", &R::baseline_mean_ulp},
      {"rtol_factor", &R::rtol_factor}, {"atol_floor", &R::atol_floor}, {"threshold", &R::threshold},
      {"run_ms", &R::run_ms}, {"cache_mismatches", &R::cache_mismatches},
      {"profile", &R::profile}, {"worst_phase", &R::worst_phase}, {"l2_factor", &R::l2_factor},
      {"l2_floor", &R::l2_floor}, {"warn_l2_factor", &R::warn_l2_factor}, {"nmse_max", &R::nmse_max},
      {"max_margin", &R::max_margin}, {"l2_margin", &R::l2_margin}, {"l2_ratio", &R::l2_ratio},
  };
  return c;
}

const std::vector<Column<PerfRow>>& perf_columns() {
  using R = PerfRow;
  static const std::vector<Column<R>> c = {
      {"scenario_id", &R::scenario_id}, {"dut", &R::dut}, {"dut_label", &R::dut_label}, {"mode", &R::mode},
      {"dtype", &R::dtype},
      {"cache", &R::cache}, {"tokens", &R::tokens}, {"window", &R::window}, {"head_size", &R::head_size},
      {"heads", &R::heads}, {"kv_heads", &R::kv_heads}, {"batch", &R::batch}, {"repeats", &R::repeats},
      {"pairs", &R::pairs}, {"kv_bytes", &R::kv_bytes}, {"time_ms", &R::time_ms}, {"min_ms", &R::min_ms},
      {"max_ms", &R::max_ms}, {"gflops", &R::gflops}, {"ceiling_gflops", &R::ceiling_gflops},
      {"ceiling_fraction", &R::ceiling_fraction}, {"ceiling", &R::ceiling}, {"timer", &R::timer},
      {"triad_gbs", &R::triad_gbs},
  };
  return c;
}

// Every column is 8 bytes on disk and in memory: a char* (variable-length UTF-8), int64 or double.
constexpr std::size_t kCell = 8;

h5::Handle string_type() {
  h5::Handle t(H5Tcopy(H5T_C_S1), H5Tclose, "string type");
  H5Tset_size(t.id(), H5T_VARIABLE);
  H5Tset_cset(t.id(), H5T_CSET_UTF8);
  return t;
}

h5::Handle verdict_type() {
  h5::Handle t(H5Tenum_create(H5T_NATIVE_INT64), H5Tclose, "verdict enum type");
  for (Verdict v : kAllVerdicts) {
    const auto value = static_cast<std::int64_t>(v);
    if (H5Tenum_insert(t.id(), std::string(verdict_name(v)).c_str(), &value) < 0) throw h5::Error("HDF5: enum member");
  }
  return t;
}

// verdict_as_text: the layout of files written before the verdict was an enum.
template <class Row>
h5::Handle compound_type(const std::vector<Column<Row>>& cols, bool verdict_as_text = false) {
  h5::Handle t(H5Tcreate(H5T_COMPOUND, cols.size() * kCell), H5Tclose, "compound type");
  const h5::Handle str = string_type();
  const h5::Handle verdict = verdict_type();
  Row probe;
  for (std::size_t i = 0; i < cols.size(); ++i) {
    const auto cell = cols[i].cell(probe);
    const hid_t member = std::holds_alternative<std::string*>(cell)    ? str.id()
                         : std::holds_alternative<Verdict*>(cell)      ? (verdict_as_text ? str.id() : verdict.id())
                         : std::holds_alternative<std::int64_t*>(cell) ? H5T_NATIVE_INT64
                                                                       : H5T_NATIVE_DOUBLE;
    if (H5Tinsert(t.id(), cols[i].name.c_str(), i * kCell, member) < 0) throw h5::Error("HDF5: compound member");
  }
  return t;
}

// Whether a file's table holds its verdict columns as strings (written before the enum).
template <class Row>
bool verdict_stored_as_text(hid_t set, const std::vector<Column<Row>>& cols) {
  h5::Handle file_type(H5Dget_type(set), H5Tclose, "table type");
  Row probe;
  for (const auto& c : cols) {
    if (!std::holds_alternative<Verdict*>(c.cell(probe))) continue;
    const int index = H5Tget_member_index(file_type.id(), c.name.c_str());
    if (index >= 0 && H5Tget_member_class(file_type.id(), static_cast<unsigned>(index)) == H5T_STRING) return true;
  }
  return false;
}

template <class Row>
void write_table(hid_t file, const char* name, const std::vector<Column<Row>>& cols, const std::vector<Row>& rows) {
  const h5::Handle type = compound_type(cols);
  std::vector<unsigned char> buf(rows.size() * cols.size() * kCell);
  for (std::size_t r = 0; r < rows.size(); ++r)
    for (std::size_t c = 0; c < cols.size(); ++c) {
      unsigned char* cell = &buf[(r * cols.size() + c) * kCell];
      std::visit(
          [&](auto value) {
            if constexpr (std::is_same_v<decltype(value), std::string*>) {
              const char* p = value->c_str();
              std::memcpy(cell, &p, kCell);
            } else if constexpr (std::is_same_v<decltype(value), Verdict*>) {
              const auto v = static_cast<std::int64_t>(*value);
              std::memcpy(cell, &v, kCell);
            } else {
              std::memcpy(cell, value, kCell);
            }
          },
          cols[c].cell(const_cast<Row&>(rows[r])));  // read only: the accessor is shared with read_table
    }
  const hsize_t dims[1] = {rows.size()}, maxdims[1] = {H5S_UNLIMITED}, chunk[1] = {64};
  h5::Handle space(H5Screate_simple(1, dims, maxdims), H5Sclose, "table space");
  h5::Handle props(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "table properties");
  H5Pset_chunk(props.id(), 1, chunk);
  H5Pset_fletcher32(props.id());  // a damaged chunk fails its read instead of giving wrong rows
  h5::Handle set(H5Dcreate2(file, name, type.id(), space.id(), H5P_DEFAULT, props.id(), H5P_DEFAULT), H5Dclose,
                 std::string("create table ") + name);
  if (!rows.empty() && H5Dwrite(set.id(), type.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) < 0)
    throw h5::Error(std::string("HDF5: write table ") + name);
}

// `held`, when given, says which of `cols` the file's table has: a column added after the file was
// written reads as empty or 0 and is left out of its digest.
template <class Row>
std::vector<Row> read_table(hid_t file, const char* name, const std::vector<Column<Row>>& cols,
                            std::vector<bool>* held = nullptr) {
  h5::Handle set(H5Dopen2(file, name, H5P_DEFAULT), H5Dclose, std::string("open table ") + name);
  if (held) {
    h5::Handle file_type(H5Dget_type(set.id()), H5Tclose, "table type");
    held->clear();
    for (const auto& c : cols) held->push_back(H5Tget_member_index(file_type.id(), c.name.c_str()) >= 0);
  }
  h5::Handle space(H5Dget_space(set.id()), H5Sclose, "table space");
  hsize_t n = 0;
  H5Sget_simple_extent_dims(space.id(), &n, nullptr);
  std::vector<Row> rows(n);
  if (n == 0) return rows;
  const bool legacy = verdict_stored_as_text(set.id(), cols);
  const h5::Handle type = compound_type(cols, legacy);
  std::vector<unsigned char> buf(n * cols.size() * kCell);
  std::optional<std::string> bad_verdict;
  if (H5Dread(set.id(), type.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) < 0)
    throw h5::Error(std::string("HDF5: read table ") + name +
                    " (damaged: its checksum or structure does not verify; or written by another version)");
  for (std::size_t r = 0; r < n; ++r)
    for (std::size_t c = 0; c < cols.size(); ++c) {
      const unsigned char* cell = &buf[(r * cols.size() + c) * kCell];
      std::visit(
          [&](auto value) {
            if constexpr (std::is_same_v<decltype(value), std::string*>) {
              const char* p = nullptr;
              std::memcpy(&p, cell, kCell);
              *value = p ? p : "";
            } else if constexpr (std::is_same_v<decltype(value), Verdict*>) {
              std::optional<Verdict> v;
              if (legacy) {
                const char* p = nullptr;
                std::memcpy(&p, cell, kCell);
                v = parse_verdict(p ? p : "");
                if (!v) bad_verdict = p ? p : "";
              } else {
                std::int64_t code = 0;
                std::memcpy(&code, cell, kCell);
                for (Verdict known : kAllVerdicts)
                  if (static_cast<std::int64_t>(known) == code) v = known;
                if (!v) bad_verdict = std::to_string(code);
              }
              *value = v.value_or(Verdict::error);
            } else {
              std::memcpy(value, cell, kCell);
            }
          },
          cols[c].cell(rows[r]));
    }
  H5Dvlen_reclaim(type.id(), space.id(), H5P_DEFAULT, buf.data());
  if (bad_verdict)
    throw h5::Error(std::string("table ") + name + ": status '" + *bad_verdict + "' is not one of pass|warn|fail|skip|error");
  return rows;
}

// ---- meta ------------------------------------------------------------------------------------
std::vector<std::pair<const char*, std::string Meta::*>> meta_fields() {
  return {{"tool_version", &Meta::tool_version}, {"git_commit", &Meta::git_commit}, {"compiler", &Meta::compiler},
          {"host", &Meta::host},                 {"cpu", &Meta::cpu},               {"gpu", &Meta::gpu},
          {"start_time", &Meta::start_time},     {"sweep_file", &Meta::sweep_file}, {"sweep_text", &Meta::sweep_text},
          {"command", &Meta::command}};
}

std::map<std::string, fs::path> read_dump_links(hid_t file, const fs::path& results_path) {
  std::map<std::string, fs::path> links;
  if (H5Lexists(file, "dumps", H5P_DEFAULT) <= 0) return links;
  struct Visit {
    std::map<std::string, fs::path>* links;
    fs::path dir;
  } visit{&links, fs::absolute(results_path).parent_path()};
  h5::Handle group(H5Gopen2(file, "dumps", H5P_DEFAULT), H5Gclose, "open /dumps");
  H5Lvisit(
      group.id(), H5_INDEX_NAME, H5_ITER_NATIVE,
      [](hid_t g, const char* name, const H5L_info_t* info, void* data) -> herr_t {
        if (info->type != H5L_TYPE_EXTERNAL) return 0;
        std::vector<char> value(info->u.val_size);
        if (H5Lget_val(g, name, value.data(), value.size(), H5P_DEFAULT) < 0) return -1;
        const char* target_file = nullptr;
        const char* target_object = nullptr;
        unsigned flags = 0;
        H5Lunpack_elink_val(value.data(), value.size(), &flags, &target_file, &target_object);
        auto* v = static_cast<Visit*>(data);
        (*v->links)[name] = fs::path(target_file).is_absolute() ? fs::path(target_file) : v->dir / target_file;
        return 0;
      },
      &visit);
  return links;
}

}  // namespace

// The ID with '/' replaced; a long ID (a drawn batch of many sequences) is cut and given a hash of
// the whole ID, so the name stays within a file system's 255 bytes and unique.
std::string dump_file_name(const std::string& id) {
  std::string name = id;
  std::replace(name.begin(), name.end(), '/', '_');
  if (name.size() > 180) {
    char hash[17];
    std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(std::hash<std::string>{}(id)));
    name = name.substr(0, 160) + "-" + hash;
  }
  return name + ".h5";
}

fs::path dumps_dir(const fs::path& results) { return fs::path(results.string() + ".dumps"); }

namespace {

const char* const kRowCounts[][2] = {{"scenarios", "rows_scenarios"}, {"results", "rows_results"}, {"perf", "rows_perf"}};
const char* const kDigests[] = {"digest_scenarios", "digest_results", "digest_perf"};

std::int64_t meta_digest(const Meta& m) {
  std::uint64_t h = 1469598103934665603ull;
  for (const auto& [name, member] : meta_fields())
    for (const char ch : m.*member + '\0') h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  std::int64_t out;
  std::memcpy(&out, &h, sizeof out);
  return out;
}

// FNV-1a over every cell of a table as this code sees it. The chunks carry Fletcher-32, but the
// variable-length strings live in HDF5's global heap, which carries no checksum: a damaged heap
// once read back as other strings, or bytes that are not UTF-8, without any error.
// Over the columns the file holds (`held`; all when empty), so a file written before a column was
// added still verifies.
template <class Row>
std::int64_t table_digest(const std::vector<Column<Row>>& cols, const std::vector<Row>& rows,
                          const std::vector<bool>& held = {}) {
  std::uint64_t h = 1469598103934665603ull;
  auto add = [&](const void* p, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) h = (h ^ static_cast<const unsigned char*>(p)[i]) * 1099511628211ull;
  };
  for (const Row& row : rows)
    for (std::size_t i = 0; i < cols.size(); ++i) {
      if (!held.empty() && !held[i]) continue;
      const auto& col = cols[i];
      std::visit(
          [&](auto value) {
            if constexpr (std::is_same_v<decltype(value), std::string*>) {
              const std::uint64_t n = value->size();
              add(&n, sizeof n);
              add(value->data(), value->size());
            } else if constexpr (std::is_same_v<decltype(value), Verdict*>) {
              const auto v = static_cast<std::int64_t>(*value);
              add(&v, sizeof v);
            } else {
              add(value, sizeof *value);
            }
          },
          col.cell(const_cast<Row&>(row)));  // read only
    }
  std::int64_t out;
  std::memcpy(&out, &h, sizeof out);
  return out;
}

ResultsContents read_results_unchecked(const fs::path& path) {
  h5::Handle f = h5::open_file_readonly(path);
  ResultsContents c;
  h5::Handle meta(H5Gopen2(f.id(), "meta", H5P_DEFAULT), H5Gclose, "open /meta of " + path.string());
  for (const auto& [name, member] : meta_fields()) c.meta.*member = h5::read_string_attr(meta.id(), name);
  if (H5Aexists(meta.id(), "cpu_kernels") > 0) c.meta.cpu_kernels = h5::read_string_attr(meta.id(), "cpu_kernels");
  std::vector<bool> columns_held[3];
  c.scenarios = read_table(f.id(), "scenarios", scenario_columns(), &columns_held[0]);
  c.results = read_table(f.id(), "results", result_columns(), &columns_held[1]);
  if (H5Lexists(f.id(), "perf", H5P_DEFAULT) > 0) c.perf = read_table(f.id(), "perf", perf_columns(), &columns_held[2]);
  c.dump_files = read_dump_links(f.id(), path);
  // Files written before dut_label: derived from dut, by the rule run applies (results.hpp).
  auto derive_labels = [](auto& rows, const auto& cols, const std::vector<bool>& held) {
    for (std::size_t i = 0; i < cols.size() && i < held.size(); ++i)
      if (cols[i].name == "dut_label" && !held[i])
        for (auto& r : rows) r.dut_label = dut_label(r.dut);
  };
  derive_labels(c.results, result_columns(), columns_held[1]);
  derive_labels(c.perf, perf_columns(), columns_held[2]);
  // Files since the checksums record their row counts: a table cut short is damage, not a result.
  const std::size_t held[] = {c.scenarios.size(), c.results.size(), c.perf.size()};
  for (std::size_t i = 0; i < 3; ++i)
    if (H5Aexists(meta.id(), kRowCounts[i][1]) > 0) {
      const std::int64_t expected = h5::read_int_attr(meta.id(), kRowCounts[i][1]);
      if (expected != static_cast<std::int64_t>(held[i]))
        throw h5::Error(std::string("/") + kRowCounts[i][0] + " holds " + std::to_string(held[i]) + " rows but /meta " +
                        kRowCounts[i][1] + " says " + std::to_string(expected) + ": the file is damaged");
    }
  const std::int64_t digests[] = {table_digest(scenario_columns(), c.scenarios, columns_held[0]),
                                  table_digest(result_columns(), c.results, columns_held[1]),
                                  table_digest(perf_columns(), c.perf, columns_held[2])};
  if (H5Aexists(meta.id(), "digest_meta") > 0 && h5::read_int_attr(meta.id(), "digest_meta") != meta_digest(c.meta))
    throw h5::Error("/meta does not match its digest (digest_meta): the file is damaged");
  for (std::size_t i = 0; i < 3; ++i)
    if (H5Aexists(meta.id(), kDigests[i]) > 0 && h5::read_int_attr(meta.id(), kDigests[i]) != digests[i])
      throw h5::Error(std::string("/") + kRowCounts[i][0] + " does not match its digest in /meta (" + kDigests[i] +
                      "): the file is damaged");
  std::set<std::string> ids;
  for (const auto& s : c.scenarios) {
    if (s.id.empty()) throw h5::Error("/scenarios has a row with an empty scenario_id: the file is damaged");
    ids.insert(s.id);
  }
  for (const auto& r : c.results)
    if (r.dut.empty() || !ids.count(r.scenario_id))
      throw h5::Error("/results row (" + r.scenario_id + ", " + r.dut + ") has " +
                      (r.dut.empty() ? std::string("no DUT") : "no /scenarios row") + ": the file is damaged");
  return c;
}

}  // namespace
// Declared by the sanitizer runtimes when one is linked (weak: absent otherwise).
extern "C" void __sanitizer_set_death_callback(void (*)(void)) __attribute__((weak));
namespace {

// Reads `path` in a child process first: a damaged file can crash libhdf5 itself (H5HG_read on a
// corrupt global heap), and that must be a refusal naming the file, not a crash of the harness.
void probe_readable(const fs::path& path) {
  platform::ChildSpec spec;
  spec.stderr_to = platform::Stream::inherit;
  spec.body = [&path] {
    // This process exists to crash in the parent's place: let it die by the signal, with none of
    // the parent's crash handlers (a sanitizer's or libFuzzer's) reporting for the parent.
    if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(nullptr);
    try {
      read_results_unchecked(path);
      return 0;
    } catch (const std::exception& e) {
      const std::string message = e.what();
      if (::write(STDOUT_FILENO, message.data(), message.size()) < 0) return 2;  // the parent says "cannot be read"
      return 1;
    }
  };
  // Bounded: a damaged file can also send libhdf5 into a loop. A sound file reads in well under a
  // second per MB; the bound is ten seconds plus two per MB.
  std::error_code ec;
  const auto megabytes = static_cast<int>(fs::file_size(path, ec) >> 20);
  const int limit_s = 10 + 2 * megabytes;
  platform::Finished read;
  try {
    read = platform::run_to_end(std::move(spec), limit_s);
  } catch (const std::system_error&) {
    return;  // cannot probe: the real read still checks
  }
  using Kind = platform::Ending::Kind;
  if (read.ending.kind == Kind::timed_out)
    throw h5::Error(path.string() + " is damaged: reading it did not finish in " + std::to_string(limit_s) + " s");
  if (read.ending.kind == Kind::killed_by_signal)
    throw h5::Error(path.string() + " is damaged: reading it crashed the HDF5 library (signal " +
                    std::to_string(read.ending.code) + ", " + strsignal(read.ending.code) + ")");
  if (!read.ending.ok())
    throw h5::Error(path.string() + ": " + (read.output.empty() ? "cannot be read" : read.output));
}

}  // namespace

bool looks_like_results_file(const fs::path& path) {
  static const char signature[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};
  char head[8] = {};
  std::ifstream in(path, std::ios::binary);
  if (!in.read(head, sizeof head) || std::memcmp(head, signature, sizeof head) != 0) return false;
  try {
    h5::Handle f = h5::open_file_readonly(path);
    return H5Lexists(f.id(), "meta", H5P_DEFAULT) > 0 && H5Lexists(f.id(), "results", H5P_DEFAULT) > 0;
  } catch (const std::exception&) {
    return false;
  }
}

std::vector<std::pair<std::string, ResultCell>> result_cells(const ResultRow& row) {
  ResultRow copy = row;
  std::vector<std::pair<std::string, ResultCell>> cells;
  for (const Column<ResultRow>& c : result_columns())
    std::visit(
        [&](auto* cell) {
          using T = std::remove_pointer_t<decltype(cell)>;
          if constexpr (std::is_same_v<T, Verdict>)
            cells.emplace_back(c.name, std::string(verdict_name(*cell)));
          else
            cells.emplace_back(c.name, *cell);
        },
        c.cell(copy));
  return cells;
}

ResultsContents read_results(const fs::path& path) {
  if (!fs::is_regular_file(path)) throw h5::Error(path.string() + " is not a results file (not a regular file)");
  probe_readable(path);
  try {
    return read_results_unchecked(path);
  } catch (const h5::Error& e) {
    throw h5::Error(path.string() + ": " + e.what());
  }
}

void write_results(const fs::path& path, const ResultsContents& c) {
  h5::AtomicFile f(path);
  {
    h5::Handle meta = h5::create_group(f.id(), "meta");
    for (const auto& [name, member] : meta_fields()) h5::write_attr(meta.id(), name, c.meta.*member);
    const std::size_t held[] = {c.scenarios.size(), c.results.size(), c.perf.size()};
    const std::int64_t digests[] = {table_digest(scenario_columns(), c.scenarios),
                                    table_digest(result_columns(), c.results), table_digest(perf_columns(), c.perf)};
    for (std::size_t i = 0; i < 3; ++i) {
      h5::write_attr(meta.id(), kRowCounts[i][1], static_cast<std::int64_t>(held[i]));
      h5::write_attr(meta.id(), kDigests[i], digests[i]);
    }
    h5::write_attr(meta.id(), "digest_meta", meta_digest(c.meta));
    h5::write_attr(meta.id(), "cpu_kernels", c.meta.cpu_kernels);
  }
  write_table(f.id(), "scenarios", scenario_columns(), c.scenarios);
  write_table(f.id(), "results", result_columns(), c.results);
  write_table(f.id(), "perf", perf_columns(), c.perf);
  {
    h5::Handle dumps = h5::create_group(f.id(), "dumps");
    h5::Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose, "link properties");
    H5Pset_create_intermediate_group(lcpl.id(), 1);
    const fs::path dir = fs::absolute(path).parent_path();
    for (const auto& [id, file] : c.dump_files) {
      const std::string target = fs::relative(file, dir).string();
      if (H5Lcreate_external(target.c_str(), "/", dumps.id(), id.c_str(), lcpl.id(), H5P_DEFAULT) < 0)
        throw h5::Error("HDF5: link /dumps/" + id);
    }
  }
  f.commit();
}

ResultsContents merge_results(const std::vector<fs::path>& inputs, std::vector<std::string>& warnings) {
  ResultsContents merged;
  std::set<std::string> scenario_ids;
  std::set<std::pair<std::string, std::string>> result_keys;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    ResultsContents part = read_results(inputs[i]);
    if (i == 0) {
      merged.meta = part.meta;
      merged.meta.command = "merge of " + std::to_string(inputs.size()) + " files; first: " + part.meta.command;
    } else if (part.meta.sweep_text != merged.meta.sweep_text) {
      warnings.push_back(inputs[i].string() + " was run from a different sweep file text than " + inputs[0].string());
    }
    for (auto& s : part.scenarios)
      if (scenario_ids.insert(s.id).second) merged.scenarios.push_back(std::move(s));
    for (auto& r : part.results) {
      if (result_keys.insert({r.scenario_id, r.dut}).second) merged.results.push_back(std::move(r));
      else warnings.push_back("duplicate row (" + r.scenario_id + ", " + r.dut + ") in " + inputs[i].string() + ": kept the first");
    }
    for (auto& r : part.perf) merged.perf.push_back(std::move(r));
    for (auto& [id, file] : part.dump_files) merged.dump_files.emplace(id, file);
  }
  return merged;
}

}  // namespace swa::harness
