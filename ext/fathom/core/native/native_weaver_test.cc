#include "native/native_weaver.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

// Stands for the VM's entry into Ruby code: the test binary plays libruby.
extern "C" __attribute__((noinline, used)) int rb_vm_exec(int x) { return x + 1; }

namespace fathom {
namespace {

uintptr_t Address(const char* symbol) { return reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, symbol)); }

FrameSymbol Ruby(const char* name, const char* file) {
  FrameSymbol s;
  s.name = name;
  s.filename = file;
  s.resolved = true;
  return s;
}

// Zlib::Deflate.deflate (a cfunc) called from <main>, sampled inside libz:
// deflate goes under the cfunc, leaf first, with line 0, as one symbol
// however many rows name it.
TEST(NativeWeaver, PutsCFramesUnderTheirCfuncAndNamesEachOnce) {
  uintptr_t deflate_pc = Address("deflate");
  ASSERT_NE(deflate_pc, 0u);
  uintptr_t vm_pc = reinterpret_cast<uintptr_t>(&rb_vm_exec);
  std::vector<FrameSymbol> symbols = {Ruby("Zlib::Deflate.deflate", "<cfunc>"), Ruby("<main>", "a.rb")};
  NativeWeaver weaver(vm_pc);
  std::vector<uintptr_t> pcs = {deflate_pc + 4, vm_pc + 1};  // innermost first
  std::vector<uint32_t> frames = {0, 1};
  std::vector<int32_t> lines = {0, 7};
  weaver.Weave(pcs, &frames, &lines, &symbols);
  ASSERT_EQ(symbols.size(), 3u);
  EXPECT_EQ(symbols[2].name, "deflate");
  EXPECT_TRUE(symbols[2].native);
  EXPECT_EQ(symbols[2].filename.rfind("libz.so", 0), 0u) << symbols[2].filename;
  EXPECT_EQ(frames, (std::vector<uint32_t>{2, 0, 1}));
  EXPECT_EQ(lines, (std::vector<int32_t>{0, 0, 7}));

  std::vector<uint32_t> again = {0, 1};
  std::vector<int32_t> again_lines = {0, 7};
  weaver.Weave(pcs, &again, &again_lines, &symbols);
  EXPECT_EQ(symbols.size(), 3u);
  EXPECT_EQ(again, frames);
}

TEST(NativeWeaver, NoCFramesLeavesTheStackAlone) {
  std::vector<FrameSymbol> symbols = {Ruby("<main>", "a.rb")};
  NativeWeaver weaver(reinterpret_cast<uintptr_t>(&rb_vm_exec));
  std::vector<uint32_t> frames = {0};
  std::vector<int32_t> lines = {3};
  weaver.Weave({}, &frames, &lines, &symbols);
  EXPECT_EQ(frames, std::vector<uint32_t>{0});
  EXPECT_EQ(lines, std::vector<int32_t>{3});
  EXPECT_EQ(symbols.size(), 1u);
}

}  // namespace
}  // namespace fathom
