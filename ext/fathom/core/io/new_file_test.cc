#include "io/new_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace fathom {
namespace {

class NewFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fathom-new-file-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  std::string Read(const std::string& name) const {
    std::ifstream in(Path(name), std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
  }
  bool Exists(const std::string& name) const {
    struct stat st;
    return lstat(Path(name).c_str(), &st) == 0;
  }

  std::string dir_;
};

TEST_F(NewFileTest, WritesTheDataUnderTheNameAndRemovesTheTemporaryFile) {
  std::string data("profile\0bytes", 13);
  NewFileResult r = WriteNewFile(dir_, "heap.pb.gz", ".heap.pb.gz.1.ab.fathom-tmp", data.data(), data.size());
  ASSERT_EQ(r.status, NewFileResult::kWritten) << r.step << ": " << r.error;
  EXPECT_EQ(Read("heap.pb.gz"), data);
  EXPECT_FALSE(Exists(".heap.pb.gz.1.ab.fathom-tmp"));
}

// A profile holds memory contents: only its owner reads it, whatever the umask.
TEST_F(NewFileTest, CreatesTheFile0600) {
  mode_t old = umask(022);
  NewFileResult r = WriteNewFile(dir_, "p.pb.gz", ".p.fathom-tmp", "x", 1);
  umask(old);
  ASSERT_EQ(r.status, NewFileResult::kWritten) << r.step << ": " << r.error;
  struct stat st;
  ASSERT_EQ(stat(Path("p.pb.gz").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(NewFileTest, NeverReplacesAFileNorALink) {
  { std::ofstream(Path("theirs")) << "keep me"; }
  NewFileResult r = WriteNewFile(dir_, "theirs", ".t.fathom-tmp", "x", 1);
  EXPECT_EQ(r.status, NewFileResult::kExists);
  EXPECT_EQ(Read("theirs"), "keep me");
  EXPECT_FALSE(Exists(".t.fathom-tmp"));

  ASSERT_EQ(symlink("/nonexistent/target", Path("dangling").c_str()), 0);
  r = WriteNewFile(dir_, "dangling", ".d.fathom-tmp", "x", 1);
  EXPECT_EQ(r.status, NewFileResult::kExists);
  EXPECT_FALSE(Exists("/nonexistent/target"));
  EXPECT_FALSE(Exists(".d.fathom-tmp"));
}

TEST_F(NewFileTest, ATemporaryNameInUseFailsWithoutTouchingIt) {
  { std::ofstream(Path(".busy.fathom-tmp")) << "another writer"; }
  NewFileResult r = WriteNewFile(dir_, "out", ".busy.fathom-tmp", "x", 1);
  EXPECT_EQ(r.status, NewFileResult::kFailed);
  EXPECT_STREQ(r.step, "open");
  EXPECT_EQ(r.error, EEXIST);
  EXPECT_EQ(Read(".busy.fathom-tmp"), "another writer");
  EXPECT_FALSE(Exists("out"));
}

TEST_F(NewFileTest, AMissingDirectoryIsReported) {
  NewFileResult r = WriteNewFile(dir_ + "/gone", "out", ".o.fathom-tmp", "x", 1);
  EXPECT_EQ(r.status, NewFileResult::kFailed);
  EXPECT_STREQ(r.step, "open directory");
  EXPECT_EQ(r.error, ENOENT);
}

TEST_F(NewFileTest, AnEmptyProfileIsStillAFile) {
  NewFileResult r = WriteNewFile(dir_, "empty", ".e.fathom-tmp", "", 0);
  ASSERT_EQ(r.status, NewFileResult::kWritten);
  EXPECT_TRUE(Exists("empty"));
  EXPECT_EQ(Read("empty"), "");
}

}  // namespace
}  // namespace fathom
