#include "io/proto_io.hpp"

#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/common.hpp"

namespace crema {

namespace {

bool EndsWith(const std::string& text, const std::string& end) {
  return text.size() >= end.size() && text.compare(text.size() - end.size(), end.size(), end) == 0;
}

// Collects the first parse error with its position (protobuf reports 0-based lines and columns).
class FirstErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column, const std::string& message) override {
    if (!has_error_) {
      has_error_ = true;
      line_ = line + 1;
      column_ = column + 1;
      message_ = message;
      // Protobuf quotes the token it met, which at the end of the text is empty: say what that means.
      const std::string at_end = "the end of the text (a '}' or a value missing?)";
      if (EndsWith(message_, "got: ")) message_ += at_end;
      if (EndsWith(message_, "found \"\".")) message_.replace(message_.size() - 3, 3, at_end);
    }
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
  bool has_error() const { return has_error_; }
  std::string Describe(const std::string& origin) const {
    std::ostringstream out;
    out << origin << ":" << line_ << ":" << column_ << ": " << message_;
    return out.str();
  }

 private:
  bool has_error_ = false;
  int line_ = 0;
  int column_ = 0;
  std::string message_;
};

}  // namespace

bool FileExists(const std::string& path) {
  std::error_code error;
  return std::filesystem::exists(path, error);
}

std::string ReadFileToString(const std::string& path) {
  // An ifstream opens a folder and then reads nothing: without this a folder would pass for an empty file (an
  // empty net, weights that hold nothing). Pipes and devices (/dev/stdin, <(...)) are read as files, up to the
  // 2 GiB a protobuf message may hold: an endless device (/dev/zero) is refused rather than read until memory ends.
  std::error_code error;
  CREMA_CHECK(!std::filesystem::is_directory(path, error))
      << "cannot read '" << path << "': it is a folder, not a file";
  std::ifstream in(path, std::ios::binary);
  CREMA_CHECK(in.good()) << "cannot open '" << path << "': " << std::strerror(errno);
  constexpr size_t kMaxBytes = size_t{1} << 31;
  std::string contents;
  std::vector<char> buffer(size_t{1} << 20);
  while (in.read(buffer.data(), static_cast<std::streamsize>(buffer.size())) || in.gcount() > 0) {
    contents.append(buffer.data(), static_cast<size_t>(in.gcount()));
    CREMA_CHECK(contents.size() <= kMaxBytes)
        << "cannot read '" << path << "': it holds more than 2 GiB, the most crema reads from one file (an endless "
        << "device such as /dev/zero?)";
  }
  CREMA_CHECK(!in.bad()) << "error reading '" << path << "'";
  return contents;
}

namespace {

// The temporary file of an atomic write: hidden (a leading dot) and not starting with the target's name, so
// that a crash mid-write leaves nothing a glob for snapshots (prefix_iter_*) would pick up; the writer's pid
// tells whether its writer is still alive: .<target name>.<pid>.tmp
constexpr char kTemporarySuffix[] = ".tmp";

std::string TemporaryName(const std::string& target_name, pid_t writer) {
  return "." + target_name + "." + std::to_string(writer) + kTemporarySuffix;
}

// The writer's pid of a temporary file's name, or -1 when the name is not one of ours.
pid_t TemporaryWriter(const std::string& name) {
  const size_t suffix = sizeof(kTemporarySuffix) - 1;
  if (name.size() < 1 + suffix || name[0] != '.' || name.compare(name.size() - suffix, suffix, kTemporarySuffix) != 0)
    return -1;
  const std::string stem = name.substr(0, name.size() - suffix);
  const size_t dot = stem.rfind('.');
  if (dot == std::string::npos || dot + 1 == stem.size()) return -1;
  pid_t pid = 0;
  for (size_t i = dot + 1; i < stem.size(); ++i) {
    if (stem[i] < '0' || stem[i] > '9' || pid > 100000000) return -1;
    pid = pid * 10 + (stem[i] - '0');
  }
  return pid;
}

}  // namespace

std::string FolderOf(const std::string& path) {
  const std::filesystem::path file(path);
  return file.has_parent_path() ? file.parent_path().string() : std::string(".");
}

std::vector<std::string> RemoveAbandonedTemporaries(const std::string& folder, const std::string& name_prefix) {
  std::vector<std::string> removed;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(folder, error)) {
    const std::string name = entry.path().filename().string();
    const pid_t writer = TemporaryWriter(name);
    if (writer <= 0 || name.compare(1, name_prefix.size(), name_prefix) != 0) continue;
    // kill(pid, 0) probes without signalling: ESRCH means no such process, so nobody will finish this file.
    if (kill(writer, 0) == 0 || errno != ESRCH) continue;
    std::error_code remove_error;
    if (std::filesystem::remove(entry.path(), remove_error)) removed.push_back(entry.path().string());
  }
  return removed;
}

void WriteStringToFileAtomically(const std::string& contents, const std::string& path) {
  const std::filesystem::path target(path);
  const std::filesystem::path folder = FolderOf(path);
  const std::string temporary = (folder / TemporaryName(target.filename().string(), getpid())).string();
  const int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  CREMA_CHECK(fd >= 0) << "cannot write '" << path << "': cannot create '" << temporary << "': " << std::strerror(errno);
  // The first failure's errno is the reason (ENOSPC from write, fsync or close on a full disk).
  int error = 0;
  size_t written = 0;
  while (written < contents.size() && error == 0) {
    const ssize_t n = write(fd, contents.data() + written, contents.size() - written);
    if (n > 0) {
      written += static_cast<size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      error = errno;
    }
  }
  if (error == 0 && fsync(fd) != 0) error = errno;
  if (close(fd) != 0 && error == 0) error = errno;
  if (error == 0 && std::rename(temporary.c_str(), path.c_str()) != 0) error = errno;
  if (error != 0) {
    unlink(temporary.c_str());
    CREMA_FAIL() << "cannot write '" << path << "': " << std::strerror(error)
                 << (FileExists(path) ? " (the earlier file of that name is unchanged)"
                                      : " (nothing was left under that name)");
  }
  // Make the rename itself durable: without this a power loss could bring back the folder without the new name.
  const int folder_fd = open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (folder_fd >= 0) {
    fsync(folder_fd);
    close(folder_fd);
  }
}

void ReadProtoFromText(const std::string& text, const std::string& origin, google::protobuf::Message* message) {
  google::protobuf::TextFormat::Parser parser;
  FirstErrorCollector errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, message)) {
    std::string description =
        errors.has_error() ? errors.Describe(origin) : origin + ": cannot parse as " + message->GetTypeName();
    if (description.find("no field named \"layers\"") != std::string::npos)
      description += " (this is Caffe's legacy V1 net format, `layers { }` with enum types, which crema cannot "
                     "read yet; convert it with a current Caffe's upgrade_net_proto_text)";
    CREMA_FAIL() << description;
  }
}

void ReadProtoFromTextFile(const std::string& path, google::protobuf::Message* message) {
  ReadProtoFromText(ReadFileToString(path), path, message);
}

void ReadProtoFromBinaryFile(const std::string& path, google::protobuf::Message* message) {
  std::error_code error;
  if (std::filesystem::is_regular_file(path, error) || std::filesystem::is_directory(path, error)) {
    ReadProtoFromBinary(ReadFileToString(path), path, message);
    return;
  }
  // A pipe or a device, whose size is known only at its end: parsed as it is read, so that bytes no message starts
  // with (an endless /dev/zero: a zero tag) are refused at once rather than after the 2 GiB limit.
  std::ifstream in(path, std::ios::binary);
  CREMA_CHECK(in.good()) << "cannot open '" << path << "': " << std::strerror(errno);
  google::protobuf::io::IstreamInputStream stream(&in);
  google::protobuf::io::CodedInputStream coded(&stream);
  coded.SetTotalBytesLimit(INT32_MAX);
  const bool parsed = message->ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage();
  CREMA_CHECK(!in.bad()) << "error reading '" << path << "'";
  CREMA_CHECK(coded.CurrentPosition() < INT32_MAX)
      << "cannot read '" << path << "': it holds more than 2 GiB, the most crema reads from one file (an endless "
      << "device?)";
  CREMA_CHECK(parsed) << "'" << path << "' is not a valid binary " << message->GetTypeName() << " (parsing stopped "
                      << "after " << coded.CurrentPosition() << " bytes; truncated or of another kind?)";
}

void ReadProtoFromBinary(const std::string& bytes, const std::string& origin, google::protobuf::Message* message) {
  CREMA_CHECK(bytes.size() <= static_cast<size_t>(INT32_MAX))
      << "'" << origin << "' holds " << bytes.size() << " bytes, more than a protobuf message may (2 GiB)";
  google::protobuf::io::ArrayInputStream array(bytes.data(), static_cast<int>(bytes.size()));
  google::protobuf::io::CodedInputStream coded(&array);
  coded.SetTotalBytesLimit(INT32_MAX);  // model-zoo nets exceed protobuf's default limit
  CREMA_CHECK(message->ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage())
      << "'" << origin << "' is not a valid binary " << message->GetTypeName() << " (" << bytes.size()
      << " bytes; truncated or of another kind?)";
}

void WriteProtoToTextFile(const google::protobuf::Message& message, const std::string& path) {
  std::string text;
  CREMA_CHECK(google::protobuf::TextFormat::PrintToString(message, &text))
      << "cannot format " << message.GetTypeName() << " for '" << path << "'";
  WriteStringToFileAtomically(text, path);
}

void WriteProtoToBinaryFile(const google::protobuf::Message& message, const std::string& path) {
  std::string bytes;
  CREMA_CHECK(message.SerializeToString(&bytes)) << "cannot serialise " << message.GetTypeName() << " for '"
                                                 << path << "'";
  WriteStringToFileAtomically(bytes, path);
}

namespace {

// Collects MessageDifferencer's findings as lines "path: old -> new" with the values in prototxt form.
class ChangeLines : public google::protobuf::util::MessageDifferencer::Reporter {
 public:
  using SpecificField = google::protobuf::util::MessageDifferencer::SpecificField;
  explicit ChangeLines(std::vector<std::string>* lines) : lines_(lines) {}

  void ReportAdded(const google::protobuf::Message&, const google::protobuf::Message& after,
                   const std::vector<SpecificField>& path) override {
    lines_->push_back("added " + Path(path) + ": " + Value(after, path, true));
  }
  void ReportDeleted(const google::protobuf::Message& before, const google::protobuf::Message&,
                     const std::vector<SpecificField>& path) override {
    lines_->push_back("removed " + Path(path) + ": " + Value(before, path, false));
  }
  void ReportModified(const google::protobuf::Message& before, const google::protobuf::Message& after,
                      const std::vector<SpecificField>& path) override {
    // A modified sub-message is reported field by field as well; only the leaves are worth a line.
    if (!path.empty() && path.back().field != nullptr &&
        path.back().field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE)
      return;
    lines_->push_back(Path(path) + ": " + Value(before, path, false) + " -> " + Value(after, path, true));
  }

 private:
  static std::string Path(const std::vector<SpecificField>& path) {
    std::string text;
    for (const SpecificField& step : path) {
      if (step.field == nullptr) continue;  // unknown fields: not in crema's schema, so never written by it
      if (!text.empty()) text += '.';
      text += step.field->name();
      if (step.field->is_repeated())
        text += "[" + std::to_string(step.new_index >= 0 ? step.new_index : step.index) + "]";
    }
    return text;
  }
  // The value of the path's last field in `message`, the message that holds it (the reporter is handed those),
  // as prototxt writes it; `second` says `message` is from the message compared against, whose repeated elements
  // go by their new index.
  static std::string Value(const google::protobuf::Message& message, const std::vector<SpecificField>& path,
                           bool second) {
    const SpecificField& last = path.back();
    if (last.field == nullptr) return "?";
    int index = -1;
    if (last.field->is_repeated()) {
      index = second ? last.new_index : last.index;
      if (index < 0) index = second ? last.index : last.new_index;
    }
    std::string text;
    google::protobuf::TextFormat::Printer printer;
    printer.SetSingleLineMode(true);
    printer.PrintFieldValueToString(message, last.field, index, &text);
    if (last.field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) text = "{ " + text + "}";
    return text;
  }

  std::vector<std::string>* lines_;
};

}  // namespace

std::vector<std::string> DescribeChanges(const google::protobuf::Message& before,
                                         const google::protobuf::Message& after) {
  std::vector<std::string> lines;
  ChangeLines reporter(&lines);
  google::protobuf::util::MessageDifferencer differencer;
  differencer.set_message_field_comparison(google::protobuf::util::MessageDifferencer::EQUIVALENT);
  differencer.ReportDifferencesTo(&reporter);
  differencer.Compare(before, after);
  return lines;
}

}  // namespace crema
