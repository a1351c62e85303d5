# frozen_string_literal: true

# Assertions that no part of a secret is shown: a secret cut anywhere (a
# message's length, a bounded read) still shows one of its 6-byte pieces.
module SecretFragments
  # Every 6-byte piece of each secret.
  def fragments(*secrets)
    secrets.flat_map { |s| (0..(s.bytesize - 6)).map { |i| s.byteslice(i, 6) } }.uniq
  end

  def refute_fragments(text, secrets, what)
    found = fragments(*secrets).find { |f| text.include?(f) }
    refute found, "#{what} shows #{found.inspect} of a secret: #{text}"
  end
end
