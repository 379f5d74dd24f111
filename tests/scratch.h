#pragma once
// The scratch folder of a test binary: <PHASOR_TEST_TMP, or the system's temp
// folder>/phasor_<suite>_<pid>, emptied and made on first use in the process.
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>

namespace phasor::test {

inline std::filesystem::path scratch_root(const std::string& suite) {
#ifdef PHASOR_TEST_TMP
  const std::filesystem::path parent = PHASOR_TEST_TMP;
#else
  const std::filesystem::path parent = std::filesystem::temp_directory_path();
#endif
  const std::filesystem::path root = parent / ("phasor_" + suite + "_" + std::to_string(::getpid()));
  static std::set<std::string> made;
  if (made.insert(suite).second) {
    std::filesystem::remove_all(root);
    std::filesystem::create_directories(root);
  }
  return root;
}

}  // namespace phasor::test
