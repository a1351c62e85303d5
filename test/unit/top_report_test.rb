# frozen_string_literal: true

require "test_helper"

class TopReportTest < Minitest::Test
  def setup
    skip_unless_protoc!
    @dir = Dir.mktmpdir("fathom-top")
  end

  def teardown
    FileUtils.rm_rf(@dir) if @dir
  end

  # Values: [alloc_objects, alloc_space, inuse_objects, inuse_space].
  def hand_built
    t = TextProfile.new
    t.sample(%w[leaf mid main], [1, 1000, 1, 1000], { "class" => "String" })
    t.sample(%w[rec rec rec main], [2, 300, 2, 300], { "class" => "Array" }) # recursion: cum counts once
    t.sample(%w[mid rec main], [3, 50, 0, 0], { "class" => "String" })
    t.sample(%w[main], [4, 7, 1, 7], { "class" => "Hash" })
    t.sample(%w[gone main], [5, 9, 0, 0]) # zero inuse: ignored for inuse reports
    t.default_sample_type = "inuse_space"
    t
  end

  def top_for(text_profile, **opts)
    Fathom::Report::Top.new(Fathom::Pprof.decode(text_profile.gzipped), **opts)
  end

  def test_flat_and_cum_with_recursion
    top = top_for(hand_built)
    assert_equal "inuse_space", top.sample_type
    assert_equal 1307, top.total
    rows = top.rows.to_h { |r| [r.name, [r.flat, r.cum]] }
    assert_equal({ "leaf" => [1000, 1000], "rec" => [300, 300], "main" => [7, 1307], "mid" => [0, 1000] }, rows)
    assert_equal %w[leaf rec main mid], top.rows.map(&:name) # flat desc, then name
  end

  # The heap sampler's comment on its ticks: most lost is worth a warning;
  # ticks skipped for a good reason (burst armed, no thread running Ruby)
  # are not counted against it.
  def test_warns_when_most_timer_ticks_never_reached_ruby
    t = hand_built
    t.comments = ["Sampling: 16 bursts from 100 timer ticks that could start one (of 130; 30 while a burst waited " \
                  "for an allocation, 0 with no thread running Ruby)"]
    assert_match(/^Warning: only 16 of 100 timer ticks reached Ruby code/, top_for(t).to_s)
    t.comments = ["Sampling: 98 bursts from 100 timer ticks that could start one (of 400; 300 while a burst waited " \
                  "for an allocation, 0 with no thread running Ruby)"]
    refute_match(/timer ticks reached/, top_for(t).to_s)
    t.comments = ["Sampling: 1 bursts from 10 timer ticks that could start one (of 10; 0 while a burst waited " \
                  "for an allocation, 0 with no thread running Ruby)"]
    refute_match(/timer ticks reached/, top_for(t).to_s, "too few ticks to tell")
  end

  def test_other_sample_index
    top = top_for(hand_built, sample_index: "alloc_objects")
    assert_equal 15, top.total
    rows = top.rows.to_h { |r| [r.name, [r.flat, r.cum]] }
    assert_equal [2, 5], rows["rec"]
    assert_equal [3, 4], rows["mid"]
    assert_equal [4, 15], rows["main"]
    assert_equal [5, 5], rows["gone"]
    assert_equal "alloc_space", top_for(hand_built, sample_index: 1).sample_type
  end

  def test_default_without_default_sample_type_is_the_last_type
    t = hand_built
    t.default_sample_type = nil
    assert_equal "inuse_space", top_for(t).sample_type
  end

  def test_text_layout
    text = top_for(hand_built, top: 2).to_s
    lines = text.lines.map(&:chomp)
    assert_equal "Type: inuse_space", lines[0]
    assert_equal "Showing nodes accounting for 1300B, 99.46% of 1307B total", lines[1]
    assert_equal "Showing top 2 nodes out of 4", lines[2]
    assert_equal "      flat  flat%   sum%        cum   cum%", lines[3]
    assert_equal "     1000B 76.51% 76.51%      1000B 76.51%  leaf", lines[4]
    assert_equal "      300B 22.95% 99.46%       300B 22.95%  rec", lines[5]
    assert_includes text, "By class (inuse_space):"
    assert_match(/^\s+1000B 76.51%  String$/, text)
  end

  def test_by_label
    assert_equal [["String", 1000], ["Array", 300], ["Hash", 7]], top_for(hand_built).by_label("class")
    assert_equal [["String", 4], ["<none>", 5], ["Hash", 4], ["Array", 2]].sort_by { |n, v| [-v, n] },
                 top_for(hand_built, sample_index: "alloc_objects").by_label("class")
  end

  def test_units
    u = Fathom::Report::Units
    assert_equal "512B", u.format_value(512, "bytes")
    assert_equal "1.50MB", u.format_value(1_572_864, "bytes")
    assert_equal "1kB", u.format_value(1024, "bytes")
    assert_equal "0.01MB", u.format_value(10 * 1024, "bytes", "MB")
    assert_equal "0", u.format_value(0, "bytes")
    assert_equal "-2kB", u.format_value(-2048, "bytes")
    assert_equal "12345", u.format_value(12_345, "count")
    assert_equal "150ms", u.format_value(150_000_000, "nanoseconds")
    assert_equal "2.50s", u.format_value(2_500_000_000, "nanoseconds")
    assert_equal "7widgets", u.format_value(7, "widgets")
    assert_equal "  100%", u.percentage(5, 5)
    assert_equal "50.00%", u.percentage(1, 2)
    assert_equal "  0.5%", u.percentage(1, 200)
    assert_equal "    0%", u.percentage(0, 0)
  end

  # The same numbers as the reference implementation.
  def test_matches_go_tool_pprof
    skip_unless_go!
    profile = hand_built
    t = profile
    200.times { |i| t.sample(["f#{i % 17}", "g#{i % 5}", "f#{(i + 3) % 17}", "main"], [i, i * 100, i % 3, i * 37 % 1000], { "class" => "C#{i % 4}" }) }
    path = File.join(@dir, "p.pb.gz")
    File.binwrite(path, t.gzipped)
    %w[inuse_space alloc_objects alloc_space inuse_objects].each do |index|
      ours = Fathom::Report::Top.new(Fathom::Pprof.read_file(path), sample_index: index, top: nil)
      theirs = go_pprof("-top", "-symbolize=none", "-nodefraction=0", "-nodecount=1000", "-sample_index=#{index}", path)
      table = theirs.lines.drop_while { |l| !l.include?("flat%") }.drop(1).map(&:split)
      expected = table.to_h { |cols| [cols[5], [cols[0], cols[3]]] }
      got = ours.rows.to_h { |r| [r.name, [r.flat, r.cum]] }
      assert_equal expected.keys.sort, got.keys.sort, index
      # pprof prints scaled values: compare our formatting of our numbers.
      text_rows = ours.to_s.lines.drop_while { |l| !l.include?("flat%") }.drop(1).take_while { |l| !l.strip.empty? }.map(&:split)
      assert_equal table, text_rows, "#{index}: table differs from go tool pprof"
      total_line = theirs.lines.find { |l| l.start_with?("Showing nodes accounting for") }.strip
      assert_includes ours.to_s, total_line
    end
  end
end
