# frozen_string_literal: true

module Fathom
  # Fathom's own messages to the user (what was written, what went wrong in
  # the background). They go to $stderr, but never at the program's
  # expense: a program may have closed or redirected $stderr to something
  # that fails, and a message Fathom could not print must neither raise into
  # the program nor stop a profile from being written.
  def self.notice(message, io: $stderr)
    io.puts(message)
    true
  rescue IOError, SystemCallError
    false
  end
end
