/*
 * A test-only extension: FathomTest::NoGvl.burn(seconds) burns CPU in C
 * without the GVL for `seconds` of the calling thread's CPU time (or until
 * the thread is interrupted), and returns the rounds it ran.
 *
 * The thread-state tests need a thread that is on a CPU without the GVL on
 * every Ruby, whatever else runs. Zlib::Deflate.deflate was that thread
 * until zlib 3.2 (Ruby 3.4's default gem): it gives up and takes back the
 * GVL per chunk, so beside a busy Ruby thread it waits for the GVL most of
 * the time (3 ms of CPU in 1.5 s, where zlib 3.1 got 359 ms). One call
 * here releases the GVL once and keeps it released until it is done.
 *
 * Built by test/support/nogvl_burn.rb into tmp/test-ext/<RUBY_VERSION>/;
 * never part of the gem.
 */
#include <ruby.h>
#include <ruby/thread.h>
#include <stdint.h>
#include <time.h>

struct burn {
  double seconds;
  volatile int stop; /* set by the unblocking function (Thread#kill, exit) */
  uint64_t rounds;
};

static double thread_cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *burn_without_gvl(void *arg) {
  struct burn *b = arg;
  double until = thread_cpu_seconds() + b->seconds;
  uint64_t x = 88172645463325252ull;
  /* xorshift rounds between clock reads: all arithmetic, no memory traffic
   * beyond the stack, no system call but the clock every 64k rounds. */
  while (!b->stop) {
    for (int i = 0; i < 65536; i++) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
    }
    b->rounds += 1 + (x & 0); /* keep x live */
    if (thread_cpu_seconds() >= until) break;
  }
  return NULL;
}

static void unblock(void *arg) { ((struct burn *)arg)->stop = 1; }

static VALUE nogvl_burn(VALUE self, VALUE seconds) {
  struct burn b = {NUM2DBL(seconds), 0, 0};
  rb_thread_call_without_gvl(burn_without_gvl, &b, unblock, &b);
  return ULL2NUM(b.rounds);
}

void Init_nogvl_burn(void) {
  VALUE test = rb_define_module("FathomTest");
  VALUE mod = rb_define_module_under(test, "NoGvl");
  rb_define_module_function(mod, "burn", nogvl_burn, 1);
}
