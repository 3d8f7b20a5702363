// The files a snapshot is made of, in either of Caffe's snapshot formats. The solver and the net build their
// snapshot as schema messages (a NetParameter with the weights, a SolverState); these functions only move those
// messages to and from disk, so there is one snapshot logic and two encodings of its result.
//
//   BINARYPROTO  <prefix>_iter_N.caffemodel      the NetParameter, binary
//                <prefix>_iter_N.solverstate     the SolverState, binary
//   HDF5         <prefix>_iter_N.caffemodel.h5   Caffe's layout: group "data" with one group per layer (by layer
//                                                name) holding datasets "0", "1", ... (the parameter blobs, float,
//                                                in the blob's shape); group "diff" of the same layout when the
//                                                NetParameter carries gradients
//                <prefix>_iter_N.solverstate.h5  Caffe's layout: "iter" and "current_step" (int, shape (1)),
//                                                "learned_net" (string), group "history" with "0".."K-1" (float,
//                                                in each blob's shape); plus "crema_state": the SolverState's other
//                                                fields (crema's runtime state, loss window, ...) as serialized
//                                                protobuf bytes, which Caffe ignores
//
// Every writer is atomic (a temporary file beside the target, fsync, rename; see WriteStringToFileAtomically):
// a crash or a full disk never leaves a truncated file under the final name, and the previous file of that name
// stays intact. Readers pick the encoding by content (HDF5's signature), so a misnamed file still loads; a file
// named *.h5 that is not HDF5 is an error saying so.
#pragma once

#include <string>

#include "core/common.hpp"

namespace crema {

// The file name suffixes of a snapshot's two files in `format`.
std::string WeightsExtension(SolverParameter::SnapshotFormat format);
std::string SolverStateExtension(SolverParameter::SnapshotFormat format);

void WriteWeightsFile(const NetParameter& weights, const std::string& path, SolverParameter::SnapshotFormat format);
void WriteSolverStateFile(const SolverState& state, const std::string& path, SolverParameter::SnapshotFormat format);
// A binary or HDF5 weights file. From HDF5, each layer's blobs carry shape and data (and diff where the file has
// a "diff" group); a parameter the file leaves out (Caffe stores a parameter shared by name once, under its
// owner) is an empty BlobProto at its index.
void ReadWeightsFile(const std::string& path, NetParameter* weights);
void ReadSolverStateFile(const std::string& path, SolverState* state);

// The HDF5 encodings on their own (the functions above call these for HDF5).
void WriteNetParameterToHdf5File(const NetParameter& weights, const std::string& path);
void ReadNetParameterFromHdf5File(const std::string& path, NetParameter* weights);
void WriteSolverStateToHdf5File(const SolverState& state, const std::string& path);
void ReadSolverStateFromHdf5File(const std::string& path, SolverState* state);

}  // namespace crema
