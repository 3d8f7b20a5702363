#include "tools/lib/classifier.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <numeric>
#include <sstream>
#include <utility>

namespace crema {

namespace {

std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (const char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string ScoreText(float score) {
  std::ostringstream out;
  out << std::setprecision(6) << score;
  return out.str();
}

std::string Fraction(double value) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(4) << value;
  return out.str();
}

}  // namespace

Classifier::Classifier(Net* net, ClassifierOptions options)
    : net_(net), options_(std::move(options)), transformer_(options_.transform, TEST) {
  const std::vector<Blob*>& inputs = net_->input_blobs();
  CREMA_CHECK(!inputs.empty()) << "net '" << net_->name() << "' has no input to feed images to: a deploy net starts "
                               << "with an Input layer (or the net-level input and input_dim fields)";
  std::vector<std::string> input_names;
  for (size_t id = 0; id < net_->blobs().size(); ++id)
    for (const Blob* input : inputs)
      if (net_->blobs()[id].get() == input) input_names.push_back(net_->blob_names()[id]);
  std::ostringstream listed;
  for (const auto& name : input_names) listed << (listed.tellp() > 0 ? ", " : "") << "'" << name << "'";
  CREMA_CHECK(inputs.size() == 1) << "net '" << net_->name() << "' has " << inputs.size() << " inputs (" << listed.str()
                                  << "); classify feeds images to a net with one input";
  input_ = inputs[0];
  input_name_ = input_names.empty() ? std::string("(input)") : input_names[0];
  CREMA_CHECK(input_->num_axes() == 4) << "net '" << net_->name() << "': input '" << input_name_ << "' has shape "
                                       << input_->shape_string() << "; images need N x C x H x W";
  channels_ = input_->shape(1);
  height_ = input_->shape(2);
  width_ = input_->shape(3);
  CREMA_CHECK(options_.batch_size >= 0) << "the batch size must be positive, got " << options_.batch_size;
  batch_size_ = options_.batch_size > 0 ? options_.batch_size : input_->shape(0);
  CREMA_CHECK(batch_size_ > 0) << "net '" << net_->name() << "': input '" << input_name_ << "' has shape "
                               << input_->shape_string() << ", a batch of none; give a batch size";
  if (batch_size_ != input_->shape(0)) {
    input_->Reshape({batch_size_, channels_, height_, width_});
    net_->Reshape();
  }

  const std::vector<int>& outputs = net_->output_blob_indices();
  CREMA_CHECK(!outputs.empty()) << "net '" << net_->name() << "' has no output (a top that no layer reads)";
  output_id_ = outputs.back();
  output_name_ = net_->blob_names()[output_id_];
  for (const auto& step : net_->plan())
    for (int top : step.tops)
      if (top == output_id_) output_layer_type_ = net_->layers()[step.layer]->type();
  output_is_probability_ = output_layer_type_ == "Softmax";
  const Blob& output = *net_->blobs()[output_id_];
  CREMA_CHECK(output.num_axes() >= 1 && output.shape(0) == batch_size_)
      << "net '" << net_->name() << "': output '" << output_name_ << "' has shape " << output.shape_string()
      << ", but a batch of " << batch_size_ << " images needs one row of class scores per image (first axis "
      << batch_size_ << ")";
  classes_ = output.count() / batch_size_;
  CREMA_CHECK(classes_ > 0) << "net '" << net_->name() << "': output '" << output_name_ << "' has shape "
                            << output.shape_string() << ", no class scores";

  CREMA_CHECK(options_.top_k > 0) << "top_k must be positive, got " << options_.top_k;
  top_k_ = options_.top_k;
  if (top_k_ > classes_) {
    LOG(WARNING) << "top_k " << top_k_ << " is more than the " << classes_ << " classes of output '" << output_name_
                 << "': reporting all " << classes_;
    top_k_ = classes_;
  }
  const int names = static_cast<int>(options_.class_names.size());
  if (names > 0) {
    const std::string origin =
        options_.class_names_origin.empty() ? "the class names" : "labels file '" + options_.class_names_origin + "'";
    CREMA_CHECK(names >= classes_) << origin << " names " << names << " classes, but output '" << output_name_
                                   << "' of net '" << net_->name() << "' has " << classes_;
    if (names > classes_)
      LOG(WARNING) << origin << " names " << names << " classes, more than the " << classes_ << " of output '"
                   << output_name_ << "'; the names past " << classes_ << " are not used";
  }

  // A mean file of another shape, or mean values for another number of channels, is found now.
  Datum blank;
  blank.set_channels(channels_);
  blank.set_height(height_);
  blank.set_width(width_);
  blank.mutable_float_data()->Resize(channels_ * height_ * width_, 0.f);
  try {
    transformer_.InferBlobShape(blank);
  } catch (const Error& error) {
    CREMA_FAIL() << error.what() << " (the net's input '" << input_name_ << "' is " << input_->shape_string() << ")";
  }
}

std::string Classifier::Describe() const {
  std::ostringstream out;
  out << "input '" << input_name_ << "' " << input_->shape_string() << ", output '" << output_name_ << "' ("
      << (output_layer_type_.empty() ? std::string("?") : output_layer_type_) << ", " << classes_ << " classes): "
      << (output_is_probability_ ? "probabilities"
                                 : "the output's raw values (no Softmax ends the net), not probabilities");
  return out.str();
}

std::string Classifier::ClassName(int index) const {
  if (index >= 0 && index < static_cast<int>(options_.class_names.size())) return options_.class_names[index];
  return std::to_string(index);
}

std::string Classifier::CsvHeader() const {
  std::string header = "key,label";
  for (int k = 1; k <= top_k_; ++k) header += ",top" + std::to_string(k) + "_label,top" + std::to_string(k) + "_score";
  return header;
}

std::string Classifier::CsvRow(const Prediction& prediction) const {
  std::string row = CsvField(prediction.key) + "," + (prediction.label ? CsvField(ClassName(*prediction.label)) : "");
  for (const ClassScore& best : prediction.top)
    row += "," + CsvField(ClassName(best.label)) + "," + ScoreText(best.score);
  return row;
}

ClassificationSummary Classifier::Run(InputSource* source, const std::function<void(const Prediction&)>& on_prediction,
                                      const std::function<void(const ClassificationProgress&)>& on_batch) {
  CREMA_CHECK(!source->reads_image_files() || channels_ == 1 || channels_ == 3)
      << "the net's input '" << input_name_ << "' has " << channels_ << " channels, but images decode to 1 (grey) "
      << "or 3 (colour); " << source->Describe() << " holds image files";
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  ClassificationSummary summary;
  summary.top_k = top_k_;
  ClassificationProgress progress;
  progress.total = source->size();
  const size_t image_size = static_cast<size_t>(channels_) * height_ * width_;
  std::vector<InputItem> batch;
  std::vector<int> order(classes_);
  InputItem item;
  bool exhausted = false;
  while (!exhausted) {
    batch.clear();
    float* data = input_->mutable_cpu_data();
    while (static_cast<int>(batch.size()) < batch_size_) {
      if (!source->Next(&item)) {
        exhausted = true;
        break;
      }
      try {
        const Datum image = LoadInputImage(item, channels_, height_, width_);
        transformer_.Transform(image, data + batch.size() * image_size, nullptr);
        batch.push_back(item);
      } catch (const Error& error) {
        LOG(WARNING) << "Skipping '" << item.key << "': " << error.what();
        ++summary.skipped;
      }
    }
    if (batch.empty()) break;
    std::fill(data + batch.size() * image_size, data + batch_size_ * image_size, 0.f);
    net_->Forward();
    const float* scores = net_->blobs()[output_id_]->cpu_data();
    for (size_t n = 0; n < batch.size(); ++n) {
      const float* row = scores + n * classes_;
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + top_k_, order.end(),
                        [row](int a, int b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
      Prediction prediction;
      prediction.key = std::move(batch[n].key);
      prediction.label = batch[n].label;
      for (int k = 0; k < top_k_; ++k) prediction.top.push_back({order[k], row[order[k]]});
      ++summary.classified;
      if (prediction.label) {
        ++summary.labelled;
        summary.top1_correct += prediction.top[0].label == *prediction.label;
        for (const ClassScore& best : prediction.top)
          if (best.label == *prediction.label) ++summary.topk_correct;
      }
      if (on_prediction) on_prediction(prediction);
    }
    ++progress.batches;
    progress.classified = summary.classified;
    progress.skipped = summary.skipped;
    progress.seconds = elapsed();
    if (on_batch) on_batch(progress);
  }
  summary.seconds = elapsed();
  return summary;
}

std::vector<std::string> ClassificationSummary::Describe() const {
  std::vector<std::string> lines;
  std::ostringstream count;
  count << "Classified " << classified << " images in " << std::fixed << std::setprecision(2) << seconds << " s ("
        << std::setprecision(1) << images_per_second() << " images/s)";
  lines.push_back(count.str());
  if (skipped > 0)
    lines.push_back("Skipped " + std::to_string(skipped) + " unreadable images (each named in a warning above)");
  if (labelled == 0) {
    lines.push_back("No image had a known label: no accuracy to report");
    return lines;
  }
  const std::string of =
      " (" + std::to_string(top1_correct) + " of " + std::to_string(labelled) + " images with a " + "known label)";
  lines.push_back("Top-1 accuracy: " + Fraction(top1_accuracy()) + of);
  lines.push_back("Top-" + std::to_string(top_k) + " accuracy: " + Fraction(topk_accuracy()) + " (" +
                  std::to_string(topk_correct) + " of " + std::to_string(labelled) + ")");
  if (labelled < classified)
    lines.push_back(std::to_string(classified - labelled) + " classified images had no known label");
  return lines;
}

std::vector<std::string> ReadLabelsFile(const std::string& path) {
  std::ifstream in(path);
  CREMA_CHECK(in) << "cannot read the labels file '" << path << "'";
  std::vector<std::string> names;
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    names.push_back(line);
  }
  while (!names.empty() && names.back().empty()) names.pop_back();
  CREMA_CHECK(!names.empty()) << "the labels file '" << path << "' names no class (one name a line)";
  return names;
}

void ClassificationProgressDisplay::Update(const ClassificationProgress& progress) {
  const int64_t done = progress.classified + progress.skipped;
  const double rate = progress.seconds > 0 ? progress.classified / progress.seconds : 0.0;
  if (terminal_) {
    constexpr int kWidth = 30;
    const int filled =
        progress.total > 0 ? static_cast<int>(std::min<int64_t>(kWidth, done * kWidth / progress.total)) : 0;
    std::fprintf(stderr, "\r[%s%s] %lld/%lld images, %.1f images/s", std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, ' ').c_str(), static_cast<long long>(done),
                 static_cast<long long>(progress.total), rate);
    std::fflush(stderr);
    drawn_ = true;
    return;
  }
  if (log_every_batches_ > 0 && progress.batches % log_every_batches_ == 0)
    LOG(INFO) << "Batch " << progress.batches << ": " << done << " of " << progress.total << " images, " << std::fixed
              << std::setprecision(1) << rate << " images/s";
}

void ClassificationProgressDisplay::Finish() {
  if (drawn_) std::fprintf(stderr, "\n");
  drawn_ = false;
}

}  // namespace crema
