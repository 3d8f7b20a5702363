#include "io/snapshot_io.hpp"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <vector>

#include "core/blob.hpp"
#include "io/hdf5.hpp"
#include "io/proto_io.hpp"

namespace crema {

namespace {

// crema's own SolverState fields, in a .solverstate.h5 (Caffe reads only its datasets and ignores this one).
const char kCremaStateDataset[] = "crema_state";

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A name that is only digits: a parameter blob's index within its layer group.
bool IsIndex(const std::string& name) {
  if (name.empty() || name.size() > 9) return false;
  for (char c : name)
    if (c < '0' || c > '9') return false;
  return true;
}

int64_t CountOf(const std::vector<int>& shape) {
  int64_t count = 1;
  for (int d : shape) count *= d;
  return count;
}

// The float values of a blob's data (or diff), whichever precision the proto holds them in.
std::vector<float> Values(const BlobProto& blob, bool diff) {
  const auto& singles = diff ? blob.diff() : blob.data();
  const auto& doubles = diff ? blob.double_diff() : blob.double_data();
  if (doubles.size() > 0) return std::vector<float>(doubles.begin(), doubles.end());
  return std::vector<float>(singles.begin(), singles.end());
}

// Writes one blob's data or diff as a float dataset in the blob's shape.
void WriteBlob(Hdf5File* file, const std::string& name, const BlobProto& blob, bool diff, const std::string& owner) {
  const std::vector<int> shape = Blob::ShapeOf(blob);
  const std::vector<float> values = Values(blob, diff);
  CREMA_CHECK(static_cast<int64_t>(values.size()) == CountOf(shape))
      << "cannot write " << owner << " to HDF5 file '" << file->path() << "': it has shape " << ShapeString(shape)
      << " but holds " << values.size() << " " << (diff ? "gradient" : "data") << " values";
  file->WriteFloats(name, shape, values.data());
}

// Reads a float dataset into a BlobProto's shape and data.
BlobProto ReadBlob(const Hdf5File& file, const std::string& name) {
  BlobProto blob;
  BlobShape* shape = blob.mutable_shape();
  for (int64_t d : file.DatasetShape(name)) {
    CREMA_CHECK(d <= std::numeric_limits<int>::max())
        << "dataset '" << name << "' of HDF5 file '" << file.path() << "' has an axis of " << d << " values";
    shape->add_dim(d);
  }
  const std::vector<float> values = file.ReadFloats(name);
  blob.mutable_data()->Add(values.begin(), values.end());
  return blob;
}

// Collects the layers under `group` (a path in the file): a group holding datasets named by index is a layer,
// named by its path below "data"; groups inside it are searched too, since a layer name with '/' in it
// ("inception_3a/1x1") is stored as nested groups.
void CollectLayers(const Hdf5File& file, const std::string& group, const std::string& layer_name,
                   NetParameter* weights) {
  int blobs = 0;
  for (const std::string& member : file.Members(group)) {
    const std::string path = group + "/" + member;
    if (IsIndex(member) && file.HasDataset(path)) {
      blobs = std::max(blobs, std::stoi(member) + 1);
    } else if (file.HasGroup(path)) {
      CollectLayers(file, path, layer_name.empty() ? member : layer_name + "/" + member, weights);
    }
  }
  if (blobs == 0) return;
  LayerParameter* layer = weights->add_layer();
  layer->set_name(layer_name);
  for (int j = 0; j < blobs; ++j) {
    const std::string data = group + "/" + std::to_string(j);
    BlobProto* blob = layer->add_blobs();
    if (!file.HasDataset(data)) continue;  // left to the owner of a shared parameter
    *blob = ReadBlob(file, data);
    const std::string diff = "diff/" + layer_name + "/" + std::to_string(j);
    if (file.HasDataset(diff)) {
      const std::vector<float> values = file.ReadFloats(diff);
      CREMA_CHECK(static_cast<int>(values.size()) == blob->data_size())
          << "HDF5 file '" << file.path() << "': dataset '" << diff << "' holds " << values.size()
          << " values but '" << data << "' holds " << blob->data_size();
      blob->mutable_diff()->Add(values.begin(), values.end());
    }
  }
}

// Reads a file that must be HDF5 when its name says so; returns whether it is HDF5.
bool CheckedIsHdf5(const std::string& path, const char* what) {
  CREMA_CHECK(FileExists(path)) << what << " file '" << path << "' does not exist";
  // A directory reads as an empty file, and an empty file as a message with nothing in it: both would pass for
  // weights that provide nothing, or a state with no history, instead of being named for what they are.
  std::error_code error;
  CREMA_CHECK(!std::filesystem::is_directory(path, error)) << what << " file '" << path << "' is a directory, not a file";
  CREMA_CHECK(std::filesystem::file_size(path, error) != 0 || error)
      << what << " file '" << path << "' is empty (0 bytes)";
  const bool hdf5 = IsHdf5File(path);
  CREMA_CHECK(hdf5 || !EndsWith(path, ".h5"))
      << what << " file '" << path << "' is named .h5 but is not an HDF5 file (it lacks HDF5's signature; "
      << "truncated, or a binary snapshot renamed?)";
  return hdf5;
}

}  // namespace

std::string WeightsExtension(SolverParameter::SnapshotFormat format) {
  return format == SolverParameter::HDF5 ? ".caffemodel.h5" : ".caffemodel";
}

std::string SolverStateExtension(SolverParameter::SnapshotFormat format) {
  return format == SolverParameter::HDF5 ? ".solverstate.h5" : ".solverstate";
}

void WriteWeightsFile(const NetParameter& weights, const std::string& path, SolverParameter::SnapshotFormat format) {
  if (format == SolverParameter::HDF5) {
    WriteNetParameterToHdf5File(weights, path);
  } else {
    WriteProtoToBinaryFile(weights, path);
  }
}

void WriteSolverStateFile(const SolverState& state, const std::string& path, SolverParameter::SnapshotFormat format) {
  if (format == SolverParameter::HDF5) {
    WriteSolverStateToHdf5File(state, path);
  } else {
    WriteProtoToBinaryFile(state, path);
  }
}

void ReadWeightsFile(const std::string& path, NetParameter* weights) {
  if (CheckedIsHdf5(path, "weights")) {
    ReadNetParameterFromHdf5File(path, weights);
  } else {
    ReadProtoFromBinaryFile(path, weights);
  }
}

void ReadSolverStateFile(const std::string& path, SolverState* state) {
  if (CheckedIsHdf5(path, "solver state")) {
    ReadSolverStateFromHdf5File(path, state);
  } else {
    ReadProtoFromBinaryFile(path, state);
    // Every writer of a solver state (Caffe's and ours) sets iter; a file that parses without one is another
    // kind of protobuf (a .caffemodel, whose fields SolverState skips as unknown).
    CREMA_CHECK(state->has_iter()) << "solver state file '" << path
                                   << "' holds no iteration count, so it is not a solver state (a .caffemodel, "
                                   << "or another kind of file?)";
  }
}

void WriteNetParameterToHdf5File(const NetParameter& weights, const std::string& path) {
  bool with_diff = false;
  for (const auto& layer : weights.layer())
    for (const auto& blob : layer.blobs()) with_diff = with_diff || blob.diff_size() > 0 || blob.double_diff_size() > 0;
  Hdf5File file(path, Hdf5File::Mode::kInMemory);
  file.CreateGroup("data");
  if (with_diff) file.CreateGroup("diff");
  for (const auto& layer : weights.layer()) {
    // Caffe writes a group for every layer, parameters or not; so do we, so that its tools see the same file.
    CREMA_CHECK(!layer.name().empty() && layer.name() != "." && layer.name() != "..")
        << "cannot write weights to HDF5 file '" << path << "': a layer is named '" << layer.name()
        << "', which cannot be an HDF5 group name";
    const std::string data = "data/" + layer.name(), diff = "diff/" + layer.name();
    file.CreateGroup(data);
    if (with_diff) file.CreateGroup(diff);
    for (int j = 0; j < layer.blobs_size(); ++j) {
      const BlobProto& blob = layer.blobs(j);
      const std::string owner = "layer '" + layer.name() + "' parameter blob " + std::to_string(j);
      WriteBlob(&file, data + "/" + std::to_string(j), blob, /*diff=*/false, owner);
      if (with_diff && (blob.diff_size() > 0 || blob.double_diff_size() > 0))
        WriteBlob(&file, diff + "/" + std::to_string(j), blob, /*diff=*/true, owner);
    }
  }
  WriteStringToFileAtomically(file.Image(), path);
}

void ReadNetParameterFromHdf5File(const std::string& path, NetParameter* weights) {
  weights->Clear();
  Hdf5File file(path, Hdf5File::Mode::kRead);
  CREMA_CHECK(file.HasGroup("data")) << "HDF5 file '" << path
                                     << "' holds no weights: Caffe's layout keeps them in a group 'data'";
  CollectLayers(file, "data", "", weights);
}

void WriteSolverStateToHdf5File(const SolverState& state, const std::string& path) {
  Hdf5File file(path, Hdf5File::Mode::kInMemory);
  file.WriteInt("iter", state.iter());
  if (state.has_learned_net()) file.WriteString("learned_net", state.learned_net());
  file.WriteInt("current_step", state.current_step());
  file.CreateGroup("history");
  for (int i = 0; i < state.history_size(); ++i)
    WriteBlob(&file, "history/" + std::to_string(i), state.history(i), /*diff=*/false,
              "history blob " + std::to_string(i));
  // Everything else the state holds (crema's fields, present and future) travels as one protobuf.
  SolverState rest = state;
  rest.clear_iter();
  rest.clear_learned_net();
  rest.clear_current_step();
  rest.clear_history();
  std::string bytes;
  CREMA_CHECK(rest.SerializeToString(&bytes)) << "cannot serialise the solver state for '" << path << "'";
  if (!bytes.empty()) file.WriteBytes(kCremaStateDataset, bytes);
  WriteStringToFileAtomically(file.Image(), path);
}

void ReadSolverStateFromHdf5File(const std::string& path, SolverState* state) {
  state->Clear();
  Hdf5File file(path, Hdf5File::Mode::kRead);
  if (file.HasDataset(kCremaStateDataset))
    CREMA_CHECK(state->ParseFromString(file.ReadBytes(kCremaStateDataset)))
        << "dataset '" << kCremaStateDataset << "' of HDF5 file '" << path << "' is not a valid SolverState";
  CREMA_CHECK(file.HasDataset("iter") || !file.HasGroup("data"))
      << "HDF5 file '" << path << "' holds weights (a group 'data'), not a solver state: give it as --weights, or "
      << "give the .solverstate.h5 written beside it";
  // Caffe's datasets are the authority for Caffe's fields.
  state->set_iter(file.ReadInt("iter"));
  if (file.HasDataset("learned_net")) state->set_learned_net(file.ReadString("learned_net"));
  if (file.HasDataset("current_step")) state->set_current_step(file.ReadInt("current_step"));
  state->clear_history();
  CREMA_CHECK(file.HasGroup("history")) << "HDF5 solver state '" << path << "' has no group 'history'";
  const size_t count = file.Members("history").size();
  for (size_t i = 0; i < count; ++i) {
    const std::string name = "history/" + std::to_string(i);
    CREMA_CHECK(file.HasDataset(name)) << "HDF5 solver state '" << path << "' has " << count
                                       << " entries in group 'history' but no dataset '" << name << "'";
    *state->add_history() = ReadBlob(file, name);
  }
}

}  // namespace crema
