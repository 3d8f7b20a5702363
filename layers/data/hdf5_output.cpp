#include "layers/data/hdf5_output.hpp"

#include "io/hdf5.hpp"

namespace crema {

void HDF5OutputLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  file_name_ = param_.hdf5_output_param().file_name();
  CREMA_CHECK(!file_name_.empty()) << describe() << ": hdf5_output_param.file_name is not set";
  try {
    // Written at once, so that a folder that is missing or full is named before the net runs.
    Hdf5File file(file_name_, Hdf5File::Mode::kCreate);
    file.Flush();
  } catch (const Error& error) {
    CREMA_FAIL() << describe() << ": " << error.what();
  }
}

void HDF5OutputLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  CREMA_CHECK(bottom[0]->num_axes() >= 1 && bottom[1]->num_axes() >= 1 && bottom[0]->shape(0) == bottom[1]->shape(0))
      << describe() << ": the data " << bottom[0]->shape_string() << " and the labels " << bottom[1]->shape_string()
      << " must have the same number of rows (first axis)";
}

void HDF5OutputLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  Reshape(bottom, top);  // the row counts must agree on every pass
  try {
    // Read, appended to in memory and written back whole (atomically), so that a failed pass (a full disk)
    // leaves the file of the passes before it.
    Hdf5File file(file_name_, Hdf5File::Mode::kReadWrite);
    // Both checked before either is written, so a refused pass leaves the file as it was.
    file.CheckAppendable("data", bottom[0]->shape());
    file.CheckAppendable("label", bottom[1]->shape());
    file.AppendFloats("data", bottom[0]->shape(), bottom[0]->cpu_data());
    file.AppendFloats("label", bottom[1]->shape(), bottom[1]->cpu_data());
    file.Flush();
  } catch (const Error& error) {
    CREMA_FAIL() << describe() << ": " << error.what();
  }
}

}  // namespace crema
