#include "layers/vision/crop.hpp"

#include <string>

#include "core/elementwise.hpp"

namespace crema {

void CropLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const CropParameter& param = param_.crop_param();
  const std::string me = describe();
  const Blob& data = *bottom[0];
  const Blob& reference = *bottom[1];
  const int axis = CanonicalAxis(data, param.axis(), "crop_param.axis");
  CREMA_CHECK(data.num_axes() == reference.num_axes())
      << me << ": the data (shape " << data.shape_string() << ") and the reference (shape " << reference.shape_string()
      << ") must have the same number of axes";
  const int cropped = data.num_axes() - axis;
  CREMA_CHECK(param.offset_size() <= 1 || param.offset_size() == cropped)
      << me << ": crop_param.offset is given " << param.offset_size() << " times, but crop_param.axis " << axis
      << " crops " << cropped << " axes of the data (shape " << data.shape_string()
      << "); give none, one for all, or one per cropped axis";
  std::vector<int> offsets(data.num_axes(), 0);
  std::vector<int> shape = data.shape();
  for (int i = axis; i < data.num_axes(); ++i) {
    const int offset = param.offset_size() == 0   ? 0
                       : param.offset_size() == 1 ? static_cast<int>(param.offset(0))
                                                  : static_cast<int>(param.offset(i - axis));
    CREMA_CHECK(offset >= 0 && static_cast<long long>(offset) + reference.shape(i) <= data.shape(i))
        << me << ": along axis " << i << ", crop_param.offset " << offset << " plus the reference's size "
        << reference.shape(i) << " passes the data's size " << data.shape(i) << " (data " << data.shape_string()
        << ", reference " << reference.shape_string() << ")";
    offsets[i] = offset;
    shape[i] = reference.shape(i);
  }
  top[0]->Reshape(shape);
  CropGeometry& g = geometry_;
  g.axes = 0;
  if (axis > 0) {  // the axes before `axis` are neither cropped nor offset: one axis for the rules
    g.bottom[0] = g.top[0] = data.count(0, axis);
    g.offset[0] = 0;
    g.axes = 1;
  }
  for (int i = axis; i < data.num_axes(); ++i, ++g.axes) {
    g.bottom[g.axes] = data.shape(i);
    g.top[g.axes] = shape[i];
    g.offset[g.axes] = offsets[i];
  }
}

void CropLayer::Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Device d = device();
  for_each_element(context(), top[0]->count(),
                   CropForwardRule{bottom[0]->data_on(d), top[0]->mutable_data_on(d), geometry_});
}

void CropLayer::Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                             const std::vector<Blob*>& bottom) {
  // The reference bottom gets no gradient: only its shape is used.
  if (!propagate_down[0]) return;
  const Device d = device();
  for_each_element(context(), bottom[0]->count(),
                   CropBackwardRule{top[0]->diff_on(d), bottom[0]->mutable_diff_on(d), geometry_});
}

}  // namespace crema
