#include "native_symbols/native_symbolizer.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace fathom_symbolizer_test {
// A C++ function of the test binary, to check demangling.
__attribute__((noinline)) int Twice(int x) { return 2 * x; }
}  // namespace fathom_symbolizer_test

namespace fathom {
namespace {

uintptr_t Address(const char* symbol) { return reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, symbol)); }

TEST(NativeSymbolizer, ExportedFunctionOfLibz) {
  uintptr_t pc = Address("deflate");
  ASSERT_NE(pc, 0u);
  NativeSymbolizer sym;
  NativeFrame f = sym.Symbolize(pc + 4);  // inside, not only at its start
  EXPECT_EQ(f.function, "deflate");
  EXPECT_EQ(f.object.rfind("libz.so", 0), 0u) << f.object;
  EXPECT_EQ(f.function_offset, 4u);
  EXPECT_EQ(f.DisplayName(), "deflate");
}

TEST(NativeSymbolizer, ExportedFunctionOfLibc) {
  // Not through dlsym: in the ASan build that finds ASan's interceptor.
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(libc, nullptr);
  uintptr_t pc = reinterpret_cast<uintptr_t>(dlsym(libc, "qsort"));
  dlclose(libc);
  ASSERT_NE(pc, 0u);
  NativeSymbolizer sym;
  NativeFrame f = sym.Symbolize(pc);
  EXPECT_EQ(f.function, "qsort");
  EXPECT_EQ(f.object.rfind("libc.so", 0), 0u) << f.object;
}

TEST(NativeSymbolizer, DemanglesCxxFunctionsOfTheMainProgram) {
  volatile int keep = fathom_symbolizer_test::Twice(2);
  (void)keep;
  NativeSymbolizer sym;
  NativeFrame f = sym.Symbolize(reinterpret_cast<uintptr_t>(&fathom_symbolizer_test::Twice));
  EXPECT_EQ(f.function, "fathom_symbolizer_test::Twice(int)");
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  ASSERT_GT(n, 0);
  EXPECT_EQ(f.object_path, std::string(exe, static_cast<size_t>(n)));
}

TEST(NativeSymbolizer, UnknownAddressHasNoName) {
  NativeSymbolizer sym;
  NativeFrame f = sym.Symbolize(16);
  EXPECT_EQ(f.function, "");
  EXPECT_EQ(f.object, "");
  EXPECT_EQ(f.DisplayName(), "<0x10>");
}

TEST(NativeSymbolizer, DemangleLeavesCNamesAloneButTheirCloneSuffix) {
  EXPECT_EQ(DemangleNative("rb_hash_aref"), "rb_hash_aref");
  EXPECT_EQ(DemangleNative("_Znot_valid"), "_Znot_valid");
  EXPECT_EQ(DemangleNative("_ZN3foo3barEv"), "foo::bar()");
  // Compiler clones are named after the function they were cloned from.
  EXPECT_EQ(DemangleNative("deflate_slow.part.0"), "deflate_slow");
  EXPECT_EQ(DemangleNative("rb_hash_aref.cold"), "rb_hash_aref");
  EXPECT_EQ(DemangleNative("_ZN3foo3barEv.isra.0"), "foo::bar()");
  EXPECT_EQ(DemangleNative("_ZN3foo3barEv.part.0.cold"), "foo::bar()");
  EXPECT_EQ(DemangleNative(".hidden"), ".hidden");
}

TEST(ElfSymbols, BadFilesGiveEmptyTables) {
  EXPECT_EQ(ElfSymbols::Read("/nonexistent/file.so").size(), 0u);
  EXPECT_EQ(ElfSymbols::Read("/").size(), 0u);
  // A truncated copy of a real object, cut at many lengths: never a crash.
  Dl_info info;
  ASSERT_NE(dladdr(dlsym(RTLD_DEFAULT, "deflate"), &info), 0);
  std::ifstream in(info.dli_fname, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 4096u);
  EXPECT_GT(ElfSymbols::Read(info.dli_fname).size(), 50u);
  char tmpl[] = "/tmp/fathom-elf-XXXXXX";
  int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  for (size_t len : {size_t{0}, size_t{16}, size_t{64}, size_t{1000}, bytes.size() / 2, bytes.size() - 1}) {
    ASSERT_EQ(ftruncate(fd, 0), 0);
    ASSERT_EQ(pwrite(fd, bytes.data(), len, 0), static_cast<ssize_t>(len));
    ElfSymbols t = ElfSymbols::Read(tmpl);
    EXPECT_EQ(t.Find(0x100000000ull), nullptr);
  }
  // Flipped section-header fields.
  std::string damaged = bytes;
  for (size_t i = 0x28; i < 0x40; ++i) damaged[i] = static_cast<char>(0xff);
  ASSERT_EQ(ftruncate(fd, 0), 0);
  ASSERT_EQ(pwrite(fd, damaged.data(), damaged.size(), 0), static_cast<ssize_t>(damaged.size()));
  EXPECT_EQ(ElfSymbols::Read(tmpl).size(), 0u);
  close(fd);
  unlink(tmpl);
}

}  // namespace
}  // namespace fathom
