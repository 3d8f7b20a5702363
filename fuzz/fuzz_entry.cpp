// One libFuzzer program per target: CMake compiles this file once for each, with CREMA_FUZZ_TARGET naming it
// (fuzz/CMakeLists.txt). Run by scripts/fuzz.sh (make fuzz); docs/reliability.md says how to read a crash.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_targets.hpp"

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  crema::fuzz::SetUp();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const crema::fuzz::Target& target = crema::fuzz::TargetNamed(CREMA_FUZZ_TARGET);
  target.run(data, size);
  return 0;
}
