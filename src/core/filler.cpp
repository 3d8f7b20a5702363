#include "core/filler.hpp"

#include <cmath>

namespace crema {

namespace {

// Fan-in and fan-out as Caffe defines them for a weight blob of shape (out, in, k...):
// fan_in = count / shape[0], fan_out = count / shape[1].
void fans(const Blob& blob, float* fan_in, float* fan_out) {
  CREMA_CHECK(blob.num_axes() >= 1 && blob.shape(0) > 0) << "cannot compute fan-in of a blob of shape "
                                                         << blob.shape_string();
  *fan_in = static_cast<float>(blob.count()) / blob.shape(0);
  // A blob with one axis (a bias) has no input axis: its fan-out is its whole size.
  *fan_out = blob.num_axes() > 1 && blob.shape(1) > 0 ? static_cast<float>(blob.count()) / blob.shape(1)
                                                      : static_cast<float>(blob.count());
}

float variance_scale(const FillerParameter& param, const Blob& blob) {
  float fan_in, fan_out;
  fans(blob, &fan_in, &fan_out);
  switch (param.variance_norm()) {
    case FillerParameter::FAN_OUT:
      return fan_out;
    case FillerParameter::AVERAGE:
      return (fan_in + fan_out) / 2.f;
    default:
      return fan_in;
  }
}

}  // namespace

std::vector<std::string> KnownFillerTypes() {
  return {"constant", "uniform", "gaussian", "positive_unitball", "xavier", "msra", "bilinear"};
}

void Fill(const FillerParameter& param, Blob* blob, RandomStream* random) {
  const std::string& type = param.type();
  const int n = blob->count();
  float* data = blob->mutable_cpu_data();
  if (type == "constant") {
    for (int i = 0; i < n; ++i) data[i] = param.value();
  } else if (type == "uniform") {
    CREMA_CHECK(param.min() <= param.max()) << "uniform filler: min " << param.min() << " exceeds max "
                                            << param.max();
    for (int i = 0; i < n; ++i) data[i] = random->Uniform(param.min(), param.max());
  } else if (type == "gaussian") {
    for (int i = 0; i < n; ++i) data[i] = random->Gaussian(param.mean(), param.std());
    if (param.sparse() >= 0) {
      // Keep each weight with probability sparse / num_outputs (the first axis), so each input feeds about
      // `sparse` outputs, as Caffe's schema defines the field.
      CREMA_CHECK(blob->num_axes() >= 1 && blob->shape(0) > 0)
          << "sparse gaussian filler needs a non-empty blob, got " << blob->shape_string();
      const float keep = static_cast<float>(param.sparse()) / blob->shape(0);
      for (int i = 0; i < n; ++i)
        if (!random->Bernoulli(keep)) data[i] = 0.f;
    }
  } else if (type == "positive_unitball") {
    // Uniform in [0, 1), then each row (all but the first axis) scaled to sum to one.
    CREMA_CHECK(blob->num_axes() >= 1 && blob->shape(0) > 0) << "positive_unitball filler needs a non-empty blob";
    for (int i = 0; i < n; ++i) data[i] = random->Uniform(0.f, 1.f);
    const int rows = blob->shape(0);
    const int width = n / rows;
    for (int r = 0; r < rows; ++r) {
      double sum = 0;
      for (int j = 0; j < width; ++j) sum += data[r * width + j];
      for (int j = 0; j < width; ++j) data[r * width + j] = static_cast<float>(data[r * width + j] / sum);
    }
  } else if (type == "xavier") {
    // Uniform in [-a, a] with a = sqrt(3 / fan): variance 1 / fan.
    const float limit = std::sqrt(3.f / variance_scale(param, *blob));
    for (int i = 0; i < n; ++i) data[i] = random->Uniform(-limit, limit);
  } else if (type == "msra") {
    // Gaussian with variance 2 / fan (He et al.).
    const float stddev = std::sqrt(2.f / variance_scale(param, *blob));
    for (int i = 0; i < n; ++i) data[i] = random->Gaussian(0.f, stddev);
  } else if (type == "bilinear") {
    // Bilinear up-sampling kernels for a deconvolution: shape (C, 1, K, K) with square K.
    CREMA_CHECK(blob->num_axes() == 4 && blob->shape(2) == blob->shape(3))
        << "bilinear filler needs a 4-d blob with square kernels, got " << blob->shape_string();
    const int kernel = blob->shape(3);
    const int factor = (kernel + 1) / 2;  // ceil(kernel / 2)
    // Centre of the kernel in units of `factor`, so each tap's weight is its linear-interpolation weight.
    const float centre = (2.f * factor - 1 - factor % 2) / (2.f * factor);
    for (int i = 0; i < n; ++i) {
      const float x = static_cast<float>(i % kernel) / factor;
      const float y = static_cast<float>((i / kernel) % kernel) / factor;
      data[i] = (1 - std::fabs(x - centre)) * (1 - std::fabs(y - centre));
    }
  } else {
    std::string known;
    for (const auto& name : KnownFillerTypes()) known += (known.empty() ? "" : ", ") + name;
    CREMA_FAIL() << "unknown filler type \"" << type << "\"; known types: " << known;
  }
}

}  // namespace crema
