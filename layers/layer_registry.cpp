#include "layers/layer_registry.hpp"

#include <glog/logging.h>

#include <algorithm>

namespace crema {

namespace {
bool RunsOn(const EngineSpec& spec, Device device) {
  return (spec.devices & (device == Device::kGPU ? kGpuOnly : kCpuOnly)) != 0;
}

// oneDNN makes no convolution or inner product primitive over a tensor with a dimension of 0 (a Slice may leave one
// empty, as Caffe's does): crema's own engines run them (a convolution of 0 input channels gives its bias). Every
// oneDNN engine refuses them alike. (cuDNN's engines skip their calls over empty blobs themselves.)
bool IsOnednnEngine(const EngineSpec& spec) { return spec.name == "onednn"; }

// "" when `engine` can serve `query`, else why not.
std::string WhyNot(const LayerRegistry::Engine& engine, const EngineQuery& query) {
  if (!RunsOn(engine.spec, query.device)) return std::string("does not run on the ") + DeviceName(query.device);
  if (IsOnednnEngine(engine.spec)) {
    for (size_t b = 0; b < query.bottom_shapes.size(); ++b) {
      const std::vector<int>& shape = query.bottom_shapes[b];
      if (std::find(shape.begin(), shape.end(), 0) != shape.end())
        return "its primitives take no empty blob, and bottom " + std::to_string(b) + " has shape " +
               ShapeString(shape);
    }
  }
  return engine.spec.refusal ? engine.spec.refusal(query) : "";
}

std::string Describe(const LayerParameter& param) { return "layer '" + param.name() + "' (" + param.type() + ")"; }
}  // namespace

LayerRegistry& LayerRegistry::Global() {
  static LayerRegistry* registry = [] {
    auto* created = new LayerRegistry;
    RegisterBuiltinLayers(created);
    return created;
  }();
  return *registry;
}

void LayerRegistry::Add(const std::string& type, EngineSpec spec, Creator creator) {
  for (const Engine& engine : engines_[type])
    CREMA_CHECK(engine.spec.name != spec.name)
        << "layer type '" << type << "' registers engine '" << spec.name << "' twice";
  engines_[type].push_back(Engine{std::move(spec), std::move(creator)});
}

std::vector<std::string> LayerRegistry::Types() const {
  std::vector<std::string> types;
  for (const auto& entry : engines_) types.push_back(entry.first);
  return types;
}

std::vector<std::string> LayerRegistry::Engines(const std::string& type) const {
  std::vector<std::string> names;
  auto found = engines_.find(type);
  if (found != engines_.end())
    for (const Engine& engine : found->second) names.push_back(engine.spec.name);
  return names;
}

std::vector<std::string> LayerRegistry::Engines(const std::string& type, Device device) const {
  std::vector<std::string> names;
  auto found = engines_.find(type);
  if (found != engines_.end())
    for (const Engine& engine : found->second)
      if (RunsOn(engine.spec, device)) names.push_back(engine.spec.name);
  return names;
}

std::string LayerRegistry::Refusal(const std::string& engine, const EngineQuery& query) const {
  auto found = engines_.find(query.param.type());
  if (found != engines_.end())
    for (const Engine& candidate : found->second)
      if (candidate.spec.name == engine) return WhyNot(candidate, query);
  return query.param.type() + " has no engine '" + engine + "'";
}

int CaffeEngineField(const LayerParameter& param) {
  const auto* reflection = param.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(param, &fields);
  for (const auto* field : fields) {
    if (field->type() != google::protobuf::FieldDescriptor::TYPE_MESSAGE || field->is_repeated()) continue;
    const auto& message = reflection->GetMessage(param, field);
    const auto* engine = message.GetDescriptor()->FindFieldByName("engine");
    if (engine != nullptr && engine->type() == google::protobuf::FieldDescriptor::TYPE_ENUM &&
        message.GetReflection()->HasField(message, engine))
      return message.GetReflection()->GetEnumValue(message, engine);
  }
  return 0;
}

const LayerRegistry::Engine* LayerRegistry::Choose(const LayerParameter& param, const EngineQuery& query,
                                                   const Context& context) const {
  const std::vector<Engine>& engines = engines_.at(param.type());
  auto named = [&](const std::string& name) -> const Engine* {
    for (const Engine& engine : engines)
      if (engine.spec.name == name) return &engine;
    return nullptr;
  };
  // Forced for this type: that engine, or a clear error.
  const auto& forced = context.forced_engines();
  auto for_type = forced.find(param.type());
  if (for_type != forced.end()) {
    const Engine* engine = named(for_type->second);
    if (engine == nullptr) {
      std::string known;
      for (const auto& name : Engines(param.type())) known += (known.empty() ? "" : ", ") + name;
      CREMA_FAIL() << Describe(param) << ": engine '" << for_type->second << "' was forced (--engine), but "
                   << param.type() << " has the engines " << known;
    }
    const std::string why = WhyNot(*engine, query);
    CREMA_CHECK(why.empty()) << Describe(param) << ": the forced engine '" << engine->spec.name
                             << "' cannot run it: " << why;
    return engine;
  }
  // Forced for every type that has an engine of that name, where it accepts.
  auto for_all = forced.find("");
  if (for_all != forced.end()) {
    const Engine* engine = named(for_all->second);
    if (engine != nullptr && WhyNot(*engine, query).empty()) return engine;
  }
  // Caffe's engine field narrows the list to CAFFE's or CUDNN's engines.
  const int caffe_engine = CaffeEngineField(param);
  if (caffe_engine != 0) {
    for (const Engine& engine : engines)
      if (static_cast<int>(engine.spec.caffe_engine) == caffe_engine && WhyNot(engine, query).empty()) return &engine;
    if (caffe_engine == static_cast<int>(CaffeEngine::kCaffe)) {
      CREMA_FAIL() << Describe(param) << ": engine: CAFFE was asked for, but none of crema's own engines can run it";
    }
    LOG(INFO) << Describe(param) << ": engine: CUDNN is not available on the " << DeviceName(query.device)
              << "; using the default engine order";
  }
  for (const Engine& engine : engines)
    if (WhyNot(engine, query).empty()) return &engine;
  if (query.device == Device::kGPU) {
    // No GPU engine: the first CPU engine that accepts runs it on the host (Create gives it a CPU context), as
    // Caffe runs a layer without GPU code on the CPU; its blobs move between host and device where they meet.
    const EngineQuery on_host{query.param, query.bottom_shapes, Device::kCPU};
    for (const Engine& engine : engines)
      if (WhyNot(engine, on_host).empty()) return &engine;
  }
  std::string reasons;
  for (const Engine& engine : engines) reasons += "; " + engine.spec.name + ": " + WhyNot(engine, query);
  CREMA_FAIL() << Describe(param) << ": no engine can run it on the " << DeviceName(query.device) << reasons;
  return nullptr;
}

std::unique_ptr<Layer> LayerRegistry::Create(const LayerParameter& param,
                                             const std::vector<std::vector<int>>& bottom_shapes,
                                             std::shared_ptr<Context> context) const {
  if (!engines_.count(param.type())) {
    std::string known;
    for (const auto& type : Types()) known += (known.empty() ? "" : ", ") + type;
    CREMA_FAIL() << "layer '" << param.name() << "' has unknown type '" << param.type() << "'; known types: " << known;
  }
  CREMA_CHECK(context != nullptr) << Describe(param) << ": created without a context";
  const EngineQuery query{param, bottom_shapes, context->device()};
  const Engine* engine = Choose(param, query, *context);
  if (!RunsOn(engine->spec, context->device())) {
    std::string why;
    for (const Engine& other : engines_.at(param.type()))
      if (RunsOn(other.spec, Device::kGPU)) why += "; " + other.spec.name + ": " + WhyNot(other, query);
    LOG(WARNING) << Describe(param) << " has no GPU engine that can run it" << (why.empty() ? "" : " (")
                 << (why.empty() ? "" : why.substr(2) + ")") << "; its engine '" << engine->spec.name
                 << "' runs it on the CPU, and its blobs are copied between "
                 << "host and device";
    context = context->HostTwin();
  }
  std::unique_ptr<Layer> layer = engine->create(param, std::move(context));
  layer->set_engine(engine->spec.name);
  return layer;
}

}  // namespace crema
