#include "tools/lib/mnist.hpp"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <set>
#include <sstream>
#include <vector>

#include "core/common.hpp"
#include "io/db.hpp"
#include "io/proto_io.hpp"

namespace crema {

namespace {

constexpr uint32_t kImagesMagic = 2051;
constexpr uint32_t kLabelsMagic = 2049;

// A file read through zlib, which passes plain (not gzipped) files through unchanged.
class IdxInput {
 public:
  explicit IdxInput(const std::string& path) : path_(path) {
    errno = 0;
    file_ = gzopen(path.c_str(), "rb");
    CREMA_CHECK(file_ != nullptr) << "cannot open '" << path
                                  << "': " << (errno != 0 ? std::strerror(errno) : "out of memory");
  }
  ~IdxInput() { gzclose(file_); }
  IdxInput(const IdxInput&) = delete;
  IdxInput& operator=(const IdxInput&) = delete;

  // Reads up to `size` bytes, fewer only at the end of the data.
  size_t Read(char* out, size_t size) {
    size_t done = 0;
    while (done < size) {
      const unsigned chunk = static_cast<unsigned>(std::min<size_t>(size - done, size_t{1} << 20));
      const int got = gzread(file_, out + done, chunk);
      if (got < 0) {
        int code = 0;
        const char* message = gzerror(file_, &code);
        CREMA_FAIL() << "cannot read '" << path_ << "': " << (code == Z_ERRNO ? std::strerror(errno) : message)
                     << " (a damaged gzip file?)";
      }
      if (got == 0) break;
      done += static_cast<size_t>(got);
    }
    return done;
  }

  // One big-endian 32-bit word of the header.
  uint32_t ReadWord(const char* what) {
    unsigned char bytes[4];
    CREMA_CHECK(Read(reinterpret_cast<char*>(bytes), 4) == 4)
        << "'" << path_ << "' is truncated: it ends within the header, before the " << what;
    return (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) | (uint32_t{bytes[2]} << 8) | bytes[3];
  }

  void CheckMagic(uint32_t expected, const char* kind) {
    const uint32_t magic = ReadWord("magic number");
    if (magic == expected) return;
    std::string hint;
    if (magic == kImagesMagic) hint = " (it is an image file)";
    if (magic == kLabelsMagic) hint = " (it is a label file)";
    CREMA_FAIL() << "'" << path_ << "' is not an MNIST " << kind << " file: its magic number is " << magic
                 << ", expected " << expected << hint;
  }

  // Reads exactly `size` bytes of payload, growing the buffer as data arrives (a damaged header cannot make
  // it allocate more than the file holds).
  std::string ReadPayload(uint64_t size, const char* what) {
    std::string payload;
    std::vector<char> chunk(size_t{1} << 20);
    while (payload.size() < size) {
      const size_t want = static_cast<size_t>(std::min<uint64_t>(chunk.size(), size - payload.size()));
      const size_t got = Read(chunk.data(), want);
      payload.append(chunk.data(), got);
      if (got < want) break;
    }
    CREMA_CHECK(payload.size() == size) << "'" << path_ << "' is truncated: its header announces " << size
                                        << " bytes of " << what << ", but only " << payload.size() << " follow";
    return payload;
  }

 private:
  std::string path_;
  gzFile file_ = nullptr;
};

int CheckedDimension(uint32_t value, const std::string& path, const char* what) {
  CREMA_CHECK(value <= INT_MAX) << "'" << path << "' has an impossible " << what << " of " << value;
  return static_cast<int>(value);
}

}  // namespace

MnistImages ReadMnistImages(const std::string& path) {
  IdxInput input(path);
  input.CheckMagic(kImagesMagic, "image");
  MnistImages images;
  images.count = CheckedDimension(input.ReadWord("image count"), path, "image count");
  images.rows = CheckedDimension(input.ReadWord("number of rows"), path, "number of rows");
  images.columns = CheckedDimension(input.ReadWord("number of columns"), path, "number of columns");
  CREMA_CHECK(images.rows > 0 && images.columns > 0)
      << "'" << path << "' holds images of " << images.rows << "x" << images.columns << " pixels";
  const uint64_t size = uint64_t{static_cast<uint32_t>(images.count)} * images.rows * images.columns;
  images.pixels = input.ReadPayload(size, "pixels");
  return images;
}

std::string ReadMnistLabels(const std::string& path) {
  IdxInput input(path);
  input.CheckMagic(kLabelsMagic, "label");
  const int count = CheckedDimension(input.ReadWord("label count"), path, "label count");
  return input.ReadPayload(static_cast<uint64_t>(count), "labels");
}

std::map<int, int> ParseLabelMap(const std::string& text) {
  std::map<int, int> map;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    int from = -1, to = -1;
    char colon = 0, extra = 0;
    std::istringstream pair(item);
    const bool parsed = static_cast<bool>(pair >> from >> colon >> to) && colon == ':' && !(pair >> extra);
    CREMA_CHECK(parsed && from >= 0 && from <= 255 && to >= 0)
        << "label map item '" << item << "' is not OLD:NEW with OLD in 0..255 and NEW >= 0 (e.g. 0:0,2:0,5:1)";
    CREMA_CHECK(map.emplace(from, to).second) << "label map names label " << from << " twice";
  }
  CREMA_CHECK(!map.empty() || text.empty()) << "label map '" << text << "' holds no OLD:NEW pair";
  return map;
}

int64_t ConvertMnist(const std::string& images_path, const std::string& labels_path, const std::string& db_path,
                     DataParameter::DB backend, const MnistSelection& selection) {
  CREMA_CHECK(!FileExists(db_path)) << "'" << db_path << "' already exists; remove it first or choose another path";
  const MnistImages images = ReadMnistImages(images_path);
  const std::string labels = ReadMnistLabels(labels_path);
  CREMA_CHECK(static_cast<size_t>(images.count) == labels.size())
      << "'" << images_path << "' holds " << images.count << " images but '" << labels_path << "' holds "
      << labels.size() << " labels";
  const int first = selection.first;
  const int count = selection.count < 0 ? images.count - first : selection.count;
  CREMA_CHECK(first >= 0 && first + count <= images.count)
      << "records " << first << " to " << first + count - 1 << " were asked for, but '" << images_path << "' holds "
      << images.count << " images";
  // A selection that keeps nothing would write an empty database, which every reader then refuses: say so now.
  CREMA_CHECK(selection.limit != 0) << "the record limit is 0, so no record would be written; give a positive limit "
                                    << "(or -1 for every record)";
  if (!selection.relabel.empty()) {
    std::set<int> present;
    for (int i = first; i < first + count; ++i) present.insert(static_cast<unsigned char>(labels[i]));
    bool kept = false;
    for (const auto& mapping : selection.relabel) kept = kept || present.count(mapping.first) > 0;
    if (!kept) {
      std::string found;
      for (int label : present) found += (found.empty() ? "" : ", ") + std::to_string(label);
      CREMA_FAIL() << "the label map keeps no image: none of its labels occurs in '" << labels_path
                   << "' (records " << first << " to " << first + count - 1 << " hold the labels " << found << ")";
    }
  }

  const std::unique_ptr<DbWriter> writer = CreateDbWriter(backend, db_path);
  Datum datum;
  datum.set_channels(1);
  datum.set_height(images.rows);
  datum.set_width(images.columns);
  const size_t image_size = static_cast<size_t>(images.rows) * images.columns;
  std::string value;
  int64_t written = 0;
  for (int i = first; i < first + count && (selection.limit < 0 || written < selection.limit); ++i) {
    int label = static_cast<unsigned char>(labels[i]);
    if (!selection.relabel.empty()) {
      const auto mapped = selection.relabel.find(label);
      if (mapped == selection.relabel.end()) continue;
      label = mapped->second;
    }
    datum.set_data(images.pixels.data() + i * image_size, image_size);
    datum.set_label(label);
    CREMA_CHECK(datum.SerializeToString(&value)) << "cannot serialise record " << i << " for '" << db_path << "'";
    writer->Put(RecordKey(written++), value);
  }
  writer->Commit();
  return written;
}

}  // namespace crema
