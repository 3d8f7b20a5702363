// OpenCV's image codecs (libopencv_imgcodecs), opened on first use instead of linked. The library needs some 140
// others (GDAL and its formats, every image and video codec), and a process that links it maps and relocates them
// all before main: about 0.2 s of CPU in every crema, test binary and tool a test starts, against a few
// milliseconds for the rest of crema's libraries. Now only a process that decodes or encodes an image pays it.
// OpenCV's core and imgproc (cv::Mat, resizing) stay linked: they are small.
#pragma once

#ifdef CREMA_USE_OPENCV
#include <opencv2/core.hpp>
#include <string>
#include <vector>

namespace crema {

// The codec functions crema calls, resolved from one opened copy of the library. The member types are the
// declarations' own (unevaluated: naming them links nothing), so a change of signature fails to compile.
struct ImageCodecsLibrary {
  using ReadFunction = cv::Mat (*)(const cv::String&, int);
  using DecodeFunction = cv::Mat (*)(cv::InputArray, int);
  using EncodeFunction = bool (*)(const cv::String&, cv::InputArray, std::vector<uchar>&, const std::vector<int>&);
  using HaveWriterFunction = bool (*)(const cv::String&);
  ReadFunction imread = nullptr;                 // cv::imread(filename, flags)
  DecodeFunction imdecode = nullptr;             // cv::imdecode(buffer, flags)
  EncodeFunction imencode = nullptr;             // cv::imencode(extension, image, bytes, params)
  HaveWriterFunction haveImageWriter = nullptr;  // cv::haveImageWriter(filename)
  std::string path;                              // the file opened, as dlopen was given it
};

// The shared library's name for the OpenCV these sources were compiled against: libopencv_imgcodecs.so.<100 major +
// minor> (4.6: .so.406).
std::string ImageCodecsLibraryName();

// Opens `file` (a name dlopen searches for, or a path) and resolves the functions; throws crema::Error naming
// the file and what the loader said where it cannot be opened or lacks one.
ImageCodecsLibrary LoadImageCodecsLibrary(const std::string& file);

// The process's codecs, opened on the first call (thread-safe): $CREMA_IMGCODECS_LIBRARY where set, else
// ImageCodecsLibraryName() through the loader's search, then the file CMake found when crema was configured. The
// error names every file tried.
const ImageCodecsLibrary& ImageCodecs();

// Whether this process has the codecs open (for tests: a run that reads no image never opens them).
bool ImageCodecsLoaded();

}  // namespace crema
#endif
