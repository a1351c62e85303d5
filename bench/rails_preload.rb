# frozen_string_literal: true

# Does loading Fathom first change the program it profiles? The suite's
# Rails app (test/rails_app, which has Fathom in its Gemfile: Bundler.require
# loads it after Rails) runs its runner script (test/rails_app/script/render_loop.rb) as
# is, and with Fathom preloaded the way `fathom run` and
# RUBYOPT=-rfathom/setup load it, before Bundler and Rails (RUBYOPT=-rfathom,
# no profiler started), in interleaved pairs, each
# in a fresh process pinned to one CPU; prints GC.count, GC time and the
# script's wall time per run and the medians. Not a test (timings).
#
#   ruby bench/rails_preload.rb [--pairs 5] [--cpu 1] [--loops 4]
#
# Needs the app's bundle (script/setup installs it under /opt/fathom-gems).
require "open3"
require "optparse"
require "json"
require "rbconfig"

pairs = 5
cpu = nil
loops = 4
OptionParser.new do |o|
  o.on("--pairs N", Integer) { |v| pairs = v }
  o.on("--cpu N", Integer) { |v| cpu = v }
  o.on("--loops N", Integer) { |v| loops = v }
end.parse!

root = File.expand_path("..", __dir__)
app = File.join(root, "test/rails_app")
env = { "BUNDLE_GEMFILE" => File.join(app, "Gemfile"), "BUNDLE_PATH" => ENV.fetch("FATHOM_GEMS", "/opt/fathom-gems"),
        "RAILS_ENV" => "production", "RAILS_LOG_LEVEL" => "warn", "RENDER_LOOPS" => loops.to_s, "RUBYOPT" => nil,
        "BUNDLE_BIN_PATH" => nil, "BUNDLER_SETUP" => nil }
# GC.count and GC time from the first line of the runner to its last; the
# wall time of the whole script (boot excluded: runner has booted the app).
probe = <<~RUBY
  t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC); c0 = GC.count; g0 = GC.stat(:time) rescue 0
  load "./script/render_loop.rb"
  t1 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  puts "FATHOM_BENCH " + { gc: GC.count - c0, gc_total: GC.count, gc_ms: ((GC.stat(:time) rescue 0) - g0), wall: t1 - t0,
                          fathom_first: $LOADED_FEATURES.index { |f| f.end_with?("/fathom.rb") }.to_i <
                                        $LOADED_FEATURES.index { |f| f.end_with?("/rails.rb") }.to_i }.to_s
RUBY
cmd = [RbConfig.ruby, "bin/rails", "runner", probe]
cmd = ["taskset", "-c", cpu.to_s, *cmd] if cpu
db_out, db_status = Open3.capture2e(env, RbConfig.ruby, "bin/rails", "db:prepare", chdir: app)
abort db_out unless db_status.success?

runs = { plain: [], preloaded: [] }
pairs.times do
  { plain: nil, preloaded: "-I#{File.join(root, "lib")} -rfathom" }.each do |name, rubyopt|
    out, err, status = Open3.capture3(env.merge("RUBYOPT" => rubyopt), *cmd, chdir: app)
    abort "#{name}: #{err}" unless status.success?
    line = out[/^FATHOM_BENCH (.*)$/, 1] or abort "#{name}: no result: #{out}"
    r = eval(line) # rubocop:disable Security/Eval -- our own probe's Hash#to_s
    runs[name] << r
    puts format("%-10s GC.count %4d  (process %4d)  GC time %6.0f ms  wall %6.3f s", name, r[:gc], r[:gc_total], r[:gc_ms], r[:wall])
  end
end
median = ->(xs) { s = xs.sort; s.size.odd? ? s[s.size / 2] : (s[s.size / 2 - 1] + s[s.size / 2]) / 2.0 }
puts "ruby #{RUBY_VERSION}, #{pairs} pairs, #{loops} render loops#{cpu ? ", pinned to CPU #{cpu}" : ""}"
%i[gc gc_total gc_ms wall].each do |k|
  a = median.call(runs[:plain].map { |r| r[k] })
  b = median.call(runs[:preloaded].map { |r| r[k] })
  puts format("median %-9s plain %10.3f  preloaded %10.3f  ratio %.3f", k, a, b, a.zero? ? 0 : b.to_f / a)
end
