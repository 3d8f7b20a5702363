// Batch inference (crema classify): feeds images from an InputSource through a deploy net, batch by batch, and
// reports each image's k best classes, with the top-1 and top-k accuracy over the images whose label is known.
//
// The net is a deploy net: one input (an Input layer, or the legacy net-level `input` fields) of shape
// N x C x H x W, and its last output (the top no layer reads, e.g. `prob`) holding one score per class for each
// of the N images. Each image is read or decoded as grey (C = 1) or colour (C = 3), resized to H x W where its
// size differs, and transformed as a Data layer in the TEST phase would (DataTransformer): the mean (a mean file
// or per-channel values) subtracted, then multiplied by the scale. So the scores are the ones `crema test`
// computes for the same records through a Data layer with the same transform_param.
//
// The batch is always full: a last partial batch is padded with zeros, whose scores are dropped. An image's scores
// therefore never depend on how many images follow it, and the net is never reshaped mid-run.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "io/data_transformer.hpp"
#include "net/net.hpp"
#include "tools/lib/input_source.hpp"

namespace crema {

struct ClassifierOptions {
  // The mean (mean_file, or mean_value once or once per channel) and the scale; cropping and mirroring are not
  // used (an image is resized to the input instead).
  TransformationParameter transform;
  // Images per forward pass; 0: the input's own first dimension.
  int batch_size = 0;
  // How many classes to report per image; more than the net has are clamped to all of them, with a warning.
  int top_k = 5;
  // The class names, index by index (a labels file: ReadLabelsFile); empty: classes are named by index.
  std::vector<std::string> class_names;
  // Where the names came from, for messages (the labels file's path).
  std::string class_names_origin;
};

struct ClassScore {
  int label;
  float score;
};

struct Prediction {
  std::string key;              // the image's path or the record's key
  std::optional<int> label;     // the known label, where the source gives one
  std::vector<ClassScore> top;  // the best classes, best first (ties: lower class index first)
};

struct ClassificationProgress {
  int64_t classified = 0;
  int64_t skipped = 0;
  int64_t total = 0;  // the items the source holds
  int64_t batches = 0;
  double seconds = 0;
};

struct ClassificationSummary {
  int64_t classified = 0;
  int64_t skipped = 0;       // items that could not be read or fitted (each named in a warning)
  int64_t labelled = 0;      // classified items with a known label
  int64_t top1_correct = 0;  // of them, those whose best class is the label
  int64_t topk_correct = 0;  // and those whose label is among the k best
  int top_k = 0;
  double seconds = 0;
  double images_per_second() const { return seconds > 0 ? classified / seconds : 0.0; }
  double top1_accuracy() const { return labelled > 0 ? static_cast<double>(top1_correct) / labelled : 0.0; }
  double topk_accuracy() const { return labelled > 0 ? static_cast<double>(topk_correct) / labelled : 0.0; }
  // The summary lines a tool logs: the count and throughput, the skipped items, the accuracies.
  std::vector<std::string> Describe() const;
};

class Classifier {
 public:
  // Checks the net (one 4-d input; an output with one score per class for each image of the batch), reshapes its
  // input to options.batch_size, checks the class names against the classes and the transform against the input
  // shape (a mean file's shape, the number of mean values); every error names the blob, file or flag at fault.
  Classifier(Net* net, ClassifierOptions options);

  // Classifies every item of `source` in order, calling `on_prediction` for each classified item and
  // `on_batch` after each forward pass. Items that cannot be read or fitted to the input are skipped with a
  // warning naming them. Throws when the source needs what the input cannot take (image files for an input of
  // neither 1 nor 3 channels).
  ClassificationSummary Run(InputSource* source, const std::function<void(const Prediction&)>& on_prediction,
                            const std::function<void(const ClassificationProgress&)>& on_batch = nullptr);

  // "input 'data' 64 x 1 x 28 x 28, output 'prob' (Softmax, 10 classes): probabilities"
  std::string Describe() const;
  const std::string& input_name() const { return input_name_; }
  const std::string& output_name() const { return output_name_; }
  // Whether the output is a Softmax's (probabilities) rather than raw scores (e.g. an InnerProduct's).
  bool output_is_probability() const { return output_is_probability_; }
  int classes() const { return classes_; }
  int top_k() const { return top_k_; }
  int batch_size() const { return batch_size_; }

  // Class `index` as reported: its name when names were given, else the index.
  std::string ClassName(int index) const;
  // The CSV of the predictions: a header `key,label,top1_label,top1_score,...` and one row per image: the key,
  // the known label (empty when unknown), then the k best classes and their scores. Fields holding a comma, a
  // quote or a line break are quoted (RFC 4180).
  std::string CsvHeader() const;
  std::string CsvRow(const Prediction& prediction) const;

 private:
  Net* net_;
  ClassifierOptions options_;
  DataTransformer transformer_;
  Blob* input_ = nullptr;
  std::string input_name_;
  int output_id_ = -1;
  std::string output_name_;
  std::string output_layer_type_;
  bool output_is_probability_ = false;
  int batch_size_ = 0, channels_ = 0, height_ = 0, width_ = 0;
  int classes_ = 0;
  int top_k_ = 0;
};

// The class names of a labels file, one a line (trailing spaces and a trailing carriage return dropped; blank lines
// at the end ignored). Throws naming the file when it cannot be read or names no class.
std::vector<std::string> ReadLabelsFile(const std::string& path);

// Progress while classifying: on a terminal, one line redrawn in place (a bar, the count, images/s); elsewhere (a
// log file, a pipe) a log line every `log_every_batches` batches.
class ClassificationProgressDisplay {
 public:
  ClassificationProgressDisplay(bool terminal, int log_every_batches)
      : terminal_(terminal), log_every_batches_(log_every_batches) {}
  void Update(const ClassificationProgress& progress);
  // Ends the terminal's line, so that the summary starts on its own.
  void Finish();

 private:
  bool terminal_;
  int log_every_batches_;
  bool drawn_ = false;
};

}  // namespace crema
