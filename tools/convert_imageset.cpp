// convert_imageset: turns a folder of image files named in a list into an LMDB or a LevelDB of Datum records
// that a Data layer reads; Caffe's tool, with its usage and flags.
//
//   convert_imageset [FLAGS] ROOTFOLDER/ LISTFILE DB_NAME
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <string>
#include <vector>

#include "io/db.hpp"
#include "io/image_set.hpp"
#include "tools/tool_main.hpp"

DEFINE_bool(gray, false, "Read the images as one grey channel (else three, B G R, also for grey files)");
DEFINE_bool(shuffle, false, "Shuffle the list before converting (reproducibly: see --shuffle_seed)");
DEFINE_uint64(shuffle_seed, 1701, "The seed of --shuffle's order (crema's addition)");
DEFINE_string(backend, "lmdb", "The database to write: lmdb or leveldb");
DEFINE_int32(resize_width, 0, "Resize every image to this width (with --resize_height; 0: keep the sizes)");
DEFINE_int32(resize_height, 0, "Resize every image to this height (with --resize_width; 0: keep the sizes)");
DEFINE_bool(check_size, false, "Fail unless every image has the same size (channels, height, width)");
DEFINE_bool(encoded, false, "Store the encoded image files (PNG, JPEG) rather than raw pixels");
DEFINE_string(encode_type, "",
              "With --encoded: re-encode every image as this format (png, jpg, ...); empty: keep each file's bytes "
              "where nothing changes them (else re-encode in the file's own format). Setting it implies --encoded");

int main(int argc, char** argv) {
  return crema::RunTool(
      argc, argv,
      {"convert_imageset",
       "converts a set of images to an LMDB or a LevelDB of Datum records\n"
       "usage: convert_imageset [FLAGS] ROOTFOLDER/ LISTFILE DB_NAME\n"
       "  LISTFILE: lines \"path label\", each path relative to ROOTFOLDER/ (prepended as it is)\n"
       "  DB_NAME: the database directory to create (it must not exist yet)",
       3, 3},
      [](const std::vector<std::string>& arguments) {
        crema::ImageSetOptions options;
        options.backend = crema::ParseDbBackend(FLAGS_backend);
        options.gray = FLAGS_gray;
        options.shuffle = FLAGS_shuffle;
        options.shuffle_seed = FLAGS_shuffle_seed;
        options.resize_height = FLAGS_resize_height;
        options.resize_width = FLAGS_resize_width;
        options.check_size = FLAGS_check_size;
        options.encoded = FLAGS_encoded;
        options.encode_type = FLAGS_encode_type;
        const crema::ImageSetResult result = crema::ConvertImageSet(arguments[0], arguments[1], arguments[2], options);
        // Every skipped file was named in a warning as it was met; the count closes the log.
        const std::string skipped = "Skipped " + std::to_string(result.skipped.size()) + " of " +
                                    std::to_string(result.listed) + " files (missing, unreadable or not images).";
        if (result.skipped.empty()) {
          LOG(INFO) << skipped;
        } else {
          LOG(WARNING) << skipped;
        }
        return 0;
      });
}
