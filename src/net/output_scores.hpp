// Means of a net's outputs over several forward passes, as `crema test` and the solver's test passes report
// them ("accuracy = 0.9", "loss = 0.3 (* 1 = 0.3 loss)").
#pragma once

#include <string>
#include <vector>

#include "net/net.hpp"

namespace crema {

class OutputScores {
 public:
  struct Mean {
    std::string blob;
    float value;
    float loss_weight;
  };

  // Adds every element of every output blob after one Forward of `net` (always the same net).
  void Add(const Net& net);
  int passes() const { return passes_; }
  // One entry per output element, in output order.
  std::vector<Mean> Means() const;
  // "name = value", with " (* weight = weighted loss)" for loss outputs.
  static std::string Describe(const Mean& mean);
  // The sums of every output and the number of passes, as one vector (for a sum over data-parallel ranks), and back.
  std::vector<double> Totals() const;
  void SetTotals(const std::vector<double>& totals);

 private:
  std::vector<double> sums_;
  std::vector<std::string> names_;
  std::vector<float> weights_;
  int passes_ = 0;
};

}  // namespace crema
