#pragma once
// The readings bisect searches (golden/readings.hpp), as one table: each knob is a way a kernel can
// read the spec differently, with the class a finding names and the words it uses. Discrete knobs
// list their settings for a case; continuous ones are fitted (readings_search.cpp).
// harness/src/bisect/README.md's table of readings is checked against this one by a test
// (its failure message prints the table as the code has it).
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "swa/params.hpp"
#include "swa/readings.hpp"

namespace swa::harness {

struct ReadingSetting {
  std::string name;   // the class a finding names
  std::string words;  // "reads V with k_descale": the finding's sentence after "the DUT"
  golden::Reading reading;
  std::function<void(golden::Reading&)> change;  // what `reading` changes from the spec, to combine settings
  bool fitted = false;  // a continuous knob's fitted value: a discrete setting that reproduces as well is simpler
};

// A value fitted in a bracket around the case's own: the scale, the cap.
struct ContinuousKnob {
  double spec = 0, lo = 0, hi = 0;
  std::function<void(golden::Reading&, double)> set;
};

struct ReadingKnob {
  std::string name;     // the knob: its settings' classes start with it or are listed in `classes`
  std::string meaning;  // what it reads differently (the README's table)
  std::string classes;  // the classes its settings name, for the table
  std::function<std::vector<ReadingSetting>(const AttnParams&)> settings;            // discrete
  std::function<std::optional<ContinuousKnob>(const AttnParams&)> continuous;        // or fitted
  std::function<std::string(double value, double spec)> fitted_words;                // a fitted value's words
  std::string fitted_name;                                                            // a fitted value's class
};

const std::vector<ReadingKnob>& reading_knobs();

// A discrete setting: its class, its words, and the change from the spec it makes.
ReadingSetting reading_setting(std::string name, std::string words, const std::function<void(golden::Reading&)>& change);

// The scopes a case's schedule has more than one kind of call for (every_call first), with their words.
std::vector<std::pair<golden::CallScope, std::string>> scopes_of(const AttnParams& p);

// The table as Markdown rows: | knob | reads differently | classes |.
std::string reading_table_markdown();

}  // namespace swa::harness
