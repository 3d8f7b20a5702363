// convert_mnist: turns an MNIST-format data set (IDX image and label files, gzipped or not; MNIST,
// Fashion-MNIST) into an LMDB or a LevelDB of Datum records that a Data layer reads.
//
//   convert_mnist IMAGES LABELS DB [--backend=lmdb|leveldb] [--label_map=OLD:NEW,...] [--limit=N]
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <iostream>
#include <vector>

#include "core/common.hpp"
#include "io/db.hpp"
#include "tools/lib/mnist.hpp"
#include "tools/tool_main.hpp"

// LMDB by default, unlike Caffe's converter (LevelDB): crema's example nets read LMDBs.
DEFINE_string(backend, "lmdb", "The database to write: lmdb or leveldb");
DEFINE_string(label_map, "",
              "Write only the images of these labels, relabelled: OLD:NEW pairs, comma-separated "
              "(e.g. 0:0,2:0,5:1 makes a two-class set of classes 0, 2 and 5); empty: all, as they are");
DEFINE_int64(limit, -1, "Write at most this many records (-1: all)");

int main(int argc, char** argv) {
  return crema::RunTool(
      argc, argv,
      {"convert_mnist",
       "converts MNIST-format IDX files to an LMDB or a LevelDB of Datum records\n"
       "usage: convert_mnist IMAGES LABELS DB [--backend=lmdb|leveldb] [--label_map=OLD:NEW,...] [--limit=N]\n"
       "  IMAGES, LABELS: IDX files such as train-images-idx3-ubyte(.gz), train-labels-idx1-ubyte(.gz)\n"
       "  DB: the database directory to create (it must not exist yet)",
       3, 3},
      [](const std::vector<std::string>& arguments) {
        const crema::DataParameter::DB backend = crema::ParseDbBackend(FLAGS_backend);
        crema::MnistSelection selection;
        selection.relabel = crema::ParseLabelMap(FLAGS_label_map);
        selection.limit = FLAGS_limit;
        const int64_t records = crema::ConvertMnist(arguments[0], arguments[1], arguments[2], backend, selection);
        std::cout << "convert_mnist: wrote " << records << " records to " << crema::DbBackendName(backend) << " '"
                  << arguments[2] << "'" << std::endl;
        return 0;
      });
}
