#include "net/output_scores.hpp"

#include <sstream>

namespace crema {

void OutputScores::Add(const Net& net) {
  size_t k = 0;
  for (int id : net.output_blob_indices()) {
    const Blob& blob = *net.blobs()[id];
    const float* data = blob.cpu_data();
    for (int j = 0; j < blob.count(); ++j, ++k) {
      if (sums_.size() <= k) {
        sums_.push_back(0);
        names_.push_back(net.blob_names()[id]);
        weights_.push_back(net.blob_loss_weight(id));
      }
      sums_[k] += data[j];
    }
  }
  ++passes_;
}

std::vector<double> OutputScores::Totals() const {
  std::vector<double> totals = sums_;
  totals.push_back(passes_);
  return totals;
}

void OutputScores::SetTotals(const std::vector<double>& totals) {
  CREMA_CHECK(totals.size() == sums_.size() + 1)
      << "output totals of " << totals.size() - 1 << " outputs for a net of " << sums_.size();
  sums_.assign(totals.begin(), totals.end() - 1);
  passes_ = static_cast<int>(totals.back());
}

std::vector<OutputScores::Mean> OutputScores::Means() const {
  std::vector<Mean> means;
  for (size_t k = 0; k < sums_.size(); ++k)
    means.push_back({names_[k], static_cast<float>(sums_[k] / (passes_ > 0 ? passes_ : 1)), weights_[k]});
  return means;
}

std::string OutputScores::Describe(const Mean& mean) {
  std::ostringstream line;
  line << mean.blob << " = " << mean.value;
  if (mean.loss_weight != 0.f) line << " (* " << mean.loss_weight << " = " << mean.loss_weight * mean.value << " loss)";
  return line.str();
}

}  // namespace crema
