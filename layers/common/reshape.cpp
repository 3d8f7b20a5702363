#include "layers/common/reshape.hpp"

#include <sstream>

namespace crema {

namespace {

std::string ShapeText(const BlobShape& shape) {
  std::ostringstream text;
  for (int i = 0; i < shape.dim_size(); ++i) text << (i ? " " : "") << shape.dim(i);
  return text.str();
}

}  // namespace

void ReshapeLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const BlobShape& shape = param_.reshape_param().shape();
  copied_.clear();
  inferred_ = -1;
  fixed_count_ = 1;
  for (int i = 0; i < shape.dim_size(); ++i) {
    const long long dim = shape.dim(i);
    CREMA_CHECK(dim >= -1 && dim <= (1LL << 31) - 1)
        << describe() << ": reshape_param.shape (" << ShapeText(shape) << ") has dimension " << i << " = " << dim
        << "; dimensions are positive, 0 (copy the bottom's) or -1 (inferred)";
    if (dim == 0) {
      copied_.push_back(i);
    } else if (dim == -1) {
      CREMA_CHECK(inferred_ < 0) << describe() << ": reshape_param.shape (" << ShapeText(shape)
                                 << ") has more than one -1; only one dimension can be inferred";
      inferred_ = i;
    } else {
      fixed_count_ *= dim;
      CREMA_CHECK(fixed_count_ <= (1LL << 31) - 1)
          << describe() << ": reshape_param.shape (" << ShapeText(shape) << ") holds more values than a blob can";
    }
  }
}

void ReshapeLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const ReshapeParameter& p = param_.reshape_param();
  const Blob& x = *bottom[0];
  const int axes = x.num_axes();
  // axis -1 is the place after the last axis, so negative axes count places, one more than axes.
  const int start = p.axis() >= 0 ? p.axis() : axes + p.axis() + 1;
  CREMA_CHECK(start >= 0 && start <= axes)
      << describe() << ": reshape_param.axis " << p.axis() << " is outside the bottom of shape " << x.shape_string();
  CREMA_CHECK(p.num_axes() >= -1) << describe() << ": reshape_param.num_axes " << p.num_axes()
                                  << " must be -1 (to the end) or at least 0";
  const int end = p.num_axes() == -1 ? axes : start + p.num_axes();
  CREMA_CHECK(end <= axes) << describe() << ": reshape_param.axis " << p.axis() << " and reshape_param.num_axes "
                           << p.num_axes() << " reach past the bottom of shape " << x.shape_string();
  const BlobShape& shape = p.shape();
  std::vector<int> top_shape(x.shape().begin(), x.shape().begin() + start);
  for (int i = 0; i < shape.dim_size(); ++i) top_shape.push_back(static_cast<int>(shape.dim(i)));
  top_shape.insert(top_shape.end(), x.shape().begin() + end, x.shape().end());
  long long known = fixed_count_ * x.count(0, start) * x.count(end);
  for (int i : copied_) {
    CREMA_CHECK(start + i < axes) << describe() << ": reshape_param.shape (" << ShapeText(shape)
                                  << ") copies dimension " << start + i << " (a 0), which the bottom of shape "
                                  << x.shape_string() << " does not have";
    top_shape[start + i] = x.shape(start + i);
    known *= x.shape(start + i);
  }
  if (inferred_ >= 0) {
    CREMA_CHECK(known > 0 && x.count() % known == 0)
        << describe() << ": reshape_param.shape (" << ShapeText(shape) << ") cannot infer its -1: the other "
        << "dimensions hold " << known << " values, which do not divide the " << x.count() << " of the bottom of shape "
        << x.shape_string();
    top_shape[start + inferred_] = static_cast<int>(x.count() / known);
    known *= top_shape[start + inferred_];
  }
  CREMA_CHECK(known == x.count()) << describe() << ": reshape_param.shape (" << ShapeText(shape) << ") gives shape "
                                  << ShapeString(top_shape) << " (" << known << " values), but the bottom of shape "
                                  << x.shape_string() << " has " << x.count();
  top[0]->Reshape(top_shape);
}

}  // namespace crema
