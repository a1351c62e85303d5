# frozen_string_literal: true

require "test_helper"
require "objspace"
require "zlib"

# The dump reader on damaged real dumps (run by rake test:asan under
# ASan/UBSan): an ObjectSpace.dump_all of a small program, truncated, with
# bytes flipped, lines deleted or duplicated, gzipped and cut. Every outcome
# is a profile or a Fathom::Error; nothing crashes.
class DumpFuzzTest < Minitest::Test
  def setup
    require_native!
    @dir = Dir.mktmpdir("fathom-dump-fuzz")
    script = 'require "objspace"; $k = Array.new(300) { |i| { "k#{i}" => "v" * i } }; GC.start; ' \
             'File.open(ARGV[0], "w") { |f| ObjectSpace.dump_all(output: f) }'
    path = File.join(@dir, "real.json")
    assert system(TestHelper::PLAIN_ENV, RbConfig.ruby, "-e", script, path)
    @lines = File.readlines(path)
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def analyze(bytes, name = "m.json")
    path = File.join(@dir, name)
    File.binwrite(path, bytes)
    Fathom.analyze_dump(path, progress: false)
    :ok
  rescue Fathom::Error => e
    assert_match(/\Afathom: /, e.message)
    :error
  end

  def test_mutated_real_dumps
    rng = Random.new(20_261_125)
    text = @lines.join
    outcomes = Hash.new(0)
    40.times do
      bytes = text.b
      case rng.rand(5)
      when 0 then bytes = bytes[0, rng.rand(bytes.size)]
      when 1 then 4.times { bytes.setbyte(rng.rand(bytes.size), rng.rand(256)) }
      when 2 then bytes = @lines.reject.with_index { |_, i| i % 7 == rng.rand(7) }.join
      when 3 then bytes = (@lines + @lines.sample(20, random: rng)).join
      else
        gz = TestHelper.gzip(bytes)
        bytes = gz[0, rng.rand(gz.size)]
        outcomes[analyze(bytes, "m.json.gz")] += 1
        next
      end
      outcomes[analyze(bytes)] += 1
    end
    assert_operator outcomes[:ok] + outcomes[:error], :==, 40
    assert_operator outcomes[:error], :>, 0, outcomes.inspect
    assert_equal :ok, analyze(text), "the undamaged dump"
  end
end
