#include "layers/data/data.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <optional>

#ifdef CREMA_USE_CUDA
#include <cuda_runtime_api.h>

#include "core/cuda_check.hpp"
#endif
#include "core/math_functions.hpp"

namespace crema {

DataLayer::~DataLayer() {
  StopPrefetching();
#ifdef CREMA_USE_CUDA
  if (upload_stream_ != nullptr) {
    // The buffers' device blocks go back to the cache, which records an event on their stream, before it goes.
    queue_.clear();
    upload_buffers_.clear();
    cudaStreamDestroy(static_cast<cudaStream_t>(upload_stream_));
  }
#endif
}

TransformationParameter DataLayer::MergedTransformParam() const {
  TransformationParameter transform = param_.transform_param();
  const DataParameter& data = param_.data_param();
  // Old prototxts put these in data_param; transform_param wins where both say something.
  auto deprecated = [this](const char* field) {
    LOG(WARNING) << describe() << ": data_param." << field << " is deprecated; use transform_param." << field;
  };
  if (data.has_scale() && !transform.has_scale()) {
    deprecated("scale");
    transform.set_scale(data.scale());
  }
  if (data.has_mean_file() && !transform.has_mean_file()) {
    deprecated("mean_file");
    transform.set_mean_file(data.mean_file());
  }
  if (data.has_crop_size() && !transform.has_crop_size()) {
    deprecated("crop_size");
    transform.set_crop_size(data.crop_size());
  }
  if (data.has_mirror() && !transform.has_mirror()) {
    deprecated("mirror");
    transform.set_mirror(data.mirror());
  }
  // The older field for decoding encoded records to colour.
  if (data.force_encoded_color() && !transform.has_force_color()) transform.set_force_color(true);
  return transform;
}

void DataLayer::CheckBackendMatchesSource() const {
  const DataParameter& data = param_.data_param();
  const std::optional<DataParameter::DB> on_disk = DetectDbBackend(data.source());
  // Caffe's prototxts often leave backend unset (LEVELDB) next to an LMDB source, or the other way round; the
  // store's own error would only say that a file is missing, so say which field to change.
  if (!on_disk || *on_disk == data.backend()) return;
  CREMA_FAIL() << describe() << ": data_param.backend is " << DataParameter::DB_Name(data.backend())
               << (data.has_backend() ? "" : " (Caffe's default when backend is unset)") << ", but '" << data.source()
               << "' holds " << (*on_disk == DataParameter::LMDB ? "an LMDB" : "a LevelDB")
               << " database; set `backend: " << DataParameter::DB_Name(*on_disk) << "`";
}

void DataLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  StopPrefetching();
  const DataParameter& data = param_.data_param();
  CREMA_CHECK(!data.source().empty()) << describe() << ": data_param.source is not set (the database to read)";
  CREMA_CHECK(data.batch_size() > 0) << describe() << ": data_param.batch_size must be positive (it is "
                                     << data.batch_size() << ")";
  CREMA_CHECK(data.prefetch() > 0) << describe() << ": data_param.prefetch must be at least 1";
  batch_size_ = static_cast<int>(data.batch_size());
  capacity_ = data.prefetch();

  CheckBackendMatchesSource();
  try {
    transformer_ = std::make_unique<DataTransformer>(MergedTransformParam(), phase());
    reader_ = OpenDbReader(data.backend(), data.source());
  } catch (const Error& error) {
    CREMA_FAIL() << describe() << ": " << error.what();
  }
  CREMA_CHECK(reader_->Valid()) << describe() << ": " << DbBackendName(data.backend()) << " '" << data.source()
                                << "' holds no records";

  random_.Seed(RandomStream::DeriveSeed(context().random_seed(), name()));
  replica_ = context().replica();
  records_read_ = 0;
  if (data.rand_skip() > 0) {
    // Different runs (or solver instances) with different seeds then see the data in different phases.
    const uint32_t skip = random_.UniformInt(data.rand_skip());  // 0 to rand_skip - 1, as in Caffe
    LOG(INFO) << describe() << ": skipping the first " << skip << " records";
    SkipRecords(skip);
  }

  // The first record fixes the top shapes (and finds configuration errors now rather than mid-run).
  std::vector<int> data_shape;
  try {
    data_shape = transformer_->InferBlobShape(CurrentDatum());
  } catch (const Error& error) {
    CREMA_FAIL() << describe() << ": record '" << PrintableKey(reader_->key()) << "' of '" << data.source()
                 << "': " << error.what();
  }
  data_shape.insert(data_shape.begin(), batch_size_);
  top[0]->Reshape(data_shape);
  batch_bytes_ = sizeof(float) * (static_cast<size_t>(top[0]->count()) + batch_size_);
  if (top.size() > 1) top[1]->Reshape({batch_size_});
  LOG(INFO) << describe() << ": output data size " << top[0]->shape_string();

  queue_.clear();
  failed_ = false;
  error_.clear();
  StartPrefetching();
}

DataLayer::Position DataLayer::CurrentPosition() const {
  return Position{reader_->key(), records_read_, random_.Save()};
}

Datum DataLayer::CurrentDatum() const {
  Datum datum;
  CREMA_CHECK(datum.ParseFromString(reader_->value()))
      << describe() << ": record '" << PrintableKey(reader_->key()) << "' of '" << param_.data_param().source()
      << "' is not a Datum";
  return datum;
}

void DataLayer::AdvanceCursor() {
  reader_->Next();
  ++records_read_;
  if (!reader_->Valid()) {
    LOG(INFO) << describe() << ": Restarting data prefetching from start.";
    reader_->SeekToFirst();
  }
}

void DataLayer::SkipRecords(uint64_t count) {
  for (uint64_t i = 0; i < count; ++i) AdvanceCursor();
}

DataLayer::Batch DataLayer::ReadBatch() {
  Batch batch;
  batch.start = CurrentPosition();
  // This replica's part of the global batch: the parts of the replicas before it come first.
  SkipRecords(static_cast<uint64_t>(replica_.rank) * batch_size_);
  batch.labels.resize(batch_size_);
  size_t item_size = 0;
  for (int i = 0; i < batch_size_ && !stop_; ++i) {
    Datum datum = CurrentDatum();
    try {
      if (datum.encoded()) datum = transformer_->Decode(datum);  // once, for the shape and the values
      const std::vector<int> shape = transformer_->InferBlobShape(datum);
      if (i == 0) {
        batch.data_shape = {batch_size_, shape[0], shape[1], shape[2]};
        item_size = static_cast<size_t>(shape[0]) * shape[1] * shape[2];
        batch.data.resize(item_size * batch_size_);
      } else {
        const std::vector<int> first(batch.data_shape.begin() + 1, batch.data_shape.end());
        CREMA_CHECK(shape == first) << "its shape " << ShapeString(shape)
                                    << " differs from that of the batch's first record, " << ShapeString(first)
                                    << "; the records of one batch must have the same shape";
      }
      transformer_->Transform(datum, batch.data.data() + i * item_size, &random_);
    } catch (const Error& error) {
      CREMA_FAIL() << "record '" << PrintableKey(reader_->key()) << "' of '" << param_.data_param().source()
                   << "': " << error.what();
    }
    batch.labels[i] = static_cast<float>(datum.label());
    AdvanceCursor();
  }
  SkipRecords(static_cast<uint64_t>(replica_.count - 1 - replica_.rank) * batch_size_);
  return batch;
}

std::vector<Layer::HeldBuffer> DataLayer::HeldBuffers() const {
  std::vector<HeldBuffer> held{
      {"batches read ahead (up to " + std::to_string(capacity_) + ")", capacity_ * batch_bytes_, Device::kCPU}};
  if (const size_t uploaded = upload_bytes_) {
    held.push_back({"upload buffers", uploaded, Device::kGPU});
    held.push_back({"upload buffers' host copies", uploaded, Device::kCPU});
  }
  return held;
}

#ifdef CREMA_USE_CUDA
struct DataLayer::UploadBuffer {
  explicit UploadBuffer(const std::vector<int>& shape) : blob(shape) {
    CREMA_CUDA_CHECK(cudaEventCreateWithFlags(&consumed, cudaEventDisableTiming));
  }
  ~UploadBuffer() {
    if (consumed != nullptr) cudaEventDestroy(consumed);
  }
  UploadBuffer(const UploadBuffer&) = delete;
  UploadBuffer& operator=(const UploadBuffer&) = delete;
  Blob blob;
  cudaEvent_t consumed = nullptr;  // recorded on the compute stream after the batch's copy into the top
};
#else
struct DataLayer::UploadBuffer {
  Blob blob;
};
#endif

void DataLayer::Upload(Batch* batch, void* stream) {
#ifdef CREMA_USE_CUDA
  // A buffer of the pool that no queued or consumed batch holds any more, else a new one. A consumed batch's buffer
  // may still be read by the compute stream's copy (Forward_gpu does not wait for it): the upload waits, on the
  // device, for the event recorded after that copy. A new buffer's device block comes from the cache for this
  // thread's stream (SetAllocationStream in PrefetchLoop): a block the net freed is handed over only once the work
  // queued on it has run.
  std::shared_ptr<UploadBuffer> buffer;
  for (const auto& pooled : upload_buffers_) {
    if (pooled.use_count() == 1 && pooled->blob.shape() == batch->data_shape) {
      buffer = pooled;
      CREMA_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), buffer->consumed, 0));
      break;
    }
  }
  if (buffer == nullptr) {
    buffer = std::make_shared<UploadBuffer>(batch->data_shape);
    upload_buffers_.push_back(buffer);
    upload_bytes_ += sizeof(float) * buffer->blob.count();
  }
  std::copy(batch->data.begin(), batch->data.end(), buffer->blob.mutable_cpu_data());
  buffer->blob.data()->async_gpu_push(stream);
  CREMA_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
  batch->device_data = std::move(buffer);
  batch->data = {};
#else
  (void)batch;
  (void)stream;
#endif
}

void DataLayer::PrefetchLoop() {
  try {
#ifdef CREMA_USE_CUDA
    // On a GPU net the thread uploads each batch on a stream of its own, which never waits for the compute
    // stream, so the copy overlaps the net's work on the previous batch. The stream lives as long as the layer:
    // the buffers' device blocks are its (the cache records an event on it when they are freed).
    if (device() == Device::kGPU) {
      context().MakeCurrent();
      if (upload_stream_ == nullptr) {
        cudaStream_t stream = nullptr;
        CREMA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        upload_stream_ = stream;
      }
      SetAllocationStream(upload_stream_);
    }
#endif
    for (;;) {
      Batch batch = ReadBatch();
      if (upload_stream_ != nullptr) Upload(&batch, upload_stream_);
      Position next = CurrentPosition();
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [this] { return stop_ || queue_.size() < capacity_; });
      if (stop_) return;
      // Queuing the batch and moving next_unqueued_ past it happen together, so SaveRuntimeState always sees
      // the start of the batch Forward returns next.
      queue_.push_back(std::move(batch));
      next_unqueued_ = std::move(next);
      changed_.notify_all();
    }
  } catch (const std::exception& error) {
    // Never let an exception escape the thread (that would call std::terminate): Forward raises it.
    const std::string message = error.what();
    std::lock_guard<std::mutex> lock(mutex_);
    failed_ = true;
    error_ = message.rfind(describe(), 0) == 0 ? message : describe() + ": " + message;
    changed_.notify_all();
  }
}

void DataLayer::StartPrefetching() {
  next_unqueued_ = CurrentPosition();
  stop_ = false;
  running_ = true;
  thread_ = std::thread(&DataLayer::PrefetchLoop, this);
}

void DataLayer::StopPrefetching() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
  running_ = false;
}

DataLayer::Batch DataLayer::NextBatch() {
  Batch batch;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return !queue_.empty() || failed_ || !running_; });
    // Batches read before a failure are still delivered; the error comes when they are used up.
    if (queue_.empty()) {
      CREMA_CHECK(!failed_) << error_;
      CREMA_FAIL() << describe() << ": Forward before the layer was set up";
    }
    batch = std::move(queue_.front());
    queue_.pop_front();
  }
  changed_.notify_all();
  return batch;
}

void DataLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  Batch batch = NextBatch();
  if (top[0]->shape() != batch.data_shape) top[0]->Reshape(batch.data_shape);
  std::copy(batch.data.begin(), batch.data.end(), top[0]->mutable_cpu_data());
  WriteLabels(batch, top);
}

// Labels stay on the host on either device, where the losses check them; a GPU reader copies them over.
void DataLayer::WriteLabels(const Batch& batch, const std::vector<Blob*>& top) {
  if (top.size() < 2) return;
  if (top[1]->shape() != std::vector<int>{batch_size_}) top[1]->Reshape({batch_size_});
  std::copy(batch.labels.begin(), batch.labels.end(), top[1]->mutable_cpu_data());
}

void DataLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  // A CPU context rehearsing GPU code (Context::gpu_code_on_host): the prefetch thread uploads for a GPU alone, so
  // the batch is on the host, as in the CPU's forward.
  if (device() != Device::kGPU) {
    Forward_cpu(bottom, top);
    return;
  }
  Batch batch = NextBatch();
  if (top[0]->shape() != batch.data_shape) top[0]->Reshape(batch.data_shape);
#ifdef CREMA_USE_CUDA
  copy(context(), top[0]->count(), batch.device_data->blob.gpu_data(), top[0]->mutable_gpu_data());
  // The buffer goes back to the pool when `batch` ends; the next upload into it waits for this copy on the device,
  // so the host queues on without waiting.
  CREMA_CUDA_CHECK(cudaEventRecord(batch.device_data->consumed, context().stream()));
#else
  CREMA_FAIL() << describe() << ": a GPU net needs a crema built with CUDA";
#endif
  WriteLabels(batch, top);
}

void DataLayer::SaveRuntimeState(LayerRuntimeState* state) const {
  CREMA_CHECK(reader_ != nullptr) << describe() << ": cannot save the data cursor before the layer is set up";
  Layer::SaveRuntimeState(state);
  std::lock_guard<std::mutex> lock(mutex_);
  const Position& next = queue_.empty() ? next_unqueued_ : queue_.front().start;
  state->set_cursor_key(next.key);
  state->set_records_read(next.records_read);
  state->set_random_stream(next.random_state);
}

void DataLayer::RestoreRuntimeState(const LayerRuntimeState& state) {
  CREMA_CHECK(reader_ != nullptr) << describe() << ": cannot restore the data cursor before the layer is set up";
  CREMA_CHECK(!state.has_layer() || state.layer() == name())
      << describe() << ": the saved runtime state belongs to layer '" << state.layer() << "'";
  CREMA_CHECK(state.has_cursor_key()) << describe() << ": the saved runtime state has no data cursor (cursor_key)";
  StopPrefetching();
  queue_.clear();
  failed_ = false;
  error_.clear();
  try {
    reader_->Seek(state.cursor_key());
    records_read_ = state.records_read();
    if (state.has_random_stream()) random_.Restore(state.random_stream());
  } catch (const Error& error) {
    // The cursor is lost; Forward keeps raising this rather than reading from an arbitrary place.
    failed_ = true;
    error_ = describe() + ": cannot resume: " + error.what();
    throw Error(error_);
  }
  StartPrefetching();
}

}  // namespace crema
