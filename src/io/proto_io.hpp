// Reading and writing schema messages as prototxt text or binary protobuf files. Every failure raises a
// crema::Error naming the file (and, for text, the line and column of a syntax error).
#pragma once

#include <string>
#include <vector>

#include <google/protobuf/message.h>

namespace crema {

// Parses a prototxt file. Errors read "FILE:LINE:COLUMN: message".
void ReadProtoFromTextFile(const std::string& path, google::protobuf::Message* message);
// Parses prototxt text held in memory; `origin` names it in errors.
void ReadProtoFromText(const std::string& text, const std::string& origin, google::protobuf::Message* message);
void ReadProtoFromBinaryFile(const std::string& path, google::protobuf::Message* message);
// Parses binary protobuf bytes held in memory (up to 2 GiB, as files); `origin` names them in errors.
void ReadProtoFromBinary(const std::string& bytes, const std::string& origin, google::protobuf::Message* message);
// Writes atomically: to a hidden temporary file in `path`'s folder, flushed to disk (fsync), then renamed over
// `path`, so a crash mid-write never leaves a truncated file under the final name. When writing fails (a full
// disk: ENOSPC from write, fsync or close) the error names the file and the reason, the temporary file is
// removed, and an earlier file at `path` is unchanged.
void WriteProtoToTextFile(const google::protobuf::Message& message, const std::string& path);
void WriteProtoToBinaryFile(const google::protobuf::Message& message, const std::string& path);

// Reads a whole file; throws naming the path when it cannot be opened or is a folder.
std::string ReadFileToString(const std::string& path);
// Atomic write (see above).
void WriteStringToFileAtomically(const std::string& contents, const std::string& path);
// Removes, from `folder`, the temporary files that atomic writes of targets whose names start with
// `name_prefix` left behind when their process was killed mid-write (the writing process is gone); returns
// their paths. Temporaries of live processes are left alone.
std::vector<std::string> RemoveAbandonedTemporaries(const std::string& folder, const std::string& name_prefix);
bool FileExists(const std::string& path);
// What changed from `before` to `after`, two messages of one type: a line per field, "base_lr: 0.01 -> 0.001",
// "added stepvalue[2]: 3000", "removed stepvalue[1]: 200". A field left unset counts as its default value, so an
// unset field shows its default ("clip_gradients: 10 -> -1"), and one set to its default is no change.
std::vector<std::string> DescribeChanges(const google::protobuf::Message& before,
                                         const google::protobuf::Message& after);
// The folder a file path lies in: its parent, or "." for a bare name.
std::string FolderOf(const std::string& path);

}  // namespace crema
