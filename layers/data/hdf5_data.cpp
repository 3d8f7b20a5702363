#include "layers/data/hdf5_data.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

#include "io/hdf5.hpp"

namespace crema {

namespace {

std::string Trimmed(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  const size_t last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

std::string DimsString(const std::vector<int64_t>& dims) {
  std::string text = "(";
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + ")";
}

template <typename T>
void Shuffle(std::vector<T>* values, RandomStream* random) {
  for (size_t i = values->size(); i > 1; --i) std::swap((*values)[i - 1], (*values)[random->UniformInt(i)]);
}

template <typename T>
std::string JoinNumbers(const std::vector<T>& values) {
  std::string text;
  for (size_t i = 0; i < values.size(); ++i) text += (i ? "," : "") + std::to_string(values[i]);
  return text;
}

// Parses "1,2,3" ("" is empty); false on anything else.
template <typename T>
bool ParseNumbers(const std::string& text, std::vector<T>* values) {
  values->clear();
  if (text.empty()) return true;
  std::istringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    try {
      size_t used = 0;
      const long long value = std::stoll(part, &used);
      if (used != part.size()) return false;
      values->push_back(static_cast<T>(value));
    } catch (const std::exception&) {
      return false;
    }
  }
  return true;
}

}  // namespace

void HDF5DataLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const HDF5DataParameter& p = param_.hdf5_data_param();
  CREMA_CHECK(!p.source().empty()) << describe() << ": hdf5_data_param.source is not set (a text file listing "
                                   << "the .h5 files)";
  CREMA_CHECK(p.batch_size() > 0) << describe() << ": hdf5_data_param.batch_size must be positive (it is "
                                  << p.batch_size() << ")";
  CREMA_CHECK(param_.top_size() >= static_cast<int>(top.size()))
      << describe() << ": every top needs a name (the dataset it reads)";
  batch_size_ = static_cast<int>(p.batch_size());
  shuffle_ = p.shuffle();
  replica_ = context().replica();
  datasets_.assign(param_.top().begin(), param_.top().begin() + top.size());

  const std::string& source = p.source();
  std::error_code error_code;
  CREMA_CHECK(!std::filesystem::is_directory(source, error_code))
      << describe() << ": hdf5_data_param.source '" << source
      << "' is a folder; source must be a text file listing HDF5 files, one per line";
  std::ifstream list_file(source, std::ios::binary);
  CREMA_CHECK(list_file) << describe() << ": cannot open hdf5_data_param.source '" << source << "'";
  std::ostringstream list_bytes;
  list_bytes << list_file.rdbuf();
  const std::string list_text = list_bytes.str();
  // Naming the .h5 file itself as the source is the common slip; its bytes would be read as file names.
  static const std::string kHdf5Signature("\x89HDF\r\n\x1a\n", 8);
  CREMA_CHECK(list_text.compare(0, kHdf5Signature.size(), kHdf5Signature) != 0)
      << describe() << ": hdf5_data_param.source '" << source << "' is an HDF5 file; source must be a text file "
      << "listing HDF5 files, one per line (write its path into a .txt file and name that)";
  const auto binary = std::find_if(list_text.begin(), list_text.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte < 0x20 && byte != '\t' && byte != '\n' && byte != '\r';
  });
  CREMA_CHECK(binary == list_text.end())
      << describe() << ": hdf5_data_param.source '" << source << "' is not a text file (line "
      << 1 + std::count(list_text.begin(), binary, '\n') << " holds control bytes); source must be a text file "
      << "listing HDF5 files, one per line";
  std::istringstream list(list_text);
  const std::filesystem::path list_dir = std::filesystem::path(source).parent_path();
  files_.clear();
  list_lines_.clear();
  std::string line;
  for (int number = 1; std::getline(list, line); ++number) {
    const std::string entry = Trimmed(line);
    if (entry.empty()) continue;
    std::filesystem::path path(entry);
    if (!std::filesystem::exists(path) && path.is_relative() && std::filesystem::exists(list_dir / path))
      path = list_dir / path;
    files_.push_back(path.string());
    list_lines_.push_back(number);
  }
  CREMA_CHECK(!files_.empty()) << describe() << ": the list '" << source << "' names no HDF5 files";

  // Every file must hold every dataset, with as many rows as the others and the first file's item shapes.
  rows_.clear();
  item_shapes_.assign(datasets_.size(), {});
  item_sizes_.assign(datasets_.size(), 0);
  std::vector<std::vector<int64_t>> first_dims(datasets_.size());
  for (size_t f = 0; f < files_.size(); ++f) {
    const std::string where =
        "file '" + files_[f] + "' (line " + std::to_string(list_lines_[f]) + " of '" + source + "')";
    try {
      Hdf5File file(files_[f], Hdf5File::Mode::kRead);
      int64_t rows = -1;
      for (size_t t = 0; t < datasets_.size(); ++t) {
        const std::vector<int64_t> dims = file.DatasetShape(datasets_[t]);
        CREMA_CHECK(!dims.empty() && dims[0] > 0) << "dataset '" << datasets_[t] << "' has shape " << DimsString(dims)
                                                  << "; it needs at least one axis (the items) and at least one item";
        if (f == 0) {
          first_dims[t] = dims;
          item_shapes_[t].assign(dims.begin() + 1, dims.end());
          item_sizes_[t] = 1;
          for (int d : item_shapes_[t]) item_sizes_[t] *= static_cast<size_t>(d);
        } else {
          CREMA_CHECK(std::equal(dims.begin() + 1, dims.end(), first_dims[t].begin() + 1, first_dims[t].end()))
              << "dataset '" << datasets_[t] << "' has shape " << DimsString(dims) << ", but in '" << files_[0]
              << "' it has shape " << DimsString(first_dims[t]) << "; items must have the same shape in every file";
        }
        if (t == 0) {
          rows = dims[0];
        } else {
          CREMA_CHECK(dims[0] == rows) << "dataset '" << datasets_[t] << "' has shape " << DimsString(dims)
                                       << " but dataset '" << datasets_[0] << "' has " << rows
                                       << " rows; every top's dataset needs the same number of rows";
        }
      }
      rows_.push_back(rows);
    } catch (const Error& error) {
      CREMA_FAIL() << describe() << ": " << where << ": " << error.what();
    }
  }
  LOG(INFO) << describe() << ": " << files_.size() << " HDF5 file(s), "
            << std::accumulate(rows_.begin(), rows_.end(), int64_t{0}) << " rows";

  file_order_.resize(files_.size());
  std::iota(file_order_.begin(), file_order_.end(), 0);
  if (shuffle_) Shuffle(&file_order_, random());
  file_position_ = 0;
  records_read_ = 0;
  loaded_file_ = -1;
  loaded_.assign(datasets_.size(), {});
  EnterFile();
}

void HDF5DataLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  for (size_t t = 0; t < top.size(); ++t) {
    std::vector<int> shape = item_shapes_[t];
    shape.insert(shape.begin(), batch_size_);
    top[t]->Reshape(shape);
  }
}

void HDF5DataLayer::EnterFile() {
  row_ = 0;
  row_order_.clear();
  if (!shuffle_) return;
  row_order_.resize(static_cast<size_t>(rows_[file_order_[file_position_]]));
  std::iota(row_order_.begin(), row_order_.end(), int64_t{0});
  Shuffle(&row_order_, random());
}

void HDF5DataLayer::Advance() {
  ++records_read_;
  if (++row_ < rows_[file_order_[file_position_]]) return;
  if (++file_position_ == static_cast<int>(file_order_.size())) {
    file_position_ = 0;
    if (shuffle_) Shuffle(&file_order_, random());
  }
  EnterFile();
}

void HDF5DataLayer::Load(int file) {
  if (file == loaded_file_) return;
  loaded_file_ = -1;
  try {
    Hdf5File h5(files_[file], Hdf5File::Mode::kRead);
    for (size_t t = 0; t < datasets_.size(); ++t) {
      loaded_[t] = h5.ReadFloats(datasets_[t]);
      CREMA_CHECK(loaded_[t].size() == item_sizes_[t] * static_cast<size_t>(rows_[file]))
          << "dataset '" << datasets_[t] << "' changed since set-up (it holds " << loaded_[t].size() << " values, not "
          << item_sizes_[t] * rows_[file] << ")";
    }
  } catch (const Error& error) {
    CREMA_FAIL() << describe() << ": " << error.what();
  }
  loaded_file_ = file;
}

void HDF5DataLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  CREMA_CHECK(!files_.empty()) << describe() << ": Forward before the layer was set up";
  Reshape(bottom, top);
  std::vector<float*> out(top.size());
  for (size_t t = 0; t < top.size(); ++t) out[t] = top[t]->mutable_cpu_data();
  // This replica's part of the global batch: the parts of the replicas before it come first.
  for (int i = 0; i < replica_.rank * batch_size_; ++i) Advance();
  for (int i = 0; i < batch_size_; ++i) {
    const int file = file_order_[file_position_];
    const int64_t row = shuffle_ ? row_order_[row_] : row_;
    Load(file);
    for (size_t t = 0; t < top.size(); ++t) {
      const size_t size = item_sizes_[t];
      std::copy_n(loaded_[t].data() + row * size, size, out[t] + i * size);
    }
    Advance();
  }
  for (int i = 0; i < (replica_.count - 1 - replica_.rank) * batch_size_; ++i) Advance();
}

void HDF5DataLayer::SaveRuntimeState(LayerRuntimeState* state) const {
  CREMA_CHECK(!files_.empty()) << describe() << ": cannot save the data cursor before the layer is set up";
  Layer::SaveRuntimeState(state);
  state->set_cursor_key("files=" + JoinNumbers(file_order_) + ";file=" + std::to_string(file_position_) +
                        ";row=" + std::to_string(row_) + ";rows=" + JoinNumbers(row_order_));
  state->set_records_read(records_read_);
}

void HDF5DataLayer::RestoreRuntimeState(const LayerRuntimeState& state) {
  CREMA_CHECK(!files_.empty()) << describe() << ": cannot restore the data cursor before the layer is set up";
  CREMA_CHECK(!state.has_layer() || state.layer() == name())
      << describe() << ": the saved runtime state belongs to layer '" << state.layer() << "'";
  CREMA_CHECK(state.has_cursor_key()) << describe() << ": the saved runtime state has no data cursor (cursor_key)";
  const std::string source = param_.hdf5_data_param().source();
  auto bad = [&](const std::string& why) {
    CREMA_FAIL() << describe() << ": the saved data cursor '" << state.cursor_key() << "' does not fit the "
                 << files_.size() << " file(s) listed in '" << source << "': " << why;
  };
  // "files=<order>;file=<position>;row=<row>;rows=<row order>"
  std::vector<int> order;
  std::vector<int64_t> position, row, row_order;
  std::istringstream in(state.cursor_key());
  std::string part;
  int fields = 0;
  while (std::getline(in, part, ';')) {
    const size_t eq = part.find('=');
    const std::string key = part.substr(0, eq), value = eq == std::string::npos ? "" : part.substr(eq + 1);
    bool ok = eq != std::string::npos;
    if (key == "files")
      ok = ok && ParseNumbers(value, &order);
    else if (key == "file")
      ok = ok && ParseNumbers(value, &position) && position.size() == 1;
    else if (key == "row")
      ok = ok && ParseNumbers(value, &row) && row.size() == 1;
    else if (key == "rows")
      ok = ok && ParseNumbers(value, &row_order);
    else
      ok = false;
    if (!ok) bad("cannot parse '" + part + "'");
    ++fields;
  }
  if (fields != 4) bad("it needs the fields files, file, row and rows");
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> identity(files_.size());
  std::iota(identity.begin(), identity.end(), 0);
  if (sorted != identity) bad("the file order is not an order of the listed files");
  if (position[0] < 0 || position[0] >= static_cast<int64_t>(files_.size())) bad("the file position is out of range");
  const int64_t rows = rows_[order[position[0]]];
  if (row[0] < 0 || row[0] >= rows) bad("the row is out of range");
  if (shuffle_) {
    std::vector<int64_t> sorted_rows = row_order, all_rows(static_cast<size_t>(rows));
    std::sort(sorted_rows.begin(), sorted_rows.end());
    std::iota(all_rows.begin(), all_rows.end(), int64_t{0});
    if (sorted_rows != all_rows) bad("the row order is not an order of the file's rows");
  } else if (!row_order.empty()) {
    bad("it was saved with shuffle, which is off now");
  }
  Layer::RestoreRuntimeState(state);
  file_order_ = order;
  file_position_ = static_cast<int>(position[0]);
  row_ = row[0];
  row_order_ = row_order;
  records_read_ = state.records_read();
}

std::vector<Layer::HeldBuffer> HDF5DataLayer::HeldBuffers() const {
  size_t floats = 0;
  for (const auto& values : loaded_) floats += values.size();
  if (floats == 0) return {};
  return {{"the datasets of '" + files_[loaded_file_] + "'", sizeof(float) * floats, Device::kCPU}};
}

}  // namespace crema
