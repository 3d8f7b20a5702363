// fuzz_seeds SOURCE_DIR FOLDER: writes the fuzz targets' seed corpora and the prototxt dictionary into FOLDER
// (fuzz/fuzz_targets.hpp, WriteSeeds). scripts/fuzz.sh runs it before the fuzzers.
#include <exception>
#include <iostream>

#include "core/common.hpp"
#include "fuzz/fuzz_targets.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: fuzz_seeds SOURCE_DIR FOLDER\n";
    return 1;
  }
  try {
    const std::vector<int> counts = crema::fuzz::WriteSeeds(argv[1], argv[2]);
    for (size_t t = 0; t < counts.size(); ++t)
      std::cout << crema::fuzz::Targets()[t].name << ": " << counts[t] << " seeds\n";
  } catch (const std::exception& error) {
    std::cerr << "fuzz_seeds: error: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
