// What crema.NetSpec and crema.io need from the C++ side: the schema of a net's prototxt read off the compiled
// descriptors (Python has no protobuf module to ask), the parser itself, and the Datum, BlobProto and image
// conversions, so that Python writes and reads the very bytes the tools do.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/text_format.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "io/image_io.hpp"
#include "io/proto_io.hpp"

namespace crema {
namespace python {

namespace {

namespace pb = google::protobuf;

const char* KindOf(const pb::FieldDescriptor& field) {
  switch (field.cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_MESSAGE:
      return "message";
    case pb::FieldDescriptor::CPPTYPE_ENUM:
      return "enum";
    case pb::FieldDescriptor::CPPTYPE_BOOL:
      return "bool";
    case pb::FieldDescriptor::CPPTYPE_FLOAT:
    case pb::FieldDescriptor::CPPTYPE_DOUBLE:
      return "float";
    case pb::FieldDescriptor::CPPTYPE_STRING:
      return field.type() == pb::FieldDescriptor::TYPE_BYTES ? "bytes" : "string";
    case pb::FieldDescriptor::CPPTYPE_UINT32:
    case pb::FieldDescriptor::CPPTYPE_UINT64:
      return "uint";
    default:
      return "int";
  }
}

// message name -> [(field, repeated, kind, message or enum type name, [(enum value, number)])], for every message
// reachable from `root`, so that the Python side needs no copy of crema.proto that could drift from it.
void AddMessage(const pb::Descriptor& message, py::dict* schema, std::set<std::string>* seen) {
  if (!seen->insert(message.name()).second) return;
  py::list fields;
  for (int i = 0; i < message.field_count(); ++i) {
    const pb::FieldDescriptor& field = *message.field(i);
    std::string type_name;
    py::list enum_values;
    if (field.message_type() != nullptr) {
      type_name = field.message_type()->name();
      AddMessage(*field.message_type(), schema, seen);
    } else if (field.enum_type() != nullptr) {
      type_name = field.enum_type()->name();
      for (int v = 0; v < field.enum_type()->value_count(); ++v)
        enum_values.append(py::make_tuple(field.enum_type()->value(v)->name(), field.enum_type()->value(v)->number()));
    }
    fields.append(py::make_tuple(field.name(), field.is_repeated(), KindOf(field), type_name, enum_values));
  }
  (*schema)[py::str(message.name())] = fields;
}

py::dict NetSchema() {
  py::dict schema;
  std::set<std::string> seen;
  AddMessage(*NetParameter::descriptor(), &schema, &seen);
  return schema;
}

// The text the parser makes of `text`, printed back in field order: two texts that print the same are the same
// NetParameter.
std::string CanonicalNetText(const std::string& text) {
  NetParameter net;
  ReadProtoFromText(text, "net text", &net);
  std::string canonical;
  CREMA_CHECK(pb::TextFormat::PrintToString(net, &canonical)) << "cannot print the parsed net as text";
  return canonical;
}

py::bytes Serialize(const pb::Message& message) {
  std::string bytes;
  CREMA_CHECK(message.SerializeToString(&bytes)) << "cannot serialize a " << message.GetTypeName();
  return py::bytes(bytes);
}

// (C x H x W array, label): uint8 from `data` (encoded images decoded as stored, B G R), float32 from float_data.
py::tuple DatumToArray(const py::bytes& bytes) {
  Datum datum;
  ReadProtoFromBinary(std::string(bytes), "Datum bytes", &datum);
  if (datum.encoded()) datum = DecodeDatum(datum, ImageColor::kAsStored);
  const std::vector<py::ssize_t> shape = {datum.channels(), datum.height(), datum.width()};
  const size_t count = static_cast<size_t>(datum.channels()) * datum.height() * datum.width();
  CREMA_CHECK(datum.channels() >= 0 && datum.height() >= 0 && datum.width() >= 0)
      << "the Datum's shape " << datum.channels() << " x " << datum.height() << " x " << datum.width()
      << " has a negative size";
  if (!datum.data().empty()) {
    CREMA_CHECK(datum.data().size() == count)
        << "the Datum holds " << datum.data().size() << " bytes of data, but its "
        << "shape " << datum.channels() << " x " << datum.height() << " x " << datum.width() << " needs " << count;
    py::array_t<uint8_t> values(shape);
    std::memcpy(values.mutable_data(), datum.data().data(), count);
    return py::make_tuple(std::move(values), datum.label());
  }
  CREMA_CHECK(static_cast<size_t>(datum.float_data_size()) == count)
      << "the Datum holds " << datum.float_data_size() << " float_data values, but its shape " << datum.channels()
      << " x " << datum.height() << " x " << datum.width() << " needs " << count;
  py::array_t<float> values(shape);
  std::copy(datum.float_data().begin(), datum.float_data().end(), values.mutable_data());
  return py::make_tuple(std::move(values), datum.label());
}

// A Datum with the shape (channels x height x width) of `values` and `label`, its values not yet set.
Datum DatumShapedAs(const py::array& values, int label) {
  CREMA_CHECK(values.ndim() == 3) << "a Datum holds a channels x height x width array, not one of " << values.ndim()
                                  << " axes";
  Datum datum;
  datum.set_channels(static_cast<int>(values.shape(0)));
  datum.set_height(static_cast<int>(values.shape(1)));
  datum.set_width(static_cast<int>(values.shape(2)));
  datum.set_label(label);
  return datum;
}

py::bytes Uint8ArrayToDatum(const py::array_t<uint8_t, py::array::c_style | py::array::forcecast>& values, int label) {
  Datum datum = DatumShapedAs(values, label);
  datum.set_data(reinterpret_cast<const char*>(values.data()), static_cast<size_t>(values.size()));
  return Serialize(datum);
}

py::bytes FloatArrayToDatum(const py::array_t<float, py::array::c_style | py::array::forcecast>& values, int label) {
  Datum datum = DatumShapedAs(values, label);
  datum.mutable_float_data()->Add(values.data(), values.data() + values.size());
  return Serialize(datum);
}

// A BlobProto's values in its shape: `shape` when set, else the legacy num x channels x height x width. Values
// stored as doubles come back as float64.
py::array BlobProtoToArray(const py::bytes& bytes, const std::string& origin) {
  BlobProto proto;
  ReadProtoFromBinary(std::string(bytes), origin, &proto);
  std::vector<py::ssize_t> shape;
  if (proto.has_shape()) {
    for (int64_t dim : proto.shape().dim()) shape.push_back(static_cast<py::ssize_t>(dim));
  } else {
    shape = {proto.num(), proto.channels(), proto.height(), proto.width()};
  }
  size_t count = 1;
  for (py::ssize_t dim : shape) {
    CREMA_CHECK(dim >= 0) << origin << ": the BlobProto has a negative dimension";
    count *= static_cast<size_t>(dim);
  }
  if (proto.double_data_size() > 0) {
    CREMA_CHECK(static_cast<size_t>(proto.double_data_size()) == count)
        << origin << ": the BlobProto holds " << proto.double_data_size() << " values, but its shape needs " << count;
    py::array_t<double> values(shape);
    std::copy(proto.double_data().begin(), proto.double_data().end(), values.mutable_data());
    return std::move(values);
  }
  CREMA_CHECK(static_cast<size_t>(proto.data_size()) == count)
      << origin << ": the BlobProto holds " << proto.data_size() << " values, but its shape needs " << count;
  py::array_t<float> values(shape);
  std::copy(proto.data().begin(), proto.data().end(), values.mutable_data());
  return std::move(values);
}

py::bytes ArrayToBlobProto(const py::array_t<float, py::array::c_style | py::array::forcecast>& values) {
  BlobProto proto;
  for (py::ssize_t axis = 0; axis < values.ndim(); ++axis) proto.mutable_shape()->add_dim(values.shape(axis));
  proto.mutable_data()->Add(values.data(), values.data() + values.size());
  return Serialize(proto);
}

// The image as crema's data layers read it: channels x height x width bytes, B G R for colour.
py::array_t<uint8_t> ReadImage(const std::string& path, bool color) {
  const Datum datum = ReadImageToDatum(path, 0, 0, 0, color ? ImageColor::kColor : ImageColor::kGray);
  py::array_t<uint8_t> values({datum.channels(), datum.height(), datum.width()});
  std::memcpy(values.mutable_data(), datum.data().data(), datum.data().size());
  return values;
}

}  // namespace

void BindIo(py::module_& module) {
  module.def("net_schema", &NetSchema,
             "{message: [(field, repeated, kind, type name, [(enum value, number)])]} of NetParameter and every "
             "message it holds, read from crema's compiled schema (crema.NetSpec writes prototxt from it).");
  module.def("parse_net_text", &CanonicalNetText, py::arg("text"),
             "Parses prototxt text as a NetParameter and prints it back in the schema's field order; raises "
             "crema.Error with the line and column of a syntax error.");
  module.def("datum_to_array", &DatumToArray, py::arg("datum"));
  module.def("uint8_array_to_datum", &Uint8ArrayToDatum, py::arg("array"), py::arg("label"));
  module.def("float_array_to_datum", &FloatArrayToDatum, py::arg("array"), py::arg("label"));
  module.def("blobproto_to_array", &BlobProtoToArray, py::arg("blobproto"), py::arg("origin"));
  module.def("array_to_blobproto", &ArrayToBlobProto, py::arg("array"));
  module.def("read_image", &ReadImage, py::arg("path"), py::arg("color"));
  module.def("image_codecs_available", &ImageCodecsAvailable);
}

}  // namespace python
}  // namespace crema
