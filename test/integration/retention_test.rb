# frozen_string_literal: true

require "test_helper"
require "open3"
require "pathname"
require "support/pprof_raw"

# Retention analysis end to end: `fathom run --mode retention` on the leak
# fixture, read back with go tool pprof; the report; diffs; focus paths.
class RetentionTest < Minitest::Test
  SCRIPT = File.expand_path("../fixtures/leak_script.rb", __dir__)

  # Every frame of a chain names its edge: no "?" (unnamed hop), no
  # "via Class" fallback, no elision.
  def assert_fully_named(chain)
    chain.each do |frame|
      refute_match(/(\A|→ )(\?|via |…)/, frame, "unnamed edge in #{chain.inspect}")
    end
  end

  def setup
    require_native!
    skip_unless_go!
    @dir = Dir.mktmpdir("fathom-retention")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def run_script
    out = File.join(@dir, "retained.pb.gz")
    _o, err, status = TestHelper.run_fathom("run", "--mode", "retention", "-o", out, "--", RbConfig.ruby, SCRIPT,
                                            env: TestHelper::PLAIN_ENV)
    assert status.success?, err
    assert_match(/fathom: wrote retention profile to #{Regexp.escape(out)} \(\d+ objects, GVL held \S+\)/, err)
    out
  end

  # Acceptance: the top of inuse_space and of retained_space is the leak's
  # chain, every edge named.
  def test_fathom_run_retention_names_the_leak_chains
    out = run_script
    top = go_pprof("-top", "-symbolize=none", "-sample_index=inuse_space", out)
    first = top.lines.find { |l| l =~ /^\s*[\d.]+\w*B\s/ }
    assert_match(/@payload \(String\)$/, first.to_s, top)
    top = go_pprof("-top", "-symbolize=none", "-sample_index=retained_space", out)
    first = top.lines.find { |l| l =~ /^\s*[\d.]+\w*B\s/ }
    assert_match(/LeakFixture::Registry::SESSIONS \(Hash\)$/, first.to_s, top)

    raw = PprofRaw.read(out)
    payloads = raw.samples.select { |s| s.functions.first == "@payload (String)" }
    # 2100 after the program's at_exit; a payload or two may still be held
    # by the VM or C stack (then charged there), never 100.
    assert_in_delta 2100, payloads.sum { |s| s.values[raw.index_of("inuse_objects")] }, 5, "snapshot after the program's at_exit"
    chain = payloads.max_by { |s| s.values[raw.index_of("inuse_objects")] }.functions.reverse
    # The bottom frame is a root category, or (when the object is reachable
    # from several) a frame whose hop path starts at one.
    assert_match(/\A(\(root: \w+\)\z|\w+ → )/, chain.first)
    assert_match(/LeakFixture::Registry::SESSIONS \(Hash\)\z/, chain[-3])
    assert_equal ["$hashval (LeakFixture::Session)", "@payload (String)"], chain.last(2)
    assert_fully_named(chain)

    objects = raw.index_of("inuse_objects")
    global = raw.samples.select { |s| s.functions.first == "@bytes (String)" }.max_by { |s| s.values[objects] }.functions.reverse
    assert_equal ["(root: global_tbl)", "$leak_cache (Array)", "[10+] (LeakFixture::Buffer)", "@bytes (String)"], global

    closure = raw.samples.select { |s| s.functions.first == "[0] (String)" && s.functions.include?("@cells (Array)") }
                 .max_by { |s| s.values[objects] }
    refute_nil closure, "the closure's captured rows"
    chain = closure.functions.reverse
    assert_includes chain, "@hook (Proc)"
    assert_includes chain, "captured_rows (Array)"
    assert_equal ["[10+] (LeakFixture::Row)", "@cells (Array)", "[0] (String)"], chain.last(3)
    assert_fully_named(chain[chain.index("@hook (Proc)")..])

    # Each object charged once: inuse_space sums to what the profile says is reachable.
    inuse = raw.total("inuse_space")
    require_relative "../fixtures/leak_fixture"  # its constants (the script ran it in its own process)
    cum = raw.cum("inuse_space", /LeakFixture::Registry::SESSIONS \(Hash\)/)
    assert_operator cum, :>=, 2100 * LeakFixture::PAYLOAD_BYTES
    assert_operator cum, :<, inuse

    report, err, status = TestHelper.run_fathom("report", out, "--top", "5")
    assert status.success?, err
    assert_match(/\ARetention profile: \d+ objects, \S+ reachable$/, report)
    assert_match(/^\s+8\.\d+MB .* LeakFixture::Registry::SESSIONS \(Hash\)$/, report.lines[3])
    assert_match(/^\s+\S+ → .*LeakFixture::Registry::SESSIONS \(Hash\) → \$hashval \(LeakFixture::Session\)$/, report)
  end

  def test_diff_shows_growth_along_the_chain
    require_relative "../fixtures/leak_fixture"
    LeakFixture.build
    before = File.join(@dir, "before.pb.gz")
    after = File.join(@dir, "after.pb.gz")
    Fathom.retention_snapshot(out: before, progress: nil)
    300.times { |i| LeakFixture::Registry::SESSIONS["grown-#{i}"] = LeakFixture::Session.new(i) }
    Fathom.retention_snapshot(out: after, progress: nil)

    out, err, status = TestHelper.run_fathom("diff", before, after, "--top", "3")
    assert status.success?, err
    assert_match(/\AGrowth of inuse_space: \+/, out)
    row = out.lines[2]
    assert_match(/\+\d+(\.\d+)?[kM]B .* \+300  .*LeakFixture::Registry::SESSIONS \(Hash\) → \$hashval \(LeakFixture::Session\) → @payload \(String\)$/, row, out)
  ensure
    LeakFixture.clear
  end

  # Naming must not run the application's code: the world is stopped and GC
  # disabled. Each override below exits the process if it is ever called.
  def test_naming_runs_no_overridden_method
    script = <<~'RUBY'
      require "fathom"
      class Thread; def keys = exit!(42); def thread_variables = exit!(43); end
      class Proc; def binding = exit!(44); end
      class Binding; def local_variables = exit!(45); end
      class Struct; def members = exit!(46); end
      module Kernel; def global_variables = exit!(47); end
      Point = Struct.new(:x, :y)
      $kept_point = Point.new("x" * 100, "y" * 100)
      Thread.current[:cache] = "c" * 100
      rows = Array.new(3) { |i| "row #{i}" }
      $hook = -> { rows }
      # In-process: only that walk names a proc's captured locals (`rows`).
      profile = Fathom.retention_snapshot(progress: nil, fork: false)
      # The forked walk prepares thread and global names in the parent
      # through the same original methods: no override runs there either.
      Fathom.retention_snapshot(progress: nil, fork: true)
      names = profile.decode.functions.values.map(&:name)
      puts names.grep(/\.x \(String\)|thread\[:cache\]|rows/).uniq.sort
    RUBY
    out, err, status = Open3.capture3(TestHelper::PLAIN_ENV, RbConfig.ruby, "-I#{TestHelper::LIB}", "-e", script)
    assert status.success?, "exit #{status.exitstatus}: an overridden method ran\n#{err}"
    assert_match(/\.x \(String\)/, out, "struct members named through C (rb_struct_members)")
    assert_match(/thread\[:cache\]/, out, "thread locals named through the original Thread#keys")
    assert_match(/rows/, out, "captured locals named through the original Proc#binding")
  end

  # Linked lists: ".next (Node)" recurs down every chain. A frame's retained
  # size (report row and pprof's flat retained_space alike) must never
  # exceed the heap; it used to add up every node's nested retained size
  # (372 GB "retained" on a 46 MB heap).
  def test_recurring_frames_never_retain_more_than_the_heap
    out = File.join(@dir, "lists.pb.gz")
    script = <<~RUBY
      require "fathom"
      Node = Struct.new(:next, :value)
      $lists = Array.new(20) { head = nil; 5_000.times { |i| head = Node.new(head, "v" * 40) }; head }
      Fathom.retention_snapshot(out: #{out.dump}, progress: nil)
    RUBY
    _o, err, status = Open3.capture3(TestHelper::PLAIN_ENV, RbConfig.ruby, "-I#{TestHelper::LIB}", "-e", script)
    assert status.success?, err
    raw = PprofRaw.read(out)
    heap = raw.total("inuse_space")
    nodes = raw.flat("retained_space", /\A(\.next|\[\d+\+?\]) \(Node\)\z/)
    assert_operator nodes, :>, 20 * 5_000 * 40, "the lists are retained"
    raw.samples.map { |s| s.functions.first }.uniq.each do |name|
      assert_operator raw.flat("retained_space", name), :<=, heap, "flat retained_space of #{name}"
    end

    report, err, status = TestHelper.run_fathom("report", out, "--top", "5")
    assert status.success?, err
    rows = report.lines.grep(/\(Node\)$/)
    refute_empty rows, report
    total = Fathom::Report::Retention.new(Fathom::Pprof.read(Pathname.new(out)))
    total.rows.each { |r| assert_operator r.retained, :<=, total.total_space, r.name }
  end

  # With string_contents: true a binary hash key is named by its bytes
  # ("\xFF"), and every name in the profile is valid UTF-8: pprof's string
  # table is a proto3 string, and Fathom's own reader matches names as Ruby
  # strings. By default the same keys are shapes (length and hash), valid
  # UTF-8 whatever the bytes.
  def test_binary_hash_keys_give_valid_utf8_names
    script = <<~'RUBY'
      require "fathom"
      $by_digest = { "\xFF\xFEid".b => "a" * 200, "caf\xE9".dup.force_encoding("ISO-8859-1") => "b" * 200 }
      [true, false].each do |contents|
        profile = Fathom.retention_snapshot(progress: nil, string_contents: contents)
        names = profile.decode.functions.values.map(&:name)
        puts "invalid=#{names.count { |n| !n.valid_encoding? }}"
        puts names.grep(/\A\{"/).sort.map { |n| "#{contents} #{n}" }
      end
    RUBY
    out, err, status = Open3.capture3(TestHelper::PLAIN_ENV, RbConfig.ruby, "-I#{TestHelper::LIB}", "-e", script)
    assert status.success?, err
    assert_equal %w[invalid=0 invalid=0], out.lines.map(&:chomp).grep(/\Ainvalid=/)
    assert_includes out, 'true {"\xFF\xFEid"} (String)'
    assert_includes out, 'true {"caf\xE9"} (String)'
    # FNV-1a of the bytes, folded to 16 bits (core/retention/key_shape.h).
    shape = lambda do |bytes|
      h = bytes.bytes.reduce(0x811c9dc5) { |acc, b| ((acc ^ b) * 16_777_619) & 0xffffffff }
      format(%({"…" %d bytes #%04x}), bytes.bytesize, (h >> 16) ^ (h & 0xffff))
    end
    assert_includes out, "false #{shape.("\xFF\xFEid".b)} (String)"
    assert_includes out, "false #{shape.("caf\xE9".b)} (String)"
    refute_match(/^false .*(caf|FEid)/, out)
  end

  def test_focus_paths_and_stats
    require_relative "../fixtures/leak_fixture"
    LeakFixture.build
    # Not through a local variable: the VM stack would be a retainer too.
    profile = Fathom.retention_snapshot(focus: [LeakFixture::Registry::SESSIONS["session-7"]], progress: nil)
    path, = profile.stats[:focus_paths]
    refute_includes path.join, "Array)", "the focus list itself is not a retainer"
    assert_equal "$hashval (LeakFixture::Session)", path.last
    # The hash's address may also sit in a C stack slot; the conservative
    # machine_context root is walked last, so the constant still names it.
    assert_match(/LeakFixture::Registry::SESSIONS \(Hash\)\z/, path[-2])
    stats = profile.stats
    assert_operator stats[:objects], :>, 10_000
    assert_operator stats[:gvl_held_ns], :>, 0
    assert_equal :retention, profile.kind
  ensure
    LeakFixture.clear
  end

  # Class names come from rb_class_path_cached (the walk runs with GC
  # disabled and must not allocate); an anonymous class is still named as
  # Ruby names it, and a class under an anonymous module by its path.
  def test_anonymous_classes_are_named_as_ruby_names_them
    anonymous = Class.new
    $fathom_anonymous = Array.new(3) { anonymous.new } # rubocop:disable Style/GlobalVars
    mod = Module.new
    mod.const_set(:Inner, Class.new)
    $fathom_inner = mod::Inner.new # rubocop:disable Style/GlobalVars
    profile = Fathom.retention_snapshot(focus: [$fathom_anonymous.first, $fathom_inner], progress: nil) # rubocop:disable Style/GlobalVars
    first, inner = profile.stats[:focus_paths]
    assert_equal "[0] (#{anonymous.inspect})", first.last
    assert_match(/\A#<Class:0x\h{16}>\z/, anonymous.inspect)
    assert_equal "$fathom_inner (#{mod::Inner.name})", inner.last
  ensure
    $fathom_anonymous = $fathom_inner = nil # rubocop:disable Style/GlobalVars
  end

  # heap + retention: the top live allocation sites with the path that retains them.
  def test_heap_and_retention_explain_the_top_sites
    require_relative "../fixtures/leak_fixture"
    profiles = Fathom.profile(mode: %i[heap retention], exact: true) { LeakFixture.build }
    sites = profiles[:retention].stats[:sites]
    payload = sites.find { |s| s[:site].start_with?("String#* ← LeakFixture::Session#initialize") }
    refute_nil payload, sites.map { |s| s[:site] }.inspect
    assert_operator payload[:live_samples], :>=, 2000
    path, count = payload[:paths].max_by(&:last)
    assert_equal 3, count
    assert_match(/LeakFixture::Registry::SESSIONS \(Hash\)\z/, path[-3], payload[:paths].inspect)
    assert_equal ["$hashval (LeakFixture::Session)", "@payload (String)"], path.last(2)
    text = Fathom::Report::SiteRetention.new(sites).to_s
    assert_match(/^String#\* ← LeakFixture::Session#initialize \S+leak_fixture.rb:\d+ \(\d+ live samples\)\n  3× .*@payload \(String\)$/, text)
    assert_operator Fathom::Pprof.read(profiles[:heap].bytes).samples.size, :>, 0
  ensure
    LeakFixture.clear
  end
end
