# frozen_string_literal: true

require "test_helper"

# The same program reads the same on every tested Ruby (issue 41): the
# demo's app (examples/leaky_app.rb) profiled in exact heap mode and with a
# retention snapshot on Ruby 3.1, 3.3 and 3.4, each with its own build of
# the extension, and read back here. What a user reads is compared:
#   - the heap report's top frames by live bytes;
#   - every frame in the app's own file: its name and line;
#   - the retention report's paths through the app's leak.
# Ruby 3.4 changed backtrace labels ("Foo#bar" in Thread::Backtrace), Hash
# #inspect, compiles with Prism, and marks the main Ractor; none of it may
# show in Fathom's names.
#
# Deterministic: exact mode counts every allocation, and the snapshot sees
# every object; the rows compared are the app's, whose allocations do not
# depend on the Ruby (Ruby's and RubyGems' own objects, which do, are left
# out by selecting on the app's file and names).
#
# It needs every Ruby's extension built (script/test builds them all
# before the first suite), and runs once per script/test: in the suite of
# the last Ruby listed in FATHOM_TEST_RUBIES (the others skip, saying so).
class RubyNamesTest < Minitest::Test
  APP = File.join(TestHelper::ROOT, "examples/leaky_app.rb")
  LISTED = ENV.fetch("FATHOM_TEST_RUBIES", "3.1 3.3 3.4").split

  def setup
    require_native!
    this = RUBY_VERSION[/\A\d+\.\d+/]
    skip "compared once per script/test, in the Ruby #{LISTED.last} suite" if ENV["FATHOM_TEST_RUBIES"] && this != LISTED.last
    @dir = Dir.mktmpdir("fathom-names")
  end

  def teardown
    FileUtils.rm_rf(@dir) if @dir
  end

  # The bin directory of each listed Ruby whose extension is built; fails
  # in CI when one is missing.
  def rubies
    LISTED.filter_map do |version|
      bin, status = Open3.capture2(File.join(TestHelper::ROOT, "script/ruby-bin"), version)
      so = File.join(TestHelper::LIB, "fathom", version, "fathom_ext.#{RbConfig::CONFIG["DLEXT"]}")
      if status.success? && File.exist?(so)
        [version, bin.strip]
      else
        flunk("Ruby #{version} or its extension (#{so}) is missing") if TestHelper.ci?
        nil
      end
    end
  end

  def profile(version, bin)
    out = File.join(@dir, version)
    ruby = File.join(bin, "ruby")
    env = TestHelper::PLAIN_ENV.merge("LEAKY_APP_REQUESTS" => "2000")
    _o, err, status = Open3.capture3(env, ruby, "-I", TestHelper::LIB, TestHelper::EXE, "run", "--mode", "heap,retention",
                                     "--exact", "-o", out, "--", ruby, APP)
    assert status.success?, "Ruby #{version}: #{err}"
    { heap: Fathom::Pprof.read_file("#{out}.heap.pb.gz"), retention: report_text("#{out}.retention.pb.gz") }
  end

  # The text `fathom report` prints for a file (the CLI, as a user runs it).
  def report_text(path)
    out, err, status = TestHelper.run_fathom("report", path, "--top", "12")
    assert status.success?, "fathom report #{path}: #{err}"
    out
  end

  # Function names by live bytes (flat), largest first: what `fathom report`
  # and `go tool pprof -top` list.
  def top_frames(heap, count)
    i = heap.sample_type_index("inuse_space")
    flat = Hash.new(0)
    heap.samples.each do |s|
      next if s.location_ids.empty?

      leaf = heap.locations.fetch(s.location_ids.first).first.first
      flat[heap.function_name(leaf)] += s.values[i]
    end
    flat.reject { |name, _| name.start_with?("Fathom") }.select { |_, v| v.positive? }.max_by(count, &:last).map(&:first)
  end

  # [name, line] of every frame the profile has in the app's file.
  def app_frames(heap)
    heap.locations.values.flatten(1).filter_map do |function_id, line|
      fn = heap.functions.fetch(function_id)
      [fn.name, line] if fn.filename.end_with?("examples/leaky_app.rb")
    end.uniq.sort
  end

  def test_the_demo_reads_the_same_on_every_ruby
    seen = rubies.to_h { |version, bin| [version, profile(version, bin)] }
    skip "only Ruby #{seen.keys.join} is here to compare" if seen.size < 2 && !TestHelper.ci?

    views = seen.transform_values do |p|
      {
        "top frames by live bytes" => top_frames(p[:heap], 4),
        "names of the frames in the app's file" => app_frames(p[:heap]).map(&:first).uniq,
        # Lines inside the app's methods: where its own allocations are.
        # Class and file bodies are left out: what Ruby itself allocates
        # while defining a class differs by version (3.3 allocates at a
        # `def` line, 3.1 at line 0 of <main> while loading), which is not
        # a naming question.
        "lines in the app's methods" => app_frames(p[:heap]).select { |name, _| name.match?(/[#.]/) }.map { |n, l| "#{n}:#{l}" },
        "retention paths through the leak" => p[:retention].lines.grep(/SessionStore/).map { |l| l.sub(/\A.*?(?=vm |\$|@)/, "").strip }.uniq,
      }
    end
    views.each_value { |v| assert_includes v["retention paths through the leak"].join("\n"), "SessionStore::SESSIONS (Hash)" }
    puts
    views.each { |version, v| puts "Ruby #{version}: #{v["top frames by live bytes"].join(", ")}" }
    first_version, first = views.first
    views.drop(1).each do |version, v|
      first.each_key { |what| assert_equal first[what], v[what], "#{what}: Ruby #{first_version} vs #{version}" }
    end
  end

  # Kernel's methods under `fathom run`, which intercepts exit!. It did so
  # with Kernel.prepend, and on Ruby 3.3 a module prepended to Kernel makes
  # rb_profile_frames call every Kernel instance method a singleton one:
  # `sleep` read "Kernel.sleep" there, "Kernel#sleep" on 3.1 and 3.4.
  # Each sleep is 300 ms: dozens of wall samples at the 10 ms default.
  SLEEPER = "def nap = sleep(0.3); nap; Kernel.sleep(0.3)"

  def test_kernel_methods_read_the_same_under_fathom_run
    names = rubies.to_h do |version, bin|
      out = File.join(@dir, "#{version}.pb.gz")
      ruby = File.join(bin, "ruby")
      _o, err, status = Open3.capture3(TestHelper::PLAIN_ENV, ruby, "-I", TestHelper::LIB, TestHelper::EXE, "run", "--mode", "wall",
                                       "-o", out, "--", ruby, "-e", SLEEPER)
      assert status.success?, "Ruby #{version}: #{err}"
      profile = Fathom::Pprof.read_file(out)
      [version, profile.functions.values.map(&:name).grep(/sleep|nap/).sort]
    end
    names.each { |version, seen| assert_equal ["Kernel#sleep", "Kernel.sleep", "Object#nap"], seen, "Ruby #{version}" }
  end
end

