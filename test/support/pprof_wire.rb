# frozen_string_literal: true

# Protobuf wire format by hand, for profiles protoc cannot write: malformed
# ones (bad lengths, overflowing varints, dangling ids) and odd but legal
# ones (unpacked fields, invalid UTF-8 in strings).
module PprofWire
  module_function

  def varint(n)
    n += 1 << 64 if n.negative?
    out = +"".b
    while n >= 0x80
      out << ((n & 0x7f) | 0x80)
      n >>= 7
    end
    out << n
  end

  def key(field, wire)
    varint((field << 3) | wire)
  end

  def int(field, n)
    key(field, 0) + varint(n)
  end

  def bytes(field, data)
    key(field, 2) + varint(data.bytesize) + data.b
  end

  def packed(field, values)
    bytes(field, values.map { |v| varint(v) }.join)
  end

  def strings(list)
    list.map { |s| bytes(6, s) }.join
  end

  # A small, valid heap-like profile: sample types [[type, unit], ...] as
  # string indexes into `table`, one sample per stack of function ids.
  # Returns raw protobuf; pieces can be swapped for broken ones.
  def profile(table: ["", "inuse_space", "bytes", "main", "leaf"], types: [[1, 2]],
              samples: [[[2, 1], [64]]], functions: { 1 => 3, 2 => 4 })
    out = types.map { |t, u| bytes(1, int(1, t) + int(2, u)) }.join
    samples.each { |stack, values| out << bytes(2, packed(1, stack) + packed(2, values)) }
    functions.each do |id, name|
      out << bytes(4, int(1, id) + bytes(4, int(1, id) + int(2, id)))
      out << bytes(5, int(1, id) + int(2, name))
    end
    out + strings(table)
  end
end
