// DataLayer ("Data"): reads Datum records from an LMDB or a LevelDB in key order and produces batches: top 0
// the transformed images {batch_size, C, H', W'}, optional top 1 the labels {batch_size}. At the end of the
// database it starts again from the first record.
//
// data_param: source (the database directory), batch_size, backend (LMDB or LEVELDB; LEVELDB when unset, as
// in Caffe; a backend that does not match what the directory holds is an error that says which to set),
// rand_skip (skip a random number of records, 0 to rand_skip - 1, at the start), prefetch (batches read
// ahead). Its deprecated scale / mean_file / crop_size / mirror are used where transform_param leaves those
// fields unset, and force_encoded_color stands for transform_param.force_color when that is unset.
// transform_param: see DataTransformer.
//
// Records may be encoded Datums (encoded: true, a PNG or JPEG file): they are decoded with OpenCV, as stored or
// as transform_param.force_color / force_gray say; the records of one batch must decode to the same size.
//
// A background thread reads up to `prefetch` batches ahead. An error there (a damaged record, a datum of the
// wrong shape) is handed to the consumer and raised from Forward as a crema::Error.
//
// Exact resume: every prefetched batch remembers where it started (the key of its first record, the number of
// records read before it) and the state of the layer's random stream (crops, mirrors) before it.
// SaveRuntimeState saves that of the next batch Forward will return, not of the thread's cursor, which runs
// ahead; RestoreRuntimeState discards what was read ahead and continues from there. So a layer restored from a
// state saved after k batches returns the same batches as the one that saved it. The random stream is seeded
// from the context's random seed and the layer's name, so runs are reproducible.
//
// Data parallelism: on a context that is replica r of N, each batch is part r of a global batch of
// N * batch_size consecutive records (the records of replicas 0..N-1 together are what one unsharded layer with
// batch size N * batch_size reads). Every replica skips the same rand_skip, so their parts stay aligned.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "io/data_transformer.hpp"
#include "io/db.hpp"
#include "layers/layer.hpp"

namespace crema {

class DataLayer : public HostDataLayer {
 public:
  using HostDataLayer::HostDataLayer;
  // Stops the prefetch thread.
  ~DataLayer() override;

  // Checks data_param, opens the database, skips rand_skip, shapes the tops from the first record and starts
  // prefetching.
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // The tops are shaped in LayerSetUp and, should a batch's shape differ, in Forward.
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {}

  const char* type() const override { return "Data"; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }

  void SaveRuntimeState(LayerRuntimeState* state) const override;
  // Throws naming the key and the source when the saved record is not in the database.
  void RestoreRuntimeState(const LayerRuntimeState& state) override;
  // The batches read ahead (up to data_param.prefetch, at the first record's shape) and, on a GPU, the buffers
  // they are uploaded into (each with its host copy).
  std::vector<HeldBuffer> HeldBuffers() const override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // On a GPU the prefetch thread has uploaded the batch already (on its own stream); this copies it into the top
  // on the device.
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 private:
  // A device buffer a batch is uploaded into, with the event the compute stream records once it has read it
  // (defined in CUDA builds).
  struct UploadBuffer;
  // Where a batch starts: everything needed to read it again.
  struct Position {
    std::string key;
    uint64_t records_read = 0;
    std::string random_state;
  };
  struct Batch {
    Position start;
    std::vector<int> data_shape;
    std::vector<float> data;
    std::vector<float> labels;
    // On a GPU net: the data, uploaded by the prefetch thread (then `data` is empty).
    std::shared_ptr<UploadBuffer> device_data;
  };
  // The next batch from the prefetch queue (waiting for it), or the thread's error.
  Batch NextBatch();
  // The batch's labels into the label top, when there is one.
  void WriteLabels(const Batch& batch, const std::vector<Blob*>& top);

  // The transformation: transform_param, completed by data_param's deprecated fields.
  TransformationParameter MergedTransformParam() const;
  // Throws, naming the field to set, when data_param.backend is not the store that data_param.source holds.
  void CheckBackendMatchesSource() const;
  // These touch the cursor and the random stream, which belong to the prefetch thread while it runs.
  Position CurrentPosition() const;
  Datum CurrentDatum() const;
  void AdvanceCursor();
  void SkipRecords(uint64_t count);
  Batch ReadBatch();
  // On a GPU context: moves the batch's data to the device on the prefetch thread's stream (after the compute
  // stream's last read of the buffer it reuses) and waits for it.
  void Upload(Batch* batch, void* stream);
  void PrefetchLoop();

  void StartPrefetching();
  void StopPrefetching();

  std::unique_ptr<DbReader> reader_;
  std::unique_ptr<DataTransformer> transformer_;
  RandomStream random_;
  uint64_t records_read_ = 0;
  int batch_size_ = 0;
  size_t capacity_ = 1;
  size_t batch_bytes_ = 0;  // one batch's data and labels, at the first record's shape
  Replica replica_;

  // Shared between the prefetch thread and the consumer, under mutex_.
  std::thread thread_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Batch> queue_;
  // Where the batch after the last queued one starts (the thread's cursor once that batch is queued).
  Position next_unqueued_;
  // Also read without the lock between records, so a stop request need not wait for a whole batch.
  std::atomic<bool> stop_{false};
  // The device buffers batches are uploaded into, reused (the prefetch thread's own): one in use by a queued or
  // consumed batch is held by it too.
  std::vector<std::shared_ptr<UploadBuffer>> upload_buffers_;
  std::atomic<size_t> upload_bytes_{0};  // their bytes on the device, for HeldBuffers (read by other threads)
  void* upload_stream_ = nullptr;        // the prefetch thread's stream (a cudaStream_t), made by its first run
  bool running_ = false;
  bool failed_ = false;
  std::string error_;
};

}  // namespace crema
