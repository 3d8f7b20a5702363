#include "io/hdf5.hpp"

#include <hdf5.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <mutex>

#include "io/proto_io.hpp"

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

Hdf5File::Hdf5File(const std::string& path, Mode mode) : path_(path), mode_(mode) {
  SilenceHdf5ErrorPrinting();
  hid_t file = -1;
  switch (mode) {
    case Mode::kRead:
      file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
      break;
    case Mode::kReadWrite: {
      // The file is read whole and opened in memory: its bytes become the core driver's initial image.
      CREMA_CHECK(IsHdf5File(path)) << "cannot open HDF5 file '" << path
                                    << "' (missing, unreadable or not an HDF5 file)";
      const std::string image = ReadFileToString(path);
      Handle access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
      if (access.ok() && H5Pset_fapl_core(access.get(), 1 << 20, 0) >= 0 &&
          H5Pset_file_image(access.get(), const_cast<char*>(image.data()), image.size()) >= 0)
        // The core driver refuses an image under the name of a file that exists; "PATH/" names nothing that
        // can be opened (PATH is a file), and the name serves only HDF5's bookkeeping.
        file = H5Fopen((path + "/").c_str(), H5F_ACC_RDWR, access.get());
      break;
    }
    case Mode::kCreate:
    case Mode::kInMemory: {
      // The core driver without a backing store: nothing reaches the disk until Flush() or the caller writes
      // Image().
      Handle access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
      if (access.ok() && H5Pset_fapl_core(access.get(), 1 << 20, 0) >= 0)
        file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get());
      break;
    }
  }
  const bool creating = mode == Mode::kCreate || mode == Mode::kInMemory;
  CREMA_CHECK(file >= 0) << "cannot " << (creating ? "create" : "open") << " HDF5 file '" << path << "'"
                         << (creating ? "" : " (missing, unreadable or not an HDF5 file)");
  file_ = file;
}

Hdf5File::~Hdf5File() {
  if (file_ < 0) return;
  // Objects of the file still open (none, normally: every function closes its own) go first, so that the file
  // really closes now rather than at HDF5's shutdown.
  const hid_t file = static_cast<hid_t>(file_);
  const unsigned kinds = H5F_OBJ_DATASET | H5F_OBJ_GROUP | H5F_OBJ_DATATYPE | H5F_OBJ_LOCAL;
  const ssize_t open_count = H5Fget_obj_count(file, kinds);
  if (open_count > 0) {
    std::vector<hid_t> open_objects(static_cast<size_t>(open_count));
    const ssize_t listed = H5Fget_obj_ids(file, kinds, open_objects.size(), open_objects.data());
    for (ssize_t i = 0; i < listed; ++i) H5Oclose(open_objects[static_cast<size_t>(i)]);
  }
  H5Fclose(file);
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
  CREMA_CHECK(mode_ == Mode::kCreate || mode_ == Mode::kReadWrite)
      << "HDF5 file '" << path_ << "' was opened " << (mode_ == Mode::kRead ? "read-only" : "in memory only")
      << " and cannot be flushed to disk";
  WriteStringToFileAtomically(Image(), path_);
}

bool Hdf5File::HasGroup(const std::string& name) const {
  const hid_t file = static_cast<hid_t>(file_);
  if (name == "/") return true;
  if (H5Lexists(file, name.c_str(), H5P_DEFAULT) <= 0) return false;
  H5O_info_t info;
  if (H5Oget_info_by_name(file, name.c_str(), &info, H5P_DEFAULT) < 0) return false;
  return info.type == H5O_TYPE_GROUP;
}

void Hdf5File::CreateGroup(const std::string& name) {
  Handle links(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  CREMA_CHECK(links.ok() && H5Pset_create_intermediate_group(links.get(), 1) >= 0)
      << "cannot create group '" << name << "' in HDF5 file '" << path_ << "'";
  Handle group(H5Gcreate2(static_cast<hid_t>(file_), name.c_str(), links.get(), H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  CREMA_CHECK(group.ok()) << "cannot create group '" << name << "' in HDF5 file '" << path_
                          << "' (does it exist already?)";
}

std::vector<std::string> Hdf5File::Members(const std::string& group_name) const {
  CREMA_CHECK(HasGroup(group_name)) << "HDF5 file '" << path_ << "' has no group '" << group_name << "'";
  Handle group(H5Gopen2(static_cast<hid_t>(file_), group_name.c_str(), H5P_DEFAULT), H5Gclose);
  H5G_info_t info;
  CREMA_CHECK(group.ok() && H5Gget_info(group.get(), &info) >= 0)
      << "cannot list group '" << group_name << "' of HDF5 file '" << path_ << "'";
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t size = H5Lget_name_by_idx(group.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    CREMA_CHECK(size >= 0) << "cannot list group '" << group_name << "' of HDF5 file '" << path_ << "'";
    std::string name(static_cast<size_t>(size) + 1, '\0');
    H5Lget_name_by_idx(group.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size(), H5P_DEFAULT);
    name.resize(static_cast<size_t>(size));
    names.push_back(name);
  }
  return names;
}

namespace {

// Creates dataset `name` of `file_type` over `space` and writes `values` (of `memory_type`) to it.
void WriteDataset(hid_t file, const std::string& path, const std::string& name, hid_t file_type, hid_t memory_type,
                  hid_t space, const void* values) {
  CREMA_CHECK(space >= 0) << "cannot lay out dataset '" << name << "' in HDF5 file '" << path << "'";
  Handle dataset(H5Dcreate2(file, name.c_str(), file_type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
  CREMA_CHECK(dataset.ok()) << "cannot create dataset '" << name << "' in HDF5 file '" << path
                            << "' (does it exist already?)";
  if (H5Sget_simple_extent_npoints(space) == 0) return;  // an empty blob: the shape is all there is to store
  CREMA_CHECK(H5Dwrite(dataset.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) >= 0)
      << "cannot write dataset '" << name << "' of HDF5 file '" << path << "'";
}

}  // namespace

void Hdf5File::WriteFloats(const std::string& name, const std::vector<int>& shape, const float* values) {
  const std::vector<hsize_t> dims(shape.begin(), shape.end());
  Handle space(shape.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
               H5Sclose);
  WriteDataset(static_cast<hid_t>(file_), path_, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, space.get(), values);
}

void Hdf5File::WriteInt(const std::string& name, int value) {
  const hsize_t one = 1;
  Handle space(H5Screate_simple(1, &one, nullptr), H5Sclose);
  WriteDataset(static_cast<hid_t>(file_), path_, name, H5T_STD_I32LE, H5T_NATIVE_INT, space.get(), &value);
}

void Hdf5File::WriteString(const std::string& name, const std::string& value) {
  CREMA_CHECK(value.find('\0') == std::string::npos)
      << "cannot store a string with a NUL character as dataset '" << name << "' of HDF5 file '" << path_ << "'";
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  CREMA_CHECK(type.ok() && H5Tset_size(type.get(), value.size() + 1) >= 0 &&
              H5Tset_strpad(type.get(), H5T_STR_NULLTERM) >= 0)
      << "cannot lay out dataset '" << name << "' in HDF5 file '" << path_ << "'";
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  WriteDataset(static_cast<hid_t>(file_), path_, name, type.get(), type.get(), space.get(), value.c_str());
}

void Hdf5File::WriteBytes(const std::string& name, const std::string& bytes) {
  const hsize_t size = bytes.size();
  Handle space(H5Screate_simple(1, &size, nullptr), H5Sclose);
  WriteDataset(static_cast<hid_t>(file_), path_, name, H5T_STD_U8LE, H5T_NATIVE_UCHAR, space.get(), bytes.data());
}

int Hdf5File::ReadInt(const std::string& name) const {
  CREMA_CHECK(HasDataset(name)) << "HDF5 file '" << path_ << "' has no dataset '" << name << "'";
  Handle dataset(H5Dopen2(static_cast<hid_t>(file_), name.c_str(), H5P_DEFAULT), H5Dclose);
  Handle type(dataset.ok() ? H5Dget_type(dataset.get()) : -1, H5Tclose);
  Handle space(dataset.ok() ? H5Dget_space(dataset.get()) : -1, H5Sclose);
  CREMA_CHECK(type.ok() && space.ok() && H5Tget_class(type.get()) == H5T_INTEGER &&
              H5Sget_simple_extent_npoints(space.get()) == 1)
      << "dataset '" << name << "' of HDF5 file '" << path_ << "' is not one integer";
  int value = 0;
  CREMA_CHECK(H5Dread(dataset.get(), H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, &value) >= 0)
      << "cannot read dataset '" << name << "' of HDF5 file '" << path_ << "'";
  return value;
}

std::string Hdf5File::ReadString(const std::string& name) const {
  CREMA_CHECK(HasDataset(name)) << "HDF5 file '" << path_ << "' has no dataset '" << name << "'";
  Handle dataset(H5Dopen2(static_cast<hid_t>(file_), name.c_str(), H5P_DEFAULT), H5Dclose);
  Handle type(dataset.ok() ? H5Dget_type(dataset.get()) : -1, H5Tclose);
  Handle space(dataset.ok() ? H5Dget_space(dataset.get()) : -1, H5Sclose);
  CREMA_CHECK(type.ok() && space.ok() && H5Tget_class(type.get()) == H5T_STRING &&
              H5Sget_simple_extent_npoints(space.get()) == 1)
      << "dataset '" << name << "' of HDF5 file '" << path_ << "' is not one string";
  std::string value;
  if (H5Tis_variable_str(type.get()) > 0) {
    // Written by h5py and others: the library allocates the characters, and must free them.
    Handle memory_type(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(memory_type.get(), H5T_VARIABLE);
    char* characters = nullptr;
    CREMA_CHECK(H5Dread(dataset.get(), memory_type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &characters) >= 0)
        << "cannot read dataset '" << name << "' of HDF5 file '" << path_ << "'";
    if (characters != nullptr) value = characters;
    H5Dvlen_reclaim(memory_type.get(), space.get(), H5P_DEFAULT, &characters);
  } else {
    std::string buffer(H5Tget_size(type.get()), '\0');
    CREMA_CHECK(H5Dread(dataset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data()) >= 0)
        << "cannot read dataset '" << name << "' of HDF5 file '" << path_ << "'";
    value = buffer.substr(0, buffer.find('\0'));
  }
  return value;
}

std::string Hdf5File::ReadBytes(const std::string& name) const {
  const std::vector<int64_t> dims = DatasetShape(name);
  CREMA_CHECK(dims.size() == 1) << "dataset '" << name << "' of HDF5 file '" << path_ << "' is not a list of bytes";
  std::string bytes(static_cast<size_t>(dims[0]), '\0');
  if (bytes.empty()) return bytes;
  Handle dataset(H5Dopen2(static_cast<hid_t>(file_), name.c_str(), H5P_DEFAULT), H5Dclose);
  CREMA_CHECK(dataset.ok() &&
              H5Dread(dataset.get(), H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()) >= 0)
      << "cannot read dataset '" << name << "' of HDF5 file '" << path_ << "'";
  return bytes;
}

std::string Hdf5File::Image() {
  const hid_t file = static_cast<hid_t>(file_);
  const ssize_t size = H5Fflush(file, H5F_SCOPE_GLOBAL) >= 0 ? H5Fget_file_image(file, nullptr, 0) : -1;
  CREMA_CHECK(size >= 0) << "cannot assemble HDF5 file '" << path_ << "' in memory";
  std::string image(static_cast<size_t>(size), '\0');
  CREMA_CHECK(H5Fget_file_image(file, image.data(), image.size()) == size)
      << "cannot assemble HDF5 file '" << path_ << "' in memory";
  return image;
}

bool IsHdf5File(const std::string& path) {
  // HDF5 looks for its superblock at 0 and at every power of two from 512 (after a user block).
  static const char kSignature[8] = {'\211', 'H', 'D', 'F', '\r', '\n', '\032', '\n'};
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) return false;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  for (std::streamoff offset = 0; offset + 8 <= size; offset = offset == 0 ? 512 : offset * 2) {
    char head[8];
    in.seekg(offset);
    if (!in.read(head, sizeof(head))) return false;
    if (std::memcmp(head, kSignature, sizeof(head)) == 0) return true;
  }
  return false;
}

}  // namespace crema
