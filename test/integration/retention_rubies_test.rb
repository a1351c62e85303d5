# frozen_string_literal: true

require "test_helper"
require "open3"
require "pathname"

# The same heap reads the same on every Ruby the suite runs (3.1, 3.3,
# 3.4): Ruby 3.4 moved the classes C code defines (Object among them) one
# hop below its vm root, and its registered addresses into it, which made
# paths read "vm → Ractor → Object → …" and "vm → in vm → Gem"; and the
# explainer's intermediate Arrays, left on the C stack, were charged to
# the program under machine_context and took the sampled objects' chain
# with them (docs/internals/retention.md, "The vm root on Ruby 3.4" and
# "Why the top sites are alive").
#
# Each program runs in a process of its own, so that no other test's
# objects are in its heap or on its stacks.
class RetentionRubiesTest < Minitest::Test
  FIXTURE = File.expand_path("../fixtures/leak_fixture", __dir__)
  DEMO = File.join(TestHelper::ROOT, "examples/leaky_app.rb")
  # The payload's chain, hop by hop (`fathom diff`'s key: which objects
  # dominate others, and so where frames split, depends on which inline
  # caches hold the hash, which differs between Rubies).
  PAYLOAD_HOPS = "vm → Object → LeakFixture → LeakFixture::Registry → LeakFixture::Registry::SESSIONS → " \
                 "$hashval → @payload"
  PAYLOAD_TAIL = ["$hashval (LeakFixture::Session)", "@payload (String)"].freeze
  # What Ruby 3.4's vm root made of a path no program wrote.
  VM_ARTEFACT = /\Avm → (in vm|Ractor) → (Object|Gem)\b/

  def setup
    require_native!
    @dir = Dir.mktmpdir("fathom-retention-rubies")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def run_ruby(script)
    out, err, status = Open3.capture3(TestHelper::PLAIN_ENV, RbConfig.ruby, "-I#{TestHelper::LIB}", "-e", script)
    assert status.success?, err
    out
  end

  def read(path)
    Fathom::Pprof.read(Pathname.new(path))
  end

  # [stack names root first, inuse_objects] per sample.
  def stacks(profile)
    objects = profile.sample_type_index("inuse_objects")
    profile.samples.map { |s| [profile.stack_names(s).reverse, s.values[objects]] }
  end

  def names(profile)
    profile.functions.values.map(&:name)
  end

  # A chain's hops without the classes at the frames' ends.
  def hops(chain)
    chain.map { |frame| frame.sub(/ \([^()]*\)\z/, "") }.join(" → ")
  end

  # Acceptance: the path of the fixture's leak, frame for frame, from the
  # in-process walk, the forked one and a heap dump of the same heap.
  def test_a_constant_held_leak_reads_the_same_on_every_ruby
    paths = %w[inproc forked].to_h { |w| [w, File.join(@dir, "#{w}.pb.gz")] }
    dump = File.join(@dir, "heap.json")
    run_ruby(<<~RUBY)
      require "fathom"
      require "objspace"
      require #{FIXTURE.dump}
      LeakFixture.build
      Fathom.retention_snapshot(out: #{paths["inproc"].dump}, progress: nil, fork: false)
      Fathom.retention_snapshot(out: #{paths["forked"].dump}, progress: nil, fork: true)
      GC.start
      File.open(#{dump.dump}, "w") { |f| ObjectSpace.dump_all(output: f) }
    RUBY
    paths.each do |walk, path|
      profile = read(path)
      chain, = stacks(profile).select { |s, _| s.last == "@payload (String)" }.max_by(&:last)
      assert_equal PAYLOAD_HOPS, hops(chain), "#{walk}: #{chain.inspect}"
      assert_equal PAYLOAD_TAIL, chain.last(2), walk
      assert_match(/LeakFixture::Registry::SESSIONS \(Hash\)\z/, chain[-3], walk)
      all = names(profile)
      assert_includes all, "vm → Gem (Module)", walk
      assert_empty all.grep(VM_ARTEFACT), walk
    end

    # The dump names edges only by what a record says (no constant names),
    # but the hops are the snapshot's: vm → Object → LeakFixture → Registry.
    analyzed = Fathom.analyze_dump(dump, progress: nil)
    profile = Fathom::Pprof.read(analyzed.bytes)
    chain, = stacks(profile).select { |s, _| s.last == "via LeakFixture::Session (String)" }.max_by(&:last)
    refute_nil chain, names(profile).grep(/LeakFixture/).inspect
    assert_equal "vm → Object → LeakFixture → LeakFixture::Registry → in LeakFixture::Registry → via Hash → " \
                 "via LeakFixture::Session", hops(chain), chain.inspect
    assert_equal ["via Hash (LeakFixture::Session)", "via LeakFixture::Session (String)"], chain.last(2)
    assert_match(/in LeakFixture::Registry \(Hash\)\z/, chain[-3])
    all = names(profile)
    assert_includes all, "vm → Gem (Module)"
    assert_empty all.grep(VM_ARTEFACT)
  end

  # Acceptance: "why are the top sites alive" (exact mode: every object
  # sampled) names the leak's whole chain for all three picked payloads,
  # and nothing of the explainer's is charged to the program under
  # machine_context. On 3.4 the picked objects and the pick's Arrays of
  # [site, object] pairs sat in stale C stack slots: machine_context held
  # 1,362 of those Arrays, and one of the payloads itself, whose path then
  # collapsed into a single frame of hops without classes.
  #
  # The fixture makes no garbage Array, Hash or WeakMap of its own (its
  # Arrays and Hash are all held by its constants, global and closure), so
  # any such object under machine_context is Fathom's. Deterministic: what
  # Fathom does before the walk runs in a block whose stack is zeroed
  # afterwards, and the walk's own frames are zeroed before they scan
  # (ruby/retention/stack_scrub.h); a stale word can only come from the
  # program's frames above, which hold none of these.
  def test_explaining_the_top_sites_charges_nothing_of_fathoms_and_keeps_the_chain
    out = File.join(@dir, "explained.pb.gz")
    text = run_ruby(<<~RUBY)
      require "fathom"
      require #{FIXTURE.dump}
      profiles = Fathom.profile(mode: %i[heap retention], exact: true) { LeakFixture.build }
      profiles[:retention].write(#{out.dump})
      site = profiles[:retention].stats[:sites].find { |s| s[:site].start_with?("String#* ← LeakFixture::Session#initialize") }
      site[:paths].each { |path, n| puts "\#{n} \#{path.join(" | ")}" }
    RUBY
    lines = text.lines.map(&:chomp)
    assert_equal 1, lines.size, text
    count, chain = lines.first.split(" ", 2)
    chain = chain.split(" | ")
    assert_equal "3", count, text
    assert_equal PAYLOAD_HOPS, hops(chain), text
    assert_equal PAYLOAD_TAIL, chain.last(2)
    assert_match(/LeakFixture::Registry::SESSIONS \(Hash\)\z/, chain[-3])

    conservative = stacks(read(out)).select { |s, _| s.first.start_with?("(root: machine_context)", "machine_context → ") }
    fathoms = conservative.select { |s, _| s.last.match?(/\((Array|Hash|ObjectSpace::WeakMap)\)\z/) }
    assert_empty fathoms, conservative.inspect
  end

  # Acceptance: the demo's "why still alive" line (script/demo, sampled
  # heap), as on 3.1 and 3.3, with every class on its chain.
  def test_the_demo_explains_its_leak_with_the_whole_chain
    base = File.join(@dir, "demo")
    _o, err, status = TestHelper.run_fathom("run", "--mode", "heap,gc,retention", "--interval", "0.5ms", "-o", base,
                                            "--", RbConfig.ruby, DEMO,
                                            env: TestHelper::PLAIN_ENV.merge("LEAKY_APP_REQUESTS" => "3000"))
    assert status.success?, err
    lines = err.lines.map(&:chomp)
    at = lines.index { |l| l.start_with?("String#* ← Session#initialize ") }
    refute_nil at, err
    live = Integer(lines[at][/\((\d+) live samples\)\z/, 1])
    paths = lines[(at + 1)..].take_while { |l| l.start_with?("  ") }
    assert_equal ["  #{[live, 3].min}× vm → Object → SessionStore → SessionStore::SESSIONS (Hash) → $hashval (Session) → " \
                  "@payload (String)"], paths, err
  end
end
