#pragma once
#include <string>
#include <vector>

namespace swa::cli {

// Each returns the process exit code (see ExitCode) or throws UsageError.
int cmd_mask(const std::vector<std::string>& args);
int cmd_mask_check(const std::vector<std::string>& args);
int cmd_golden(const std::vector<std::string>& args);
int cmd_self_check(const std::vector<std::string>& args);
int cmd_list(const std::vector<std::string>& args);
int cmd_run(const std::vector<std::string>& args);
int cmd_merge(const std::vector<std::string>& args);
int cmd_submit(const std::vector<std::string>& args);
int cmd_collect(const std::vector<std::string>& args);
int cmd_report(const std::vector<std::string>& args);
int cmd_bisect(const std::vector<std::string>& args);

}  // namespace swa::cli
