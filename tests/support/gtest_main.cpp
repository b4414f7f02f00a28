// GoogleTest entry point for mgpu's suites. ctest runs one test per process (gtest_discover_tests);
// when everything it selected was skipped (e.g. a GPU test on a machine without a GPU) the exit
// code is 77, which ctest reports as "Skipped" (SKIP_RETURN_CODE), instead of a silent pass.
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int failed = RUN_ALL_TESTS();
  const ::testing::UnitTest* unit = ::testing::UnitTest::GetInstance();
  if (failed == 0 && unit->test_to_run_count() > 0 && unit->skipped_test_count() == unit->test_to_run_count()) {
    return 77;
  }
  return failed;
}
