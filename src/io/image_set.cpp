#include "io/image_set.hpp"

#include <glog/logging.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "core/random.hpp"
#include "io/db.hpp"
#include "io/image_io.hpp"

namespace crema {

namespace {

std::string ShapeText(const ImageShape& shape) {
  std::ostringstream out;
  out << shape.channels << " x " << shape.height << " x " << shape.width;
  return out.str();
}

// The options as the conversion uses them: checked, and a resize given on one side only dropped as Caffe drops it.
ImageSetOptions CheckedOptions(ImageSetOptions options) {
  CREMA_CHECK(ImageCodecsAvailable()) << "this crema was built without OpenCV (CREMA_USE_OPENCV=OFF): it cannot "
                                         "read images, so it cannot convert an image set";
  CREMA_CHECK(options.resize_height >= 0 && options.resize_width >= 0)
      << "resize_height (" << options.resize_height << ") and resize_width (" << options.resize_width
      << ") must both be positive (resize every image to that size) or both be 0 (keep the sizes)";
  if ((options.resize_height == 0) != (options.resize_width == 0)) {
    LOG(WARNING) << "resize_height (" << options.resize_height << ") and resize_width (" << options.resize_width
                 << ") are not both set: the images keep their own sizes, as Caffe does (set both to resize)";
    options.resize_height = options.resize_width = 0;
  }
  CREMA_CHECK(options.encode_type.empty() || CanEncodeImageFormat(options.encode_type))
      << "encode_type '" << options.encode_type << "' is not an image format OpenCV can write (e.g. png, jpg)";
  CREMA_CHECK(options.transaction_size > 0) << "the transaction size must be positive";
  return options;
}

// Removes the database this conversion created (once armed with its path) unless it is released, so that a
// failed conversion leaves nothing a later run would refuse to overwrite or a Data layer would read as complete.
// Declared before the writer, so that the writer has closed the database when it goes.
class PartialDatabase {
 public:
  PartialDatabase() = default;
  ~PartialDatabase() {
    if (path_.empty()) return;
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  PartialDatabase(const PartialDatabase&) = delete;
  PartialDatabase& operator=(const PartialDatabase&) = delete;
  void Arm(const std::string& path) { path_ = path; }
  void Release() { path_.clear(); }

 private:
  std::string path_;
};

}  // namespace

std::vector<ImageListEntry> ReadImageList(const std::string& list_path) {
  std::ifstream list(list_path);
  CREMA_CHECK(list) << "cannot open the list file '" << list_path << "'";
  std::vector<ImageListEntry> entries;
  std::string text;
  bool warned_no_label = false, warned_partial_label = false;  // once per list file
  for (int number = 1; std::getline(list, text); ++number) {
    const size_t end = text.find_last_not_of(" \t\r\n");
    if (end == std::string::npos) continue;  // a blank line
    text.erase(end + 1);
    const size_t begin = text.find_first_not_of(" \t");
    const size_t split = text.find_last_of(" \t");
    ImageListEntry entry;
    entry.line = number;
    if (split == std::string::npos || split < begin) {
      // No label: Caffe reads the whole line as the path and atoi of nothing numeric, 0.
      if (!warned_no_label) {
        warned_no_label = true;
        LOG(WARNING) << "line " << number << " of the list file '" << list_path << "' (\"" << text
                     << "\") is not \"path label\": it has no label; read with label 0, as Caffe does (said once "
                     << "for this list)";
      }
      entry.path = text.substr(begin);
      entries.push_back(std::move(entry));
      continue;
    }
    const std::string label = text.substr(split + 1);
    entry.path = text.substr(begin, text.find_last_not_of(" \t", split) - begin + 1);
    // Caffe reads the label with atoi: its leading integer. One must be there (an optional sign, then digits),
    // and fit an int; what follows it ("3.7", "3.0", "3abc") is ignored with a warning.
    const size_t digits = label[0] == '+' || label[0] == '-' ? 1 : 0;
    const bool leading_number = digits < label.size() && std::isdigit(static_cast<unsigned char>(label[digits]));
    size_t used = 0;
    bool fits = false;
    if (leading_number) {
      try {
        entry.label = std::stoi(label, &used);
        fits = true;
      } catch (const std::exception&) {
        fits = false;
      }
    }
    CREMA_CHECK(leading_number && fits)
        << "line " << number << " of the list file '" << list_path << "' (\"" << text << "\"): the label '" << label
        << "' is not an integer" << (leading_number ? " an int holds" : "");
    if (used != label.size() && !warned_partial_label) {
      warned_partial_label = true;
      LOG(WARNING) << "line " << number << " of the list file '" << list_path << "' (\"" << text << "\"): the label '"
                   << label << "' is not a whole number; read as " << entry.label << ", its leading integer, as "
                   << "Caffe does (said once for this list)";
    }
    entries.push_back(std::move(entry));
  }
  CREMA_CHECK(!list.bad()) << "cannot read the list file '" << list_path << "'";
  CREMA_CHECK(!entries.empty()) << "the list file '" << list_path << "' names no images";
  return entries;
}

void ShuffleImageList(uint64_t seed, std::vector<ImageListEntry>* entries) {
  RandomStream random(seed);
  for (size_t i = entries->size(); i > 1; --i) {
    std::swap((*entries)[i - 1], (*entries)[random.UniformInt(static_cast<uint32_t>(i))]);
  }
}

std::string ImageSetKey(int64_t index, const std::string& path) { return RecordKey(index) + "_" + path; }

ImageSetResult ConvertImageSet(const std::string& root_folder, const std::string& list_path, const std::string& db_path,
                               const ImageSetOptions& given) {
  const ImageSetOptions options = CheckedOptions(given);
  std::vector<ImageListEntry> entries = ReadImageList(list_path);
  if (options.shuffle) {
    LOG(INFO) << "Shuffling data";
    ShuffleImageList(options.shuffle_seed, &entries);
  }
  LOG(INFO) << "A total of " << entries.size() << " images.";
  const bool encoded = options.encoded || !options.encode_type.empty();
  if (encoded && !options.encoded) LOG(INFO) << "encode_type specified, assuming encoded=true.";
  const ImageColor color = options.gray ? ImageColor::kGray : ImageColor::kColor;

  PartialDatabase partial;
  std::unique_ptr<DbWriter> writer = CreateDbWriter(options.backend, db_path, options.transaction_size);
  partial.Arm(db_path);  // only now: a path that existed before is not ours to remove
  ImageSetResult result;
  result.listed = static_cast<int64_t>(entries.size());
  std::optional<std::pair<ImageShape, std::string>> first;  // the first image's size and file, for check_size
  for (size_t index = 0; index < entries.size(); ++index) {
    const ImageListEntry& entry = entries[index];
    const std::string file = root_folder + entry.path;
    Datum datum;
    ImageShape shape;
    try {
      if (encoded) {
        datum = ReadImageToEncodedDatum(file, entry.label, options.resize_height, options.resize_width, color,
                                        options.encode_type, &shape);
      } else {
        datum = ReadImageToDatum(file, entry.label, options.resize_height, options.resize_width, color);
        shape = ImageShape{datum.channels(), datum.height(), datum.width()};
      }
    } catch (const Error& error) {
      LOG(WARNING) << "line " << entry.line << " of '" << list_path << "': " << error.what() << "; skipping it";
      result.skipped.push_back({entry, error.what()});
      continue;
    }
    if (options.check_size) {
      if (!first) {
        first.emplace(shape, file);
      } else {
        const ImageShape& expected = first->first;
        CREMA_CHECK(shape.channels == expected.channels && shape.height == expected.height &&
                    shape.width == expected.width)
            << "image '" << file << "' (line " << entry.line << " of '" << list_path << "') is " << ShapeText(shape)
            << " (channels x height x width), but the first image, '" << first->second << "', is "
            << ShapeText(expected) << "; check_size wants every image of one size (resize them with "
            << "resize_height and resize_width); no database written";
      }
    }
    writer->Put(ImageSetKey(static_cast<int64_t>(index), entry.path), datum.SerializeAsString());
    if (++result.records % static_cast<int64_t>(options.transaction_size) == 0) {
      LOG(INFO) << "Processed " << result.records << " files.";
    }
  }
  if (result.records % static_cast<int64_t>(options.transaction_size) != 0) {
    writer->Commit();
    LOG(INFO) << "Processed " << result.records << " files.";
  }
  if (result.records == 0) {
    const bool slash = root_folder.empty() || root_folder.back() == '/';
    CREMA_FAIL() << "none of the " << entries.size() << " images listed in '" << list_path
                 << "' could be read (see the warnings above); no database written"
                 << (slash ? ""
                           : " (the root folder '" + root_folder + "' is prepended as it is: did you mean '" +
                                 root_folder + "/'?)");
  }
  writer.reset();  // closes the database before it counts as complete
  partial.Release();
  return result;
}

}  // namespace crema
