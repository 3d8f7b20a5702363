#include "core/shared_library.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <utility>

namespace crema {

void* OpenSharedLibrary(const std::string& file, const std::string& what) {
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    CREMA_FAIL() << "cannot open " << what << " '" << file << "': " << (error != nullptr ? error : "unknown error");
  }
  return handle;
}

void* SharedLibrarySymbol(void* handle, const std::string& file, const std::string& what, const char* symbol,
                          const std::string& name, const std::string& context) {
  dlerror();
  void* address = dlsym(handle, symbol);
  const char* error = dlerror();
  if (address == nullptr || error != nullptr) {
    const std::string reason = error != nullptr ? error : "the symbol is null";
    dlclose(handle);
    CREMA_FAIL() << what << " '" << file << "' has no " << name << " (" << reason << ")" << context;
  }
  return address;
}

LibraryCandidates CandidatesFor(const char* variable, std::vector<std::string> defaults, const std::string& hint) {
  const char* chosen = std::getenv(variable);
  if (chosen != nullptr && *chosen != '\0') return {{chosen}, "(" + std::string(variable) + " names it)"};
  return {std::move(defaults), hint};
}

}  // namespace crema
