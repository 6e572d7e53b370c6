// The test programs' main: gives RapidCheck a default size for the suite, which RC_PARAMS overrides.

#include <gtest/gtest.h>

#include <cstdlib>

int main(int argc, char** argv) {
  // Sized so that the whole suite runs in under two minutes on two cores; RapidCheck prints the seed
  // it uses, and a failure prints the RC_PARAMS="reproduce=..." that replays it.
  setenv("RC_PARAMS", PFX_RC_DEFAULT_PARAMS, /*overwrite=*/0);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
