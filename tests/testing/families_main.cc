// The main of test binaries that parse or build model configs: registers the model families
// (models::RegisterModelFamilies, as the CLI's main does) before running the tests.
#include <gtest/gtest.h>

#include "tlaloc/models/family.h"

int main(int argc, char** argv) {
  tlaloc::models::RegisterModelFamilies();
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
