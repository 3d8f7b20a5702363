#include "io/hdf5.hpp"

#include <hdf5.h>

#include <algorithm>
#include <mutex>

namespace crema {

namespace {

void SilenceHdf5ErrorPrinting() {
  static std::once_flag once;
  std::call_once(once, [] { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); });
}

std::string DimsString(const std::vector<int64_t>& dims) {
  std::string text = "(";
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + ")";
}

// Closes an HDF5 handle when it goes out of scope.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

std::vector<int64_t> SpaceDims(hid_t space) {
  const int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(rank > 0 ? rank : 0);
  if (rank > 0) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  return std::vector<int64_t>(dims.begin(), dims.end());
}

}  // namespace

Hdf5File::Hdf5File(const std::string& path, Mode mode) : path_(path) {
  SilenceHdf5ErrorPrinting();
  hid_t file = -1;
  switch (mode) {
    case Mode::kRead:
      file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
      break;
    case Mode::kReadWrite:
      file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
      break;
    case Mode::kCreate:
      file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
      break;
  }
  CREMA_CHECK(file >= 0) << "cannot " << (mode == Mode::kCreate ? "create" : "open") << " HDF5 file '" << path << "'"
                         << (mode == Mode::kCreate ? "" : " (missing, unreadable or not an HDF5 file)");
  file_ = file;
}

Hdf5File::~Hdf5File() {
  if (file_ >= 0) H5Fclose(static_cast<hid_t>(file_));
}

bool Hdf5File::HasDataset(const std::string& name) const {
  const hid_t file = static_cast<hid_t>(file_);
  if (H5Lexists(file, name.c_str(), H5P_DEFAULT) <= 0) return false;
  H5O_info_t info;
  if (H5Oget_info_by_name(file, name.c_str(), &info, H5P_DEFAULT) < 0) return false;
  return info.type == H5O_TYPE_DATASET;
}

std::vector<int64_t> Hdf5File::DatasetShape(const std::string& name) const {
  CREMA_CHECK(HasDataset(name)) << "HDF5 file '" << path_ << "' has no dataset '" << name << "'";
  Handle dataset(H5Dopen2(static_cast<hid_t>(file_), name.c_str(), H5P_DEFAULT), H5Dclose);
  CREMA_CHECK(dataset.ok()) << "cannot open dataset '" << name << "' of HDF5 file '" << path_ << "'";
  Handle type(H5Dget_type(dataset.get()), H5Tclose);
  const H5T_class_t type_class = type.ok() ? H5Tget_class(type.get()) : H5T_NO_CLASS;
  CREMA_CHECK(type_class == H5T_FLOAT || type_class == H5T_INTEGER)
      << "dataset '" << name << "' of HDF5 file '" << path_ << "' does not hold numbers (integers or floats)";
  Handle space(H5Dget_space(dataset.get()), H5Sclose);
  CREMA_CHECK(space.ok()) << "cannot read the shape of dataset '" << name << "' of HDF5 file '" << path_ << "'";
  return SpaceDims(space.get());
}

std::vector<float> Hdf5File::ReadFloats(const std::string& name) const {
  const std::vector<int64_t> dims = DatasetShape(name);
  int64_t count = 1;
  for (int64_t d : dims) count *= d;
  std::vector<float> values(static_cast<size_t>(count));
  if (count == 0) return values;
  Handle dataset(H5Dopen2(static_cast<hid_t>(file_), name.c_str(), H5P_DEFAULT), H5Dclose);
  CREMA_CHECK(dataset.ok() &&
              H5Dread(dataset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0)
      << "cannot read dataset '" << name << "' " << DimsString(dims) << " of HDF5 file '" << path_ << "'";
  return values;
}

void Hdf5File::AppendFloats(const std::string& name, const std::vector<int>& shape, const float* values) {
  CREMA_CHECK(!shape.empty()) << "cannot append a scalar to dataset '" << name << "' of HDF5 file '" << path_ << "'";
  const hid_t file = static_cast<hid_t>(file_);
  const int rank = static_cast<int>(shape.size());
  std::vector<hsize_t> rows_dims(shape.begin(), shape.end());
  const std::vector<int64_t> wanted(shape.begin(), shape.end());
  if (!HasDataset(name)) {
    std::vector<hsize_t> start = rows_dims, max = rows_dims, chunk = rows_dims;
    start[0] = 0;
    max[0] = H5S_UNLIMITED;
    chunk[0] = std::max<hsize_t>(1, rows_dims[0]);
    for (hsize_t& c : chunk) c = std::max<hsize_t>(1, c);
    Handle space(H5Screate_simple(rank, start.data(), max.data()), H5Sclose);
    Handle properties(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    CREMA_CHECK(space.ok() && properties.ok() && H5Pset_chunk(properties.get(), rank, chunk.data()) >= 0)
        << "cannot lay out dataset '" << name << "' " << DimsString(wanted) << " in HDF5 file '" << path_ << "'";
    Handle created(
        H5Dcreate2(file, name.c_str(), H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, properties.get(), H5P_DEFAULT),
        H5Dclose);
    CREMA_CHECK(created.ok()) << "cannot create dataset '" << name << "' in HDF5 file '" << path_ << "'";
  }
  CheckAppendable(name, shape);
  const std::vector<int64_t> existing = DatasetShape(name);
  Handle dataset(H5Dopen2(file, name.c_str(), H5P_DEFAULT), H5Dclose);
  std::vector<hsize_t> grown(existing.begin(), existing.end());
  grown[0] += rows_dims[0];
  CREMA_CHECK(dataset.ok() && H5Dset_extent(dataset.get(), grown.data()) >= 0)
      << "cannot extend dataset '" << name << "' " << DimsString(existing) << " of HDF5 file '" << path_ << "'";
  Handle file_space(H5Dget_space(dataset.get()), H5Sclose);
  std::vector<hsize_t> offset(rank, 0);
  offset[0] = static_cast<hsize_t>(existing[0]);
  Handle memory_space(H5Screate_simple(rank, rows_dims.data(), nullptr), H5Sclose);
  CREMA_CHECK(
      file_space.ok() && memory_space.ok() &&
      H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, offset.data(), nullptr, rows_dims.data(), nullptr) >= 0 &&
      H5Dwrite(dataset.get(), H5T_NATIVE_FLOAT, memory_space.get(), file_space.get(), H5P_DEFAULT, values) >= 0)
      << "cannot write " << DimsString(wanted) << " to dataset '" << name << "' of HDF5 file '" << path_ << "'";
}

void Hdf5File::CheckAppendable(const std::string& name, const std::vector<int>& shape) const {
  if (!HasDataset(name)) return;
  const std::vector<int64_t> existing = DatasetShape(name);
  const std::vector<int64_t> wanted(shape.begin(), shape.end());
  CREMA_CHECK(!wanted.empty() && existing.size() == wanted.size() &&
              std::equal(existing.begin() + 1, existing.end(), wanted.begin() + 1))
      << "cannot append rows of shape " << DimsString(wanted) << " to dataset '" << name << "' " << DimsString(existing)
      << " of HDF5 file '" << path_ << "': the dims after the first must agree";
}

void Hdf5File::Flush() {
  CREMA_CHECK(H5Fflush(static_cast<hid_t>(file_), H5F_SCOPE_GLOBAL) >= 0)
      << "cannot write HDF5 file '" << path_ << "' to disk";
}

}  // namespace crema
