#include "options.hpp"

#include <charconv>
#include <iostream>
#include <sstream>

namespace swa::cli {

bool parse_options(const std::string& command, const std::vector<std::string>& args, po::options_description& desc,
                   po::variables_map& vm) {
  desc.add_options()("help,h", "show this help");
  try {
    po::store(po::command_line_parser(args).options(desc).run(), vm);
    if (vm.count("help")) {
      std::cout << "usage: swa-harness " << command << " [options]\n" << desc << "\n";
      return false;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(e.what());
  }
  return true;
}

std::int64_t require_range(const std::string& option, std::int64_t value, std::int64_t lo, std::int64_t hi) {
  if (value < lo || value > hi)
    throw UsageError("option " + option + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                     "], got " + std::to_string(value));
  return value;
}

std::vector<std::int64_t> parse_int_list(const std::string& option, const std::string& text, std::int64_t lo,
                                         std::int64_t hi) {
  std::vector<std::int64_t> values;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size())
      throw UsageError("option " + option + ": '" + item + "' is not an integer (expected a comma-separated list like 5,17)");
    values.push_back(require_range(option, v, lo, hi));
  }
  if (values.empty()) throw UsageError("option " + option + " needs at least one value");
  return values;
}

std::string human_bytes(std::int64_t bytes) {
  std::ostringstream o;
  o.precision(3);
  if (bytes >= (std::int64_t{1} << 30)) o << static_cast<double>(bytes) / (1 << 30) << " GiB";
  else if (bytes >= (1 << 20)) o << static_cast<double>(bytes) / (1 << 20) << " MiB";
  else o << bytes << " B";
  return o.str();
}

}  // namespace swa::cli
