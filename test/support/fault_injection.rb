# frozen_string_literal: true

require "open3"
require "rbconfig"

# Runs Ruby scripts in a subprocess with a C++ fault injected at one
# FATHOM_FAULT_POINT (ext/fathom/ruby/runtime/boundary.h): FATHOM_INJECT_FAULT=
# site[:length_error] makes it throw std::bad_alloc (or std::length_error).
# Only the sanitizer build (rake test:asan) compiles the fault points; the
# tests skip elsewhere. A script prints "key=value" lines (see `outcome`);
# the run must end normally, with no abort and no sanitizer report.
module FaultInjection
  PRELUDE = <<~RUBY
    require "fathom"
    Fathom::NativeLoader.require!
    $stdout.sync = true
    def churn(n)
      Array.new(n) { Object.new }.size
    end
    # Runs the block, prints the class of what it raised (or "none").
    def outcome(name)
      yield
      puts "\#{name}=none"
    rescue NoMemoryError, StandardError => e
      puts "\#{name}=\#{e.class}"
    end
    def heap_collector(exact: true)
      # object_id tokens are refused on Ruby 4.0+ (liveness_tokens.cc).
      Fathom::Native::HeapCollector.new(exact: exact, interval_ns: 100_000, max_depth: 64,
                                        liveness: RUBY_VERSION >= "4" ? :weakmap : :object_id)
    end
  RUBY

  # Prints what the checks read: the internal error counter and site.
  EPILOGUE = <<~RUBY
    errors = Fathom::Native.internal_errors
    puts "errors=\#{errors[:count]}"
    puts "site=\#{errors[:last_site]}"
    puts "done"
  RUBY

  def setup
    require_native!
    return if Fathom::Native.fault_injection?

    skip "this build has no fault injection (FATHOM_FAULT_POINT is compiled only into the " \
         "sanitizer build: run `rake test:asan`, as CI does)"
  end

  # Runs the script with the fault injected; returns [{key => value}, message].
  def run_with_fault(fault, script)
    env = TestHelper::PLAIN_ENV.merge("FATHOM_INJECT_FAULT" => fault)
    out, err, status = Open3.capture3(env, RbConfig.ruby, "-I#{TestHelper::LIB}", "-e", PRELUDE + script + EPILOGUE)
    message = "FATHOM_INJECT_FAULT=#{fault}\nstdout:\n#{out}\nstderr:\n#{err}"
    assert status.success?, "the process did not exit normally (#{status.inspect})\n#{message}"
    refute_match(/AddressSanitizer|runtime error|terminate called|Aborted/, err, message)
    result = out.lines.map { |l| l.chomp.split("=", 2) }.select { |kv| kv.size == 2 }.to_h
    assert out.include?("done"), "the script did not finish\n#{message}"
    [result, message]
  end

  def expected_error(fault)
    fault.end_with?(":length_error") ? "Fathom::Error" : "NoMemoryError"
  end

  def each_fault(site, &block)
    [site, "#{site}:length_error"].each(&block)
  end
end
