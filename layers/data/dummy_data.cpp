#include "layers/data/dummy_data.hpp"

#include <algorithm>
#include <string>

#include "core/filler.hpp"

namespace crema {

void DummyDataLayer::LayerSetUp(const std::vector<Blob*>&, const std::vector<Blob*>& top) {
  const DummyDataParameter& param = param_.dummy_data_param();
  const std::string me = describe();
  const int tops = static_cast<int>(top.size());
  // A repeated field with one value for every top, or one per top.
  const auto per_top = [&](int given, const char* field) {
    CREMA_CHECK(given == 1 || given == tops) << me << ": dummy_data_param." << field << " has " << given
                                             << " values for " << tops << " tops; give one, or one per top";
    return [given](int t) { return given == 1 ? 0 : t; };
  };
  const int legacy = std::max({param.num_size(), param.channels_size(), param.height_size(), param.width_size()});
  CREMA_CHECK(param.shape_size() == 0 || legacy == 0)
      << me << ": give either dummy_data_param.shape or num/channels/height/width, not both";
  CREMA_CHECK(param.shape_size() > 0 || legacy > 0)
      << me << ": dummy_data_param needs a shape (or num, channels, height and width) for its tops";
  shapes_.clear();
  if (param.shape_size() > 0) {
    const auto index = per_top(param.shape_size(), "shape");
    for (int t = 0; t < tops; ++t) {
      try {
        shapes_.push_back(ShapeFromProto(param.shape(index(t))));
      } catch (const Error& error) {
        CREMA_FAIL() << me << ": dummy_data_param.shape " << index(t) << ": " << error.what();
      }
    }
  } else {
    const auto num = per_top(param.num_size(), "num"), channels = per_top(param.channels_size(), "channels");
    const auto height = per_top(param.height_size(), "height"), width = per_top(param.width_size(), "width");
    for (int t = 0; t < tops; ++t) {
      shapes_.push_back({static_cast<int>(param.num(num(t))), static_cast<int>(param.channels(channels(t))),
                         static_cast<int>(param.height(height(t))), static_cast<int>(param.width(width(t)))});
    }
  }
  fillers_.assign(tops, FillerParameter());  // constant 0
  refill_.assign(tops, false);
  if (param.data_filler_size() > 0) {
    const auto index = per_top(param.data_filler_size(), "data_filler");
    for (int t = 0; t < tops; ++t) {
      fillers_[t] = param.data_filler(index(t));
      refill_[t] = fillers_[t].type() != "constant";
    }
  }
  for (int t = 0; t < tops; ++t) {
    top[t]->Reshape(shapes_[t]);
    try {
      Fill(fillers_[t], top[t], random());
    } catch (const Error& error) {
      CREMA_FAIL() << me << ": dummy_data_param.data_filler for top " << t << ": " << error.what();
    }
  }
}

void DummyDataLayer::Reshape(const std::vector<Blob*>&, const std::vector<Blob*>& top) {
  for (size_t t = 0; t < top.size(); ++t) top[t]->Reshape(shapes_[t]);
}

void DummyDataLayer::Forward_cpu(const std::vector<Blob*>&, const std::vector<Blob*>& top) {
  for (size_t t = 0; t < top.size(); ++t)
    if (refill_[t]) Fill(fillers_[t], top[t], random());
}

}  // namespace crema
