#include "tools/lib/feature_extractor.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include "core/layout.hpp"
#include "io/db.hpp"
#include "io/hdf5.hpp"
#include "io/proto_io.hpp"

namespace crema {

FeatureFormat ParseFeatureFormat(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "lmdb") return FeatureFormat::kLmdb;
  if (lower == "leveldb") return FeatureFormat::kLevelDb;
  if (lower == "hdf5") return FeatureFormat::kHdf5;
  CREMA_FAIL() << "unknown feature format '" << name << "': use lmdb, leveldb or hdf5";
  return FeatureFormat::kLmdb;  // not reached
}

std::string FeatureKey(int64_t index) {
  char key[32];
  std::snprintf(key, sizeof(key), "%010lld", static_cast<long long>(index));
  return key;
}

namespace {

const char* FormatName(FeatureFormat format) {
  switch (format) {
    case FeatureFormat::kLmdb:
      return "LMDB";
    case FeatureFormat::kLevelDb:
      return "LevelDB";
    case FeatureFormat::kHdf5:
      break;
  }
  return "HDF5";
}

// Caffe's legacy channels x height x width of one item of `blob`; past 4 axes, everything after the first in
// channels.
void SetItemShape(const Blob& blob, Datum* datum) {
  if (blob.num_axes() <= 4) {
    datum->set_channels(blob.num_axes() > 1 ? blob.shape(1) : 1);
    datum->set_height(blob.num_axes() > 2 ? blob.shape(2) : 1);
    datum->set_width(blob.num_axes() > 3 ? blob.shape(3) : 1);
  } else {
    datum->set_channels(blob.count(1));
    datum->set_height(1);
    datum->set_width(1);
  }
}

class DatabaseFeatures {
 public:
  DatabaseFeatures(DataParameter::DB backend, const std::string& blob_name, const std::string& path)
      : blob_name_(blob_name), writer_(CreateDbWriter(backend, path, 1000)) {}

  void Add(const Blob& blob) {
    const std::vector<float> values = PlainValues(blob);
    const int num = blob.num_axes() > 0 ? blob.shape(0) : 1;
    const size_t item_size = num > 0 ? values.size() / num : 0;
    Datum datum;
    SetItemShape(blob, &datum);
    for (int n = 0; n < num; ++n) {
      datum.clear_float_data();
      for (size_t v = n * item_size; v < (n + 1) * item_size; ++v) datum.add_float_data(values[v]);
      writer_->Put(FeatureKey(items_), datum.SerializeAsString());
      if (++items_ % 1000 == 0)
        LOG(INFO) << "Extracted features of " << items_ << " query images for feature blob " << blob_name_;
    }
  }
  int64_t Finish() {
    writer_->Commit();
    return items_;
  }

 private:
  std::string blob_name_;
  std::unique_ptr<DbWriter> writer_;
  int64_t items_ = 0;
};

// Appends `blob`'s items to dataset `name` (groups made for a name with slashes, as "pool5/7x7_s1").
void AppendBlob(Hdf5File* file, const std::string& name, const Blob& blob) {
  const size_t slash = name.find_last_of('/');
  if (slash != std::string::npos && slash > 0 && !file->HasGroup(name.substr(0, slash)))
    file->CreateGroup(name.substr(0, slash));
  std::vector<int> shape = blob.shape();
  if (shape.empty()) shape = {1};
  const std::vector<float> values = PlainValues(blob);
  file->AppendFloats(name, shape, values.data());
}

}  // namespace

std::vector<int64_t> ExtractFeatures(Net* net, const FeatureExtraction& job) {
  const size_t count = job.blob_names.size();
  CREMA_CHECK(count > 0) << "no blob to extract features from";
  CREMA_CHECK(job.outputs.size() == count)
      << count << " blob name(s) but " << job.outputs.size() << " output(s); give one output for each blob";
  CREMA_CHECK(job.mini_batches > 0) << "the number of mini-batches must be positive, got " << job.mini_batches;
  for (const auto& name : job.blob_names) {
    bool found = false;
    for (const auto& blob_name : net->blob_names()) found = found || blob_name == name;
    CREMA_CHECK(found) << "net '" << net->name() << "' has no blob '" << name << "' to extract";
  }
  if (!net->input_blobs().empty()) {
    for (size_t id = 0; id < net->blobs().size(); ++id)
      for (const Blob* input : net->input_blobs())
        CREMA_CHECK(net->blobs()[id].get() != input)
            << "net '" << net->name() << "' has the input '" << net->blob_names()[id]
            << "', which extract_features cannot fill: give a net whose data layer reads the data (a Data layer "
            << "in the TEST phase, say)";
  }
  std::set<std::string> distinct_outputs(job.outputs.begin(), job.outputs.end());
  for (const auto& output : distinct_outputs)
    CREMA_CHECK(!FileExists(output)) << FormatName(job.format) << " output '" << output
                                     << "' exists already; extract_features does not overwrite it";
  if (job.format == FeatureFormat::kHdf5) {
    std::set<std::pair<std::string, std::string>> datasets;
    for (size_t i = 0; i < count; ++i)
      CREMA_CHECK(datasets.insert({job.outputs[i], job.blob_names[i]}).second)
          << "blob '" << job.blob_names[i] << "' is named twice for HDF5 file '" << job.outputs[i] << "'";
  } else {
    CREMA_CHECK(distinct_outputs.size() == count)
        << "two blobs are named for one " << FormatName(job.format) << " database; give each blob its own";
  }

  std::vector<std::unique_ptr<DatabaseFeatures>> databases;
  std::map<std::string, std::unique_ptr<Hdf5File>> files;
  // Per HDF5 file: whether it gets the `label` dataset (the net has one, and it is not among the file's blobs).
  std::map<std::string, bool> with_labels;
  const bool has_label_blob =
      std::find(net->blob_names().begin(), net->blob_names().end(), "label") != net->blob_names().end();
  for (size_t i = 0; i < count; ++i) {
    LOG(INFO) << "Opening dataset " << job.outputs[i];
    if (job.format == FeatureFormat::kHdf5) {
      auto& file = files[job.outputs[i]];
      if (!file) {
        file = std::make_unique<Hdf5File>(job.outputs[i], Hdf5File::Mode::kCreate);
        with_labels[job.outputs[i]] = has_label_blob;
      }
      if (job.blob_names[i] == "label") with_labels[job.outputs[i]] = false;
    } else {
      const DataParameter::DB backend =
          job.format == FeatureFormat::kLmdb ? DataParameter::LMDB : DataParameter::LEVELDB;
      databases.push_back(std::make_unique<DatabaseFeatures>(backend, job.blob_names[i], job.outputs[i]));
    }
  }

  // The blobs written out, and the labels, stay readable after each pass (the net's memory plan keeps them).
  std::vector<std::string> kept = job.blob_names;
  if (has_label_blob) kept.push_back("label");
  net->PlanMemory(false);  // forward passes only
  net->KeepBlobs(kept);
  // Once it is known what is read: the inference rewrites never fold a blob written out away.
  net->RunAfterWeightsPasses();
  LOG(INFO) << "Extracting features";
  std::vector<int64_t> items(count, 0);
  for (int batch = 0; batch < job.mini_batches; ++batch) {
    net->Forward();
    for (size_t i = 0; i < count; ++i) {
      const Blob& blob = *net->blob_by_name(job.blob_names[i]);
      if (job.format == FeatureFormat::kHdf5) {
        AppendBlob(files[job.outputs[i]].get(), job.blob_names[i], blob);
        items[i] += blob.num_axes() > 0 ? blob.shape(0) : 1;
      } else {
        databases[i]->Add(blob);
      }
    }
    for (const auto& labelled : with_labels)
      if (labelled.second) AppendBlob(files[labelled.first].get(), "label", *net->blob_by_name("label"));
  }
  for (size_t i = 0; i < count; ++i) {
    if (job.format != FeatureFormat::kHdf5) items[i] = databases[i]->Finish();
    LOG(INFO) << "Extracted features of " << items[i] << " query images for feature blob " << job.blob_names[i];
  }
  for (auto& file : files) file.second->Flush();
  LOG(INFO) << "Successfully extracted the features!";
  return items;
}

}  // namespace crema
