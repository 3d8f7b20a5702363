#include "tools/lib/cpu_info.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include "core/math_functions.hpp"

namespace crema {

namespace {

// The fields of the first processor in /proc/cpuinfo.
std::map<std::string, std::string> FirstProcessor() {
  std::map<std::string, std::string> fields;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) break;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);
    std::string value = colon + 1 < line.size() ? line.substr(colon + 1) : std::string();
    value.erase(0, value.find_first_not_of(" \t"));
    fields[key] = value;
  }
  return fields;
}

// AMD's Zen generations by family and model (public CPUID tables).
std::string AmdGeneration(int family, int model) {
  if (family == 23) return model >= 0x30 ? "Zen 2" : "Zen / Zen+";
  if (family == 25)
    return (model >= 0x10 && model <= 0x1f) || (model >= 0x60 && model <= 0x7f) || (model >= 0xa0 && model <= 0xaf)
               ? "Zen 4"
               : "Zen 3";
  if (family == 26) return "Zen 5";
  return "";
}

template <typename Function>
Function* BlasSymbol(const char* name) {
  return reinterpret_cast<Function*>(dlsym(RTLD_DEFAULT, name));
}

}  // namespace

std::string CpuDescription() {
  const std::map<std::string, std::string> cpu = FirstProcessor();
  const auto field = [&](const char* key) {
    const auto it = cpu.find(key);
    return it == cpu.end() ? std::string() : it->second;
  };
  std::ostringstream out;
  out << (field("model name").empty() ? "unknown CPU" : field("model name"));
  if (!field("cpu family").empty() && !field("model").empty()) {
    const int family = std::stoi(field("cpu family")), model = std::stoi(field("model"));
    out << " (family " << family << ", model " << model;
    const std::string generation = field("vendor_id") == "AuthenticAMD" ? AmdGeneration(family, model) : "";
    if (!generation.empty()) out << ": " << generation;
    out << ")";
  }
  out << ", " << std::thread::hardware_concurrency() << " cores";
  const std::string flags = " " + field("flags") + " ";
  out << (flags.find(" avx512f ") != std::string::npos ? ", AVX-512"
          : flags.find(" avx2 ") != std::string::npos  ? ", AVX2"
                                                       : "");
  return out.str();
}

std::string BlasDescription() {
  auto* config = BlasSymbol<char*()>("openblas_get_config");
  if (config == nullptr) return "a CBLAS";
  std::ostringstream out;
  out << config();
  if (auto* core = BlasSymbol<char*()>("openblas_get_corename")) out << ", kernels " << core();
  if (auto* threads = BlasSymbol<int()>("openblas_get_num_threads")) out << ", " << threads() << " threads";
  return out.str();
}

double MeasureGemmPeakGflops(int n, int repeats) {
  std::vector<float> a(static_cast<size_t>(n) * n, 0.5f), b(a.size(), 0.25f), c(a.size());
  cpu_gemm(Transpose::kNo, Transpose::kNo, n, n, n, 1.f, a.data(), b.data(), 0.f, c.data());
  double best = 0;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    cpu_gemm(Transpose::kNo, Transpose::kNo, n, n, n, 1.f, a.data(), b.data(), 0.f, c.data());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 2.0 * n * n * n / seconds / 1e9);
  }
  return best;
}

size_t PeakResidentBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) != 0) continue;
    std::istringstream fields(line.substr(6));
    size_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return 0;
}

}  // namespace crema
