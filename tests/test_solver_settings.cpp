// Every field of SolverParameter has a row in docs/solvers.md's settings table, which says what crema does with
// it: a field added to the schema, or one left out of the table, fails here.
#include <gtest/gtest.h>

#include <string>

#include "io/proto_io.hpp"
#include "core/common.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

TEST(SolverSettingsTest, EveryFieldIsInTheDocumentedTable) {
  const std::string docs = ReadFileToString(test::SourceDir() + "/docs/solvers.md");
  const auto section = docs.find("## Every setting of SolverParameter");
  ASSERT_NE(section, std::string::npos) << "docs/solvers.md has no settings table";
  const std::string table = docs.substr(section);
  const google::protobuf::Descriptor* descriptor = SolverParameter::descriptor();
  ASSERT_GT(descriptor->field_count(), 40);
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const std::string row = "| `" + descriptor->field(i)->name() + "` |";
    EXPECT_NE(table.find(row), std::string::npos) << "docs/solvers.md's settings table has no row " << row;
  }
}

}  // namespace
}  // namespace crema
