// main() of every doctest binary. It is doctest's own, plus two rules, so that
// a test binary cannot pass without testing: one in which a test case skipped
// (tests/skip.h) and nothing failed exits 77, which ctest reports as skipped;
// one whose filters (ctest's --test-case, --source-file) select no test case
// fails.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "tensor/startup.h"
#include "tests/skip.h"

namespace {

struct Skip {
  std::string test_case, why;
};
std::vector<Skip>& skips() {
  static std::vector<Skip> s;
  return s;
}
std::string current_case;
unsigned cases_run = 0;

// Remembers the name of the test case that is running, for note_skip, and how many ran.
struct CaseNames : doctest::IReporter {
  explicit CaseNames(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& s) override { cases_run = s.numTestCasesPassingFilters; }
  void test_case_start(const doctest::TestCaseData& t) override { current_case = t.m_name; }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
REGISTER_LISTENER("phasor_case_names", 1, CaseNames);

}  // namespace

void phasor::test::note_skip(const std::string& why) { skips().push_back({current_case, why}); }

int main(int argc, char** argv) {
  phasor::use_best_openblas_core(argv);  // as every program of the project: OpenBLAS's fastest kernels
  doctest::Context context(argc, argv);
  const int status = context.run();
  if (context.shouldExit() || status != 0) return status;
  if (cases_run == 0) {
    std::printf("no test case matches the filters given: nothing was tested (a renamed case?)\n");
    return 1;
  }
  if (skips().empty()) return 0;
  for (const Skip& s : skips()) std::printf("SKIPPED: test case '%s': %s\n", s.test_case.c_str(), s.why.c_str());
  std::printf("%zu test case(s) could not run their subject here: exit status 77 (ctest: skipped)\n", skips().size());
  std::fflush(stdout);
  return 77;
}
