/*
 * A test-only extension: FathomTest::NativeLeak.leak(bytes) mallocs
 * `bytes`, writes every page (so that they are resident) and never frees
 * them; FathomTest::NativeLeak.leaked returns the total. No Ruby object
 * holds or describes the memory: the leak verdicts' native-leak app must
 * see RSS and malloc's in-use bytes grow while every Ruby site stays flat.
 *
 * Built by test/support/native_leak.rb into tmp/test-ext/<RUBY_VERSION>/;
 * never part of the gem.
 */
#include <ruby.h>
#include <stdlib.h>
#include <string.h>

static size_t leaked;
/* Kept reachable from a static, so that nothing (not even a checker)
 * would call it unreachable: it is leaked on purpose, never freed. */
static void *last_block;

static VALUE native_leak(VALUE self, VALUE bytes) {
  long n = NUM2LONG(bytes);
  if (n <= 0) rb_raise(rb_eArgError, "bytes must be positive");
  /* In blocks below glibc's mmap threshold, so that they come from an
   * arena like most of a C extension's small allocations. */
  long left = n;
  while (left > 0) {
    long size = left > 65536 ? 65536 : left;
    char *p = malloc((size_t)size);
    if (!p) rb_raise(rb_eNoMemError, "malloc failed");
    memset(p, 0x5a, (size_t)size);
    last_block = p;
    left -= size;
  }
  leaked += (size_t)n;
  return SIZET2NUM(leaked);
}

static VALUE native_leaked(VALUE self) { return SIZET2NUM(leaked); }

void Init_native_leak(void) {
  VALUE mTest = rb_define_module("FathomTest");
  VALUE mLeak = rb_define_module_under(mTest, "NativeLeak");
  rb_define_module_function(mLeak, "leak", native_leak, 1);
  rb_define_module_function(mLeak, "leaked", native_leaked, 0);
}
