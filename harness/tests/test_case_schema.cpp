#define BOOST_TEST_MODULE harness_case_schema
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "swa/harness/case/case_schema.hpp"
#include "swa/harness/case/sweep_file.hpp"

using namespace swa;
using namespace swa::harness;

namespace {

std::vector<Scenario> scenarios_of(const std::string& path) {
  std::vector<Scenario> all;
  for (const Sweep& sweep : load_sweep_file(path).sweeps)
    all.insert(all.end(), sweep.scenarios.begin(), sweep.scenarios.end());
  return all;
}

}  // namespace

BOOST_AUTO_TEST_CASE(keys_columns_and_id_keys_are_declared_once) {
  std::set<std::string_view> keys, columns, id_keys;
  for (const CaseParam& p : case_params()) {
    BOOST_TEST(keys.insert(p.key).second, p.key);
    BOOST_TEST(columns.insert(p.column).second, p.column);
    BOOST_TEST(id_keys.insert(p.id_key).second, p.id_key);  // only dtype is bare
    BOOST_TEST(!p.allowed.empty());
    Scenario probe;
    BOOST_TEST(p.set(probe, "not-a-value").has_value(), p.key);  // every value is checked
  }
}

// Every scenario of the shipped sweeps comes back from its /scenarios columns and from its repro
// YAML with the same ID: what the results file and bisect write is enough to rerun it.
BOOST_AUTO_TEST_CASE(every_shipped_scenario_round_trips_through_columns_and_yaml) {
  for (const char* file : {"ci.yaml", "full.yaml"}) {
    const auto all = scenarios_of(std::string(SWA_SCENARIOS_DIR) + "/" + file);
    BOOST_TEST_REQUIRE(all.size() > 100u);
    const auto yaml = std::filesystem::temp_directory_path() / ("swa_case_schema_" + std::to_string(::getpid()) + ".yaml");
    std::ofstream out(yaml);
    out << "sweeps:\n";
    for (const bool atb : {false, true}) {  // as bisect writes a repro: api: atb where the case needs it
      out << "  back" << atb << ":\n" << (atb ? "    api: atb\n" : "") << "    include:\n";
      for (const Scenario& s : all) {
        if (needs_atb_api(s) != atb) continue;
        Scenario back;
        const auto error = scenario_from_columns(case_columns(s), back);
        BOOST_TEST_REQUIRE(!error.has_value(), s.id());
        BOOST_TEST(back.id() == s.id());
        out << "      - " << case_yaml(s) << "\n";
      }
    }
    out.close();
    std::set<std::string> want, got;
    for (const Scenario& s : all) want.insert(s.id());
    for (const Scenario& s : scenarios_of(yaml.string())) got.insert(s.id());
    std::filesystem::remove(yaml);
    BOOST_TEST(want == got, file);
  }
}

BOOST_AUTO_TEST_CASE(parameters_a_mode_does_not_use_are_normalised_away) {
  Scenario s;
  s.mode = RunMode::prefill;
  s.chunk = 7;
  s.decode_steps = 3;
  s.cache = CachePolicy::linear;
  s.mask_generator = AtbSample::cpp;  // no mask: no generator
  normalise(s);
  BOOST_TEST(s.id() == Scenario{}.id());
  const auto cache = std::find_if(case_params().begin(), case_params().end(), [](const CaseParam& p) { return p.key == "cache"; });
  BOOST_TEST(case_columns(s).text[cache - case_params().begin()] == "none");  // a prefill's cache column
  s.mode = RunMode::decode;
  s.mask = MaskFormat::swa_norm;
  s.mask_generator = AtbSample::cpp;
  s.decode_steps = 2;
  normalise(s);
  BOOST_TEST(s.id().find("/steps=2/") != std::string::npos);
  BOOST_TEST(s.id().find("/gen=cpp/") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(bad_cells_name_the_column_and_the_allowed_values) {
  CaseColumns c = case_columns(Scenario{});
  c.text[0] = "sideways";
  Scenario s;
  const auto error = scenario_from_columns(c, s);
  BOOST_TEST_REQUIRE(error.has_value());
  BOOST_TEST(*error == "column mode: 'sideways' is not one of prefill|chunked_prefill|decode");
}
