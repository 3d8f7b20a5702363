// crema.Blob: a blob's shape, and its data and gradient as numpy arrays over the blob's host memory.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <vector>

#include "bindings.hpp"
#include "core/layout.hpp"

namespace crema {
namespace python {

namespace {

// What a view keeps alive: the blob's owner, and the storage itself. A reshape that grows a blob gives it new
// storage; a view made before it then still points at memory that exists (no longer the blob's), never at freed
// memory.
struct ViewBase {
  std::shared_ptr<void> owner;
  std::shared_ptr<SyncedMemory> storage;
};

// The numpy base object of a view, released when numpy frees the array.
py::capsule KeepAlive(const std::shared_ptr<void>& owner, const std::shared_ptr<SyncedMemory>& storage) {
  return py::capsule(new ViewBase{owner, storage}, [](void* base) { delete static_cast<ViewBase*>(base); });
}

// A blob in channel blocks cannot be shown as one N x C x H x W view (a channel's values are spread over blocks),
// so it is read out, in the order PlainValues uses, into an array of its own.
py::array BlockedCopy(const Blob& blob, bool diff) {
  CREMA_CHECK(blob.num_axes() == 4) << "a blob of shape " << blob.shape_string() << " is kept in "
                                    << LayoutName(blob.layout()) << ", which only 4-d blobs have";
  const float* values = diff ? blob.cpu_diff() : blob.cpu_data();
  const int num = blob.shape(0), channels = blob.shape(1), positions = blob.shape(2) * blob.shape(3);
  const int block = ChannelBlock(blob.layout(), channels);
  py::array_t<float> copy(std::vector<py::ssize_t>(blob.shape().begin(), blob.shape().end()));
  float* plain = copy.mutable_data();
  for (int n = 0; n < num; ++n)
    for (int c = 0; c < channels; ++c)
      for (int s = 0; s < positions; ++s)
        plain[(static_cast<size_t>(n) * channels + c) * positions + s] =
            values[((static_cast<size_t>(n) * (channels / block) + c / block) * positions + s) * block + c % block];
  copy.attr("setflags")(py::arg("write") = false);
  return std::move(copy);
}

py::tuple ShapeTuple(const Blob& blob) {
  py::tuple shape(blob.shape().size());
  for (size_t i = 0; i < blob.shape().size(); ++i) shape[i] = blob.shape()[i];
  return shape;
}

void Assign(const BlobHandle& handle, bool diff, const py::object& values) {
  py::array target = HostArray(handle, diff);
  CREMA_CHECK(target.writeable()) << "blob '" << handle.name << "' is kept in " << LayoutName(handle.blob->layout())
                                  << " between two oneDNN layers; its values can be read but not written from Python";
  // numpy's own assignment: broadcasting, conversion to float32, and its shape errors.
  target[py::ellipsis()] = values;
}

int LegacyAxis(const BlobHandle& handle, int index) {
  CREMA_CHECK(handle.blob->num_axes() <= 4)
      << "blob '" << handle.name << "' has " << handle.blob->num_axes()
      << " axes; num, channels, height and width are only defined for blobs of at most 4 (use .shape)";
  return index < handle.blob->num_axes() ? handle.blob->shape(index) : 1;
}

}  // namespace

py::array HostArray(const BlobHandle& handle, bool diff) {
  Blob& blob = *handle.blob;
  std::vector<py::ssize_t> shape(blob.shape().begin(), blob.shape().end());
  // An empty blob may have no storage at all: numpy gets an empty array of its own.
  if (blob.count() == 0) return py::array_t<float>(shape);
  const Layout layout = blob.layout();
  if (layout != Layout::kPlain && !(layout == Layout::kChannelsLast && blob.num_axes() == 4))
    return BlockedCopy(blob, diff);
  float* values = diff ? blob.mutable_cpu_diff() : blob.mutable_cpu_data();
  std::vector<py::ssize_t> strides(shape.size());
  if (layout == Layout::kPlain) {
    py::ssize_t stride = sizeof(float);
    for (size_t axis = shape.size(); axis-- > 0;) {
      strides[axis] = stride;
      stride *= shape[axis];
    }
  } else {  // channels-last: N x H x W x C in memory, still one strided view of N x C x H x W
    const py::ssize_t c = shape[1], h = shape[2], w = shape[3];
    strides = {static_cast<py::ssize_t>(sizeof(float)) * h * w * c, sizeof(float),
               static_cast<py::ssize_t>(sizeof(float)) * w * c, static_cast<py::ssize_t>(sizeof(float)) * c};
  }
  return py::array_t<float>(shape, strides, values, KeepAlive(handle.owner, diff ? blob.diff() : blob.data()));
}

void BindBlob(py::module_& module) {
  py::class_<BlobHandle>(module, "Blob",
                         "A blob of a net: an N-d float32 tensor (data) with its gradient (diff). data and diff are "
                         "numpy views of the blob's host memory; fetch them again after a reshape.")
      .def_property_readonly("name", [](const BlobHandle& h) { return h.name; })
      .def_property_readonly("shape", [](const BlobHandle& h) { return ShapeTuple(*h.blob); })
      .def_property_readonly("count", [](const BlobHandle& h) { return h.blob->count(); })
      .def_property_readonly("num_axes", [](const BlobHandle& h) { return h.blob->num_axes(); })
      // pycaffe's legacy 4-d names: axes a blob of fewer than four axes lacks count as 1.
      .def_property_readonly("num", [](const BlobHandle& h) { return LegacyAxis(h, 0); })
      .def_property_readonly("channels", [](const BlobHandle& h) { return LegacyAxis(h, 1); })
      .def_property_readonly("height", [](const BlobHandle& h) { return LegacyAxis(h, 2); })
      .def_property_readonly("width", [](const BlobHandle& h) { return LegacyAxis(h, 3); })
      .def_property_readonly("layout", [](const BlobHandle& h) { return LayoutName(h.blob->layout()); })
      .def_property(
          "data", [](const BlobHandle& h) { return HostArray(h, false); },
          [](const BlobHandle& h, const py::object& values) { Assign(h, false, values); })
      .def_property(
          "diff", [](const BlobHandle& h) { return HostArray(h, true); },
          [](const BlobHandle& h, const py::object& values) { Assign(h, true, values); })
      .def(
          "reshape",
          [](const BlobHandle& h, const py::args& dims) {
            std::vector<int> shape;
            // blob.reshape(2, 3) and blob.reshape((2, 3)) alike.
            py::iterable items = dims;
            if (dims.size() == 1 && !py::isinstance<py::int_>(dims[0])) items = dims[0];
            for (const py::handle item : items) shape.push_back(item.cast<int>());
            for (const int size : shape) CREMA_CHECK(size >= 0) << "blob '" << h.name << "': negative size in reshape";
            h.blob->Reshape(shape);
          },
          "Changes the blob's shape (the net's later layers follow on the next forward, or on net.reshape()).")
      .def("__repr__",
           [](const BlobHandle& h) { return "<crema.Blob '" + h.name + "' " + ShapeString(h.blob->shape()) + ">"; });
}

}  // namespace python
}  // namespace crema
