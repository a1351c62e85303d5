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

std::vector<uint32_t> SymbolsOf(const std::vector<StackFrame>& stack) {
  std::vector<uint32_t> out;
  for (const StackFrame& f : stack) out.push_back(f.symbol);
  return out;
}

std::vector<int32_t> LinesOf(const std::vector<StackFrame>& stack) {
  std::vector<int32_t> out;
  for (const StackFrame& f : stack) out.push_back(f.line);
  return out;
}

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
  std::vector<StackFrame> stack = {{0, 0}, {1, 7}};
  weaver.Weave(pcs, &stack, &symbols);
  ASSERT_EQ(symbols.size(), 3u);
  EXPECT_EQ(symbols[2].name, "deflate");
  EXPECT_TRUE(symbols[2].native);
  EXPECT_EQ(symbols[2].filename.rfind("libz.so", 0), 0u) << symbols[2].filename;
  EXPECT_EQ(SymbolsOf(stack), (std::vector<uint32_t>{2, 0, 1}));
  EXPECT_EQ(LinesOf(stack), (std::vector<int32_t>{0, 0, 7}));

  std::vector<StackFrame> again = {{0, 0}, {1, 7}};
  weaver.Weave(pcs, &again, &symbols);
  EXPECT_EQ(symbols.size(), 3u);
  EXPECT_EQ(SymbolsOf(again), SymbolsOf(stack));
}

TEST(NativeWeaver, NoCFramesLeavesTheStackAlone) {
  std::vector<FrameSymbol> symbols = {Ruby("<main>", "a.rb")};
  NativeWeaver weaver(reinterpret_cast<uintptr_t>(&rb_vm_exec));
  std::vector<StackFrame> stack = {{0, 3}};
  weaver.Weave({}, &stack, &symbols);
  EXPECT_EQ(SymbolsOf(stack), std::vector<uint32_t>{0});
  EXPECT_EQ(LinesOf(stack), std::vector<int32_t>{3});
  EXPECT_EQ(symbols.size(), 1u);
}

}  // namespace
}  // namespace fathom
