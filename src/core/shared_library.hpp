// Libraries crema opens on first use instead of linking them (cuBLAS, OpenCV's image codecs: each would otherwise
// cost every process its start-up time): opening a file, finding a function in it, and trying candidate files in
// turn, with errors that name each file tried and what the loader said.
#pragma once

#include <string>
#include <vector>

#include "core/common.hpp"

namespace crema {

// dlopen(file, RTLD_NOW | RTLD_LOCAL): a name the loader searches for, or a path. Throws crema::Error
// "cannot open <what> '<file>': <the loader's reason>".
void* OpenSharedLibrary(const std::string& file, const std::string& what);

// The address of `symbol` in the library `handle` opened from `file`. Where there is none, closes the handle and
// throws crema::Error "<what> '<file>' has no <name> (<the loader's reason>)<context>".
void* SharedLibrarySymbol(void* handle, const std::string& file, const std::string& what, const char* symbol,
                          const std::string& name, const std::string& context);

// The files to try: the one environment variable `variable` names where it is set, else `defaults`; and what the
// error adds when none loads.
struct LibraryCandidates {
  std::vector<std::string> files;
  std::string hint;
};
LibraryCandidates CandidatesFor(const char* variable, std::vector<std::string> defaults, const std::string& hint);

// What `load` makes of the first candidate it loads without a crema::Error; throws every candidate's error, joined
// by "; ", then the hint.
template <typename Load>
auto LoadFirst(const LibraryCandidates& candidates, const Load& load) -> decltype(load(std::string())) {
  std::string errors;
  for (const std::string& file : candidates.files) {
    try {
      return load(file);
    } catch (const Error& error) {
      errors += std::string(errors.empty() ? "" : "; ") + error.what();
    }
  }
  throw Error(errors + " " + candidates.hint);
}

}  // namespace crema
