#include "io/image_codecs_library.hpp"

#ifdef CREMA_USE_OPENCV
#include <atomic>
#include <opencv2/imgcodecs.hpp>
#include <type_traits>

#include "core/shared_library.hpp"

namespace crema {

namespace {

std::atomic<bool> codecs_loaded{false};

// The functions' names in the library: C++ names as GCC and Clang mangle them on Linux (the Itanium C++ ABI, with
// libstdc++'s std::__cxx11::string for cv::String). The static_asserts below tie each to the declaration it stands
// for: if OpenCV changed a signature, the build stops there rather than at run time.
constexpr char kImread[] = "_ZN2cv6imreadERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEEi";
constexpr char kImdecode[] = "_ZN2cv8imdecodeERKNS_11_InputArrayEi";
constexpr char kImencode[] =
    "_ZN2cv8imencodeERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEERKNS_11_InputArrayERSt6vectorIhSaIhEERKSB_"
    "IiSaIiEE";
constexpr char kHaveImageWriter[] = "_ZN2cv15haveImageWriterERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE";
static_assert(std::is_same_v<ImageCodecsLibrary::ReadFunction,
                             decltype(static_cast<ImageCodecsLibrary::ReadFunction>(&cv::imread))>);
static_assert(std::is_same_v<ImageCodecsLibrary::DecodeFunction,
                             decltype(static_cast<ImageCodecsLibrary::DecodeFunction>(&cv::imdecode))>);
static_assert(std::is_same_v<ImageCodecsLibrary::EncodeFunction,
                             decltype(static_cast<ImageCodecsLibrary::EncodeFunction>(&cv::imencode))>);
static_assert(std::is_same_v<ImageCodecsLibrary::HaveWriterFunction,
                             decltype(static_cast<ImageCodecsLibrary::HaveWriterFunction>(&cv::haveImageWriter))>);

constexpr char kWhat[] = "OpenCV's image codecs library";

template <typename Function>
void Resolve(void* handle, const std::string& file, const char* symbol, const char* name, Function* function) {
  *function = reinterpret_cast<Function>(
      SharedLibrarySymbol(handle, file, kWhat, symbol, name, ": crema was built against OpenCV " CV_VERSION));
}

}  // namespace

std::string ImageCodecsLibraryName() {
  return "libopencv_imgcodecs.so." + std::to_string(CV_VERSION_MAJOR * 100 + CV_VERSION_MINOR);
}

ImageCodecsLibrary LoadImageCodecsLibrary(const std::string& file) {
  void* handle = OpenSharedLibrary(file, kWhat);
  ImageCodecsLibrary library;
  library.path = file;
  Resolve(handle, file, kImread, "cv::imread", &library.imread);
  Resolve(handle, file, kImdecode, "cv::imdecode", &library.imdecode);
  Resolve(handle, file, kImencode, "cv::imencode", &library.imencode);
  Resolve(handle, file, kHaveImageWriter, "cv::haveImageWriter", &library.haveImageWriter);
  // The handle stays open for the process's life: the functions above point into it.
  return library;
}

const ImageCodecsLibrary& ImageCodecs() {
  static const ImageCodecsLibrary library = [] {
    std::vector<std::string> defaults = {ImageCodecsLibraryName()};
#ifdef CREMA_IMGCODECS_CONFIGURED_PATH
    if (CREMA_IMGCODECS_CONFIGURED_PATH != defaults.front()) defaults.push_back(CREMA_IMGCODECS_CONFIGURED_PATH);
#endif
    const LibraryCandidates candidates = CandidatesFor(
        "CREMA_IMGCODECS_LIBRARY", defaults,
        "(install OpenCV's imgcodecs, Debian: libopencv-imgcodecs406, or set CREMA_IMGCODECS_LIBRARY to the file)");
    ImageCodecsLibrary loaded = LoadFirst(candidates, LoadImageCodecsLibrary);
    codecs_loaded = true;
    return loaded;
  }();
  return library;
}

bool ImageCodecsLoaded() { return codecs_loaded; }

}  // namespace crema
#endif
