#include "stacks/stack_copy.h"

#include <gtest/gtest.h>

namespace fathom {
namespace {

TEST(StackCopierTest, CopiesFramesWithEachSymbolOnce) {
  StackTable t;
  uint64_t h[] = {0x100, 0x200, 0x300};
  int32_t a_lines[] = {10, 20, 30};
  int32_t b_lines[] = {11, 30};
  uint32_t a = t.Intern(h, a_lines, 3, false);
  uint64_t b_handles[] = {0x200, 0x300};
  uint32_t b = t.Intern(b_handles, b_lines, 2, true);
  const char* names[] = {"leaf", "middle", "<main>"};
  for (int i = 0; i < 3; i++) t.SetSymbol(t.frames(a)[i], FrameSymbol{names[i], "app.rb", i, true});

  StackCopier copier(t);
  std::vector<StackFrame> copy_b = copier.Copy(b);
  std::vector<StackFrame> copy_a = copier.Copy(a);
  std::vector<FrameSymbol> symbols = copier.TakeSymbols();
  ASSERT_EQ(symbols.size(), 3u);  // shared frames copied once, in first-copied order
  EXPECT_EQ(symbols[0].name, "middle");
  EXPECT_EQ(symbols[1].name, "<main>");
  EXPECT_EQ(symbols[2].name, "leaf");
  ASSERT_EQ(copy_b.size(), 2u);
  EXPECT_EQ(copy_b[0].symbol, 0u);
  EXPECT_EQ(copy_b[0].line, 11);
  ASSERT_EQ(copy_a.size(), 3u);
  EXPECT_EQ(copy_a[0].symbol, 2u);
  EXPECT_EQ(copy_a[1].symbol, 0u);
  EXPECT_EQ(copy_a[1].line, 20);
  EXPECT_EQ(copy_a[2].symbol, 1u);
}

}  // namespace
}  // namespace fathom
