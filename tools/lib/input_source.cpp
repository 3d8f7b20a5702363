#include "tools/lib/input_source.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>
#include <utility>
#include <vector>

#include "io/db.hpp"
#include "io/image_io.hpp"

namespace crema {

namespace fs = std::filesystem;

bool HasImageExtension(const std::string& path) {
  static const std::set<std::string> kExtensions = {".bmp",  ".dib",  ".jpeg", ".jpg", ".jpe", ".jp2", ".png",
                                                    ".webp", ".pbm",  ".pgm",  ".ppm", ".pnm", ".pxm", ".sr",
                                                    ".ras",  ".tiff", ".tif",  ".exr", ".hdr", ".pic"};
  std::string extension = fs::path(path).extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return kExtensions.count(extension) > 0;
}

namespace {

// Image files, each with the key it is reported under and its label where known.
class ImageFileSource : public InputSource {
 public:
  struct Entry {
    std::string key;
    std::string path;
    std::optional<int> label;
  };
  ImageFileSource(std::string description, std::vector<Entry> entries)
      : description_(std::move(description)), entries_(std::move(entries)) {}

  std::string Describe() const override { return description_; }
  int64_t size() const override { return static_cast<int64_t>(entries_.size()); }
  bool reads_image_files() const override { return true; }
  bool Next(InputItem* item) override {
    if (next_ >= entries_.size()) return false;
    const Entry& entry = entries_[next_++];
    item->key = entry.key;
    item->label = entry.label;
    item->image_path = entry.path;
    item->datum.reset();
    item->problem.clear();
    return true;
  }

 private:
  std::string description_;
  std::vector<Entry> entries_;
  size_t next_ = 0;
};

class DatabaseSource : public InputSource {
 public:
  DatabaseSource(DataParameter::DB backend, const std::string& path)
      : backend_(backend), path_(path), reader_(OpenDbReader(backend, path)) {}

  std::string Describe() const override {
    return std::string(DbBackendName(backend_)) + " '" + path_ + "' (" + std::to_string(size()) + " records)";
  }
  int64_t size() const override { return static_cast<int64_t>(reader_->size()); }
  bool reads_image_files() const override { return false; }
  bool Next(InputItem* item) override {
    if (!reader_->Valid()) return false;
    item->key = PrintableKey(reader_->key());
    item->image_path.clear();
    item->problem.clear();
    item->label.reset();
    Datum datum;
    if (datum.ParseFromString(reader_->value())) {
      if (datum.has_label()) item->label = datum.label();
      item->datum = std::move(datum);
    } else {
      item->datum.reset();
      item->problem =
          std::string(DbBackendName(backend_)) + " '" + path_ + "': record '" + item->key + "' is not a Datum";
    }
    reader_->Next();
    return true;
  }

 private:
  DataParameter::DB backend_;
  std::string path_;
  std::unique_ptr<DbReader> reader_;
};

std::string Trimmed(const std::string& text) {
  size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  return text.substr(begin, end - begin);
}

// The integer `word` spells exactly; none when it is not one.
std::optional<int> ParseLabel(const std::string& word) {
  if (word.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(word.c_str(), &end, 10);
  if (end != word.c_str() + word.size() || errno != 0 || value < INT_MIN || value > INT_MAX) return std::nullopt;
  return static_cast<int>(value);
}

std::unique_ptr<InputSource> OpenListFile(const std::string& path, const std::string& root_folder) {
  std::ifstream in(path);
  CREMA_CHECK(in) << "cannot read the list file '" << path << "'";
  std::vector<ImageFileSource::Entry> entries;
  std::string line;
  int64_t labelled = 0;
  while (std::getline(in, line)) {
    line = Trimmed(line);
    if (line.empty()) continue;
    ImageFileSource::Entry entry;
    entry.key = line;
    const size_t space = line.find_last_of(" \t");
    if (space != std::string::npos) {
      entry.label = ParseLabel(line.substr(space + 1));
      if (entry.label) entry.key = Trimmed(line.substr(0, space));
    }
    labelled += entry.label.has_value();
    const bool relative = !entry.key.empty() && entry.key[0] != '/';
    entry.path = root_folder.empty() || !relative ? entry.key : (fs::path(root_folder) / entry.key).string();
    entries.push_back(std::move(entry));
  }
  CREMA_CHECK(!entries.empty()) << "the list file '" << path << "' names no images (expected lines 'path label')";
  std::ostringstream description;
  description << "list file '" << path << "' (" << entries.size() << " images, " << labelled << " with a label)";
  return std::make_unique<ImageFileSource>(description.str(), std::move(entries));
}

std::unique_ptr<InputSource> OpenFolder(const std::string& path) {
  std::vector<std::string> relative_paths;
  std::error_code error;
  fs::recursive_directory_iterator walk(path, fs::directory_options::skip_permission_denied, error);
  CREMA_CHECK(!error) << "cannot list the folder '" << path << "': " << error.message();
  for (const fs::recursive_directory_iterator end; walk != end; walk.increment(error)) {
    CREMA_CHECK(!error) << "cannot list the folder '" << path << "': " << error.message();
    std::error_code kind_error;
    if (walk->is_regular_file(kind_error) && HasImageExtension(walk->path().string()))
      relative_paths.push_back(walk->path().lexically_relative(path).generic_string());
  }
  CREMA_CHECK(!error) << "cannot list the folder '" << path << "': " << error.message();
  CREMA_CHECK(!relative_paths.empty()) << "the folder '" << path
                                       << "' holds no image files (nor a database: no data.mdb or CURRENT)";
  std::sort(relative_paths.begin(), relative_paths.end());
  std::vector<ImageFileSource::Entry> entries;
  for (const auto& relative : relative_paths) {
    ImageFileSource::Entry entry;
    entry.key = (fs::path(path) / relative).generic_string();
    entry.path = entry.key;
    entries.push_back(std::move(entry));
  }
  const std::string description = "folder '" + path + "' (" + std::to_string(entries.size()) + " images)";
  return std::make_unique<ImageFileSource>(description, std::move(entries));
}

std::string ShapeString(int channels, int height, int width) {
  return std::to_string(channels) + " x " + std::to_string(height) + " x " + std::to_string(width);
}

ImageColor ColorFor(int channels) { return channels == 1 ? ImageColor::kGray : ImageColor::kColor; }

Datum FitRecord(const Datum& record, int channels, int height, int width) {
  Datum datum = record;
  if (datum.encoded()) {
    CREMA_CHECK(channels == 1 || channels == 3)
        << "an encoded image decodes to 1 or 3 channels, but the net's input takes " << channels;
    datum = DecodeDatum(datum, ColorFor(channels));
  }
  const int64_t count = int64_t{datum.channels()} * datum.height() * datum.width();
  const std::string shape = ShapeString(datum.channels(), datum.height(), datum.width());
  CREMA_CHECK(datum.channels() > 0 && datum.height() > 0 && datum.width() > 0)
      << "the record has shape " << shape << " (channels x height x width); each must be positive";
  CREMA_CHECK(datum.channels() == channels)
      << "the record has " << datum.channels() << " channel(s), but the net's input takes " << channels;
  if (!datum.data().empty()) {
    CREMA_CHECK(static_cast<int64_t>(datum.data().size()) == count)
        << "the record of shape " << shape << " holds " << datum.data().size() << " bytes, not " << count;
    if (datum.height() != height || datum.width() != width)
      datum = CropResizeDatum(datum, 0, 0, datum.width() - 1, datum.height() - 1, height, width, false);
  } else {
    CREMA_CHECK(datum.float_data_size() == count)
        << "the record of shape " << shape << " holds " << datum.float_data_size() << " float values, not " << count;
    CREMA_CHECK(datum.height() == height && datum.width() == width)
        << "the record holds float values of shape " << shape << ", which cannot be resized to the net's input "
        << ShapeString(channels, height, width);
  }
  return datum;
}

}  // namespace

std::unique_ptr<InputSource> OpenInputSource(const std::string& path, const InputSourceOptions& options) {
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  CREMA_CHECK(fs::exists(status)) << "input '" << path << "' does not exist";
  if (fs::is_directory(status)) {
    const std::optional<DataParameter::DB> backend = options.backend ? options.backend : DetectDbBackend(path);
    if (backend) {
      auto source = std::make_unique<DatabaseSource>(*backend, path);
      CREMA_CHECK(source->size() > 0) << DbBackendName(*backend) << " '" << path << "' holds no records";
      return source;
    }
    return OpenFolder(path);
  }
  CREMA_CHECK(!options.backend) << "input '" << path << "' is a file, but --backend names a database (a folder)";
  if (HasImageExtension(path)) {
    std::vector<ImageFileSource::Entry> entries = {{path, path, std::nullopt}};
    return std::make_unique<ImageFileSource>("image '" + path + "'", std::move(entries));
  }
  return OpenListFile(path, options.root_folder);
}

Datum LoadInputImage(const InputItem& item, int channels, int height, int width) {
  Datum datum;
  if (!item.datum && item.image_path.empty()) CREMA_FAIL() << item.problem;
  if (item.datum) {
    try {
      datum = FitRecord(*item.datum, channels, height, width);
    } catch (const Error& error) {
      CREMA_FAIL() << "record '" << item.key << "': " << error.what();
    }
  } else {
    CREMA_CHECK(channels == 1 || channels == 3) << "an image file decodes to 1 or 3 channels, but the net's input "
                                                << "takes " << channels << " ('" << item.image_path << "')";
    datum = ReadImageToDatum(item.image_path, 0, height, width, ColorFor(channels));
  }
  datum.set_label(item.label.value_or(0));
  return datum;
}

}  // namespace crema
