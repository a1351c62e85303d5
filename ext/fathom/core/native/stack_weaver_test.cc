#include "native/stack_weaver.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace fathom {
namespace {

// A synthetic sample: Ruby frames ("name" or "name*" for a cfunc) and
// native frames ("obj:function", outermost first; object "ruby" is the VM).
struct Sample {
  std::vector<std::string> ruby;
  std::vector<std::string> native;
  bool complete = true;  // the native stack reaches the thread's first frame
};

std::string Woven(const Sample& s) {
  std::vector<bool> is_cfunc;
  std::vector<std::string> ruby_names;
  for (const auto& r : s.ruby) {
    bool c = !r.empty() && r.back() == '*';
    is_cfunc.push_back(c);
    ruby_names.push_back(c ? r.substr(0, r.size() - 1) : r);
  }
  std::vector<NativeFrameKind> kinds;
  std::vector<std::string> native_names;
  for (const auto& n : s.native) {
    size_t colon = n.find(':');
    std::string object = n.substr(0, colon), fn = n.substr(colon + 1);
    kinds.push_back(ClassifyNativeFrame(object == "ruby", fn));
    native_names.push_back(fn.empty() ? "<" + object + ">" : fn);
  }
  std::string out;
  for (const WovenFrame& w : WeaveStack(is_cfunc, kinds, s.complete)) {
    if (!out.empty()) out += " > ";
    out += w.native ? "[" + native_names[w.index] + "]" : ruby_names[w.index];
  }
  return out;
}

TEST(ClassifyNativeFrame, Kinds) {
  EXPECT_EQ(ClassifyNativeFrame(true, "rb_vm_exec"), NativeFrameKind::kVmEntry);
  EXPECT_EQ(ClassifyNativeFrame(true, "vm_exec_core"), NativeFrameKind::kVmEntry);
  EXPECT_EQ(ClassifyNativeFrame(true, ""), NativeFrameKind::kVmInternal);
  EXPECT_EQ(ClassifyNativeFrame(true, "vm_call_cfunc_with_frame"), NativeFrameKind::kVmInternal);
  EXPECT_EQ(ClassifyNativeFrame(true, "rb_hash_aref"), NativeFrameKind::kOther);
  EXPECT_EQ(ClassifyNativeFrame(true, "rb_yield_values"), NativeFrameKind::kCallsRuby);
  EXPECT_EQ(ClassifyNativeFrame(false, "rb_yield"), NativeFrameKind::kOther);  // not the VM's
  EXPECT_EQ(ClassifyNativeFrame(false, ""), NativeFrameKind::kOther);
  EXPECT_EQ(ClassifyNativeFrame(false, "rb_vm_exec"), NativeFrameKind::kOther);  // not the VM's object
}

// Zlib::Deflate.deflate as Debian's stripped libruby shows it: libz's
// frames (and zlib.so's, and the rb_ensure/rb_nogvl it goes through) under
// the cfunc's Ruby frame.
TEST(WeaveStack, ExtensionFramesGoUnderTheirCfunc) {
  Sample s{{"<main>", "Object#compress", "Zlib::Deflate.deflate*"},
           {"ruby:main", "ruby:ruby_run_node", "ruby:rb_vm_exec", "ruby:", "zlib.so:", "ruby:rb_ensure", "zlib.so:",
            "ruby:rb_nogvl", "zlib.so:", "libz.so.1:deflate", "libz.so.1:"}};
  EXPECT_EQ(Woven(s),
            "<main> > Object#compress > Zlib::Deflate.deflate > [<zlib.so>] > [rb_ensure] > [<zlib.so>] > "
            "[rb_nogvl] > [<zlib.so>] > [deflate] > [<libz.so.1>]");
}

// rb_hash_aref called by the opt_aref instruction: no cfunc frame in the
// Ruby stack, the VM function shows under the running Ruby method, with
// the static helper it was in at the sample.
TEST(WeaveStack, VmFunctionHiddenByTheRubyStackShowsUnderTheMethod) {
  Sample s{{"<main>", "Object#lookup"}, {"ruby:main", "ruby:rb_vm_exec", "ruby:rb_hash_aref", "ruby:rb_st_lookup", "ruby:"}};
  EXPECT_EQ(Woven(s), "<main> > Object#lookup > [rb_hash_aref] > [rb_st_lookup] > [<ruby>]");
}

// A block called back from a cfunc: each cfunc gets its own segment, the
// callback path into the VM is trimmed, and the innermost cfunc gets the
// innermost frames.
TEST(WeaveStack, CallbacksIntoRubySplitTheNativeStack) {
  Sample s{{"<main>", "Array#each*", "block in <main>", "Digest::SHA256.hexdigest*"},
           {"ruby:main", "ruby:rb_vm_exec", "ruby:vm_call_cfunc", "ruby:rb_ary_each", "ruby:rb_yield", "ruby:",
            "ruby:rb_vm_exec", "ruby:", "sha2.so:", "libcrypto.so.3:SHA256_Update", "libcrypto.so.3:"}};
  EXPECT_EQ(Woven(s),
            "<main> > Array#each > [rb_ary_each] > [rb_yield] > block in <main> > Digest::SHA256.hexdigest > "
            "[<sha2.so>] > [SHA256_Update] > [<libcrypto.so.3>]");
}

// With full symbols, rb_vm_exec -> vm_exec_core are two adjacent entries:
// one VM entry, not two.
TEST(WeaveStack, AdjacentEntriesAreOne) {
  Sample s{{"<main>", "Kernel#sleep*"},
           {"ruby:main", "ruby:rb_vm_exec", "ruby:vm_exec_core", "ruby:vm_sendish", "ruby:rb_f_sleep", "libc.so.6:ppoll"}};
  EXPECT_EQ(Woven(s), "<main> > Kernel#sleep > [rb_f_sleep] > [ppoll]");
}

// A native stack cut at its maximum depth (outermost frames missing)
// still places the innermost frames.
TEST(WeaveStack, TruncatedNativeStackPairsFromTheInnermostEnd) {
  Sample s{{"<main>", "Integer#times*", "block in <main>", "Integer#times*", "block (2) in <main>", "Foo.bar*"},
           {"ruby:rb_vm_exec", "ruby:", "libfoo.so:foo_bar", "libfoo.so:"},
           false};
  EXPECT_EQ(Woven(s),
            "<main> > Integer#times > block in <main> > Integer#times > block (2) in <main> > Foo.bar > [foo_bar] > "
            "[<libfoo.so>]");
}

// Integer#times on a stripped libruby: the cfunc (int_dotimes) and its
// path to rb_yield are all static, unnamed VM code. Its segment is empty
// after trimming but still counts, so the outer cfunc keeps its own.
TEST(WeaveStack, ACfuncWithOnlyVmFramesKeepsThePairingAligned) {
  Sample s{{"<main>", "Fathom.run*", "block in <main>", "Integer#times*", "block in <main>", "Array#each*",
            "block (2) in <main>"},
           {"ruby:main", "ruby:rb_vm_exec", "ruby:", "ext.so:run", "ruby:rb_yield", "ruby:", "ruby:rb_vm_exec", "ruby:",
            "ruby:", "ruby:", "ruby:rb_vm_exec", "ruby:", "ruby:rb_ary_each", "ruby:rb_yield", "ruby:",
            "ruby:rb_vm_exec", "ruby:rb_hash_aref", "ruby:"}};
  EXPECT_EQ(Woven(s),
            "<main> > Fathom.run > [run] > [rb_yield] > block in <main> > Integer#times > block in <main> > "
            "Array#each > [rb_ary_each] > [rb_yield] > block (2) in <main> > [rb_hash_aref] > [<ruby>]");
}

// A complete native stack with a VM entry the Ruby stack does not show (a
// trap handler's block run from an interrupt check): only the innermost
// segment is placed; pairing the outer ones would shift them.
TEST(WeaveStack, UnexplainedVmEntryWeavesOnlyTheInnermost) {
  Sample s{{"<main>", "IO#read*", "block in <main>"},
           {"ruby:main", "ruby:rb_vm_exec", "ruby:io_read", "ruby:rb_thread_check_ints", "ruby:rb_funcallv",
            "ruby:rb_vm_exec", "ruby:rb_funcallv", "ruby:rb_vm_exec", "ruby:rb_str_new"}};
  EXPECT_EQ(Woven(s), "<main> > IO#read > block in <main> > [rb_str_new]");
  s.complete = false;  // cut stack: pairing from the inner end is all we have
  EXPECT_EQ(Woven(s), "<main> > IO#read > [rb_funcallv] > block in <main> > [rb_str_new]");
}

TEST(WeaveStack, ThreadRoots) {
  EXPECT_TRUE(IsThreadRootFrame("_start"));
  EXPECT_TRUE(IsThreadRootFrame("clone3"));
  EXPECT_FALSE(IsThreadRootFrame("main"));
  EXPECT_FALSE(IsThreadRootFrame(""));
}

// A stripped libruby that exports no rb_vm_exec (3.3): no entry at all.
// The innermost segment is still found, bounded by the VM's unnamed code.
TEST(WeaveStack, WithoutEntriesTheInnermostSegmentIsBoundedByVmCode) {
  Sample zlib{{"<main>", "Zlib::Deflate.deflate*"},
              {"ruby:main", "ruby:ruby_run_node", "ruby:", "ruby:", "zlib.so:", "ruby:rb_ensure", "zlib.so:",
               "ruby:rb_nogvl", "zlib.so:", "libz.so.1:deflate", "libz.so.1:"}};
  EXPECT_EQ(Woven(zlib),
            "<main> > Zlib::Deflate.deflate > [<zlib.so>] > [rb_ensure] > [<zlib.so>] > [rb_nogvl] > [<zlib.so>] > "
            "[deflate] > [<libz.so.1>]");
  // The VM's unnamed leaf helper under rb_hash_aref is dropped with it.
  Sample aref{{"<main>", "Object#lookup"}, {"ruby:main", "ruby:", "ruby:rb_hash_aref", "ruby:rb_st_lookup", "ruby:"}};
  EXPECT_EQ(Woven(aref), "<main> > Object#lookup > [rb_hash_aref] > [rb_st_lookup]");
  // In the VM's entry into a block called by Array#each: rb_ary_each and
  // rb_yield are Array#each's, not the block's. Nothing is woven.
  Sample entering{{"<main>", "Array#each*", "block in <main>"},
                  {"ruby:main", "ruby:", "ruby:rb_ary_each", "ruby:rb_yield", "ruby:", "ruby:"}};
  EXPECT_EQ(Woven(entering), "<main> > Array#each > block in <main>");
  // Under a cfunc the same frames are its own (Hash#each_pair -> a C block).
  Sample cfunc{{"<main>", "Foo.each*"}, {"ruby:main", "ruby:", "foo.so:foo_each", "ruby:rb_yield", "foo.so:"}};
  EXPECT_EQ(Woven(cfunc), "<main> > Foo.each > [foo_each] > [rb_yield] > [<foo.so>]");
}

TEST(WeaveStack, NothingToWeave) {
  // No VM frame at all in the native stack: only the Ruby frames.
  EXPECT_EQ(Woven({{"<main>", "Foo.bar*"}, {"libc.so.6:main", "libfoo.so:foo"}}), "<main> > Foo.bar");
  // The sample hit the interpreter loop itself.
  EXPECT_EQ(Woven({{"<main>", "Object#f"}, {"ruby:main", "ruby:rb_vm_exec"}}), "<main> > Object#f");
  // Empty inputs.
  EXPECT_EQ(Woven({{}, {}}), "");
  EXPECT_EQ(Woven({{}, {"ruby:rb_vm_exec", "libz.so.1:deflate"}}), "");
  EXPECT_EQ(Woven({{"<main>"}, {}}), "<main>");
}

// A non-innermost group that does not end in a cfunc gets nothing (the
// pairing is off: more VM entries than cfunc -> Ruby transitions).
TEST(WeaveStack, OnlyCfuncsOrTheInnermostFrameGetNativeFrames) {
  Sample s{{"<main>", "Object#f"},
           {"ruby:rb_vm_exec", "ruby:rb_funcallv", "ruby:rb_vm_exec", "libz.so.1:deflate"}};
  // Two segments, one group: only the innermost pairs.
  EXPECT_EQ(Woven(s), "<main> > Object#f > [deflate]");
}

}  // namespace
}  // namespace fathom
