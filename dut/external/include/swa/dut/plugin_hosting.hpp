#pragma once
// How a plugin library is presented and started, for a DUT that is a plugin underneath: `python:`
// is libswa_python_dut.so started with SWA_PYTHON_DUT=TARGET in its environment and named
// "python:TARGET" in rows and messages.
#include <string>
#include <vector>

namespace swa::dut {

struct PluginHosting {
  std::string label;             // the DUT's name; empty: "plugin:PATH"
  std::vector<std::string> env;  // "NAME=value" set for the plugin (its worker's environment, or this process's)

  std::string name(const std::string& path) const { return label.empty() ? "plugin:" + path : label; }
  // The subject of a message: "plugin PATH" or the label.
  std::string subject(const std::string& path) const { return label.empty() ? "plugin " + path : label; }
  // Workers and loaded libraries are shared by DUTs whose key is the same.
  std::string key(const std::string& path) const {
    std::string k = path;
    for (const std::string& e : env) k += '\n' + e;
    return k;
  }
};

}  // namespace swa::dut
