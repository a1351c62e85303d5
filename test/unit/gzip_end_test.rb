# frozen_string_literal: true

require "test_helper"
require "zlib"
require "fathom/cli/gzip_end"

# Fathom::CLI::GzipEnd: whether bytes fed in pieces hold whole gzip
# members (`fathom dump` without a Content-Length;
# test/hostile/dump_fetch_test.rb fetches through it).
class GzipEndTest < Minitest::Test
  PAYLOAD = Zlib.gzip(Array.new(20_000) { |i| "line #{i * 7919}\n" }.join)

  def test_gzip_end_follows_members_and_refuses_what_is_not_gzip
    check = ->(*pieces) { pieces.each_with_object(Fathom::CLI::GzipEnd.new) { |p, g| g << p }.ended? }
    two = PAYLOAD + Zlib.gzip("b")
    assert check.call(two)
    assert check.call(*two.bytes.each_slice(997).map { |s| s.pack("C*") })
    refute check.call(PAYLOAD.byteslice(0, PAYLOAD.bytesize - 1))
    refute check.call(two.byteslice(0, PAYLOAD.bytesize + 5))
    refute check.call
    assert_raises(Zlib::Error) { check.call(PAYLOAD + "junk after the end") }
    assert_raises(Zlib::Error) { check.call("not gzip at all") }
  end
end
