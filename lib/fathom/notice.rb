# frozen_string_literal: true

module Fathom
  # Fathom's own messages to the user (what was written, what went wrong in
  # the background, progress), all printed through Fathom.notice. They go to
  # $stderr as the program has it when the message is printed, but never at
  # the program's expense: a message that cannot be printed is dropped
  # (counted in Notice.dropped) and neither raises into the program nor
  # stops a profile from being written. What a program may have done:
  #   - closed $stderr, or set it to an object whose write fails or is gone;
  #   - set $stderr to a StringIO (the messages go there, as it asked);
  #   - closed descriptor 2 itself (close(2) from C or Fiddle: Ruby's
  #     IO#close keeps descriptors 0-2 open) and then opened a file of its
  #     own, which got descriptor 2. Writing to STDERR would then append
  #     Fathom's messages to the program's file: Notice skips STDERR when
  #     descriptor 2 has become another regular file behind Ruby's back
  #     (STDERR.reopen, which Ruby sees, and /dev/null from Process.daemon
  #     still get the messages).
  module Notice
    @dropped = 0

    class << self
      # Messages that could not be printed.
      attr_reader :dropped

      # Prints `text` (a newline is added if missing); true if printed.
      def print(text, io)
        text = text.to_s
        text += "\n" unless text.end_with?("\n")
        return drop if io.equal?(STDERR) && descriptor_taken_over?

        io.write(text)
        true
      rescue SignalException, SystemExit
        raise # ^C, kill, or an exit the program's own write method asked for
      rescue Exception # rubocop:disable Lint/RescueException -- NoMethodError, IOError, Errno::*, anything
        drop
      end

      # `text` as one line of valid UTF-8: control characters escaped
      # (a final newline is dropped; #print adds one).
      def one_line(text)
        text = text.to_s.dup.force_encoding(Encoding::UTF_8).scrub.chomp
        text.gsub(/[[:cntrl:]]/) { |c| format("\\x%02x", c.ord) }
      rescue StandardError
        "fathom: (a message could not be printed)"
      end

      # What descriptor 2 was when Fathom was loaded: [dev, ino, regular
      # file?], and how Ruby names STDERR then (IO#reopen changes the name).
      def remember_stderr
        @stderr_identity = identity(STDERR)
        @stderr_name = STDERR.inspect
      rescue StandardError
        @stderr_identity = nil
      end

      private

      def drop
        @dropped += 1
        false
      end

      def descriptor_taken_over?
        return false if @stderr_identity.nil? || STDERR.inspect != @stderr_name

        now = identity(STDERR)
        now && now != @stderr_identity && now[2]
      end

      def identity(io)
        st = io.stat
        [st.dev, st.ino, st.file?]
      rescue IOError, SystemCallError
        nil
      end
    end

    remember_stderr

    # An IO-like object for APIs that take one (the retention snapshot's
    # progress: :auto): each write is a notice to the current $stderr.
    module Stream
      def self.write(*parts)
        Notice.print(parts.join, $stderr)
        parts.sum { |p| p.to_s.bytesize }
      end
    end
  end

  # Prints one of Fathom's messages to `io` ($stderr by default); true if it
  # was printed, false if not. Never raises. With a block, the block builds
  # the message, and a failure there is reported instead of raised.
  #
  # A message is one line: control characters in it (CR LF from a setting,
  # a path, a server's reply or an exception's message) are written
  # escaped, "\x0d\x0a", so that nothing outside Fathom can end the line
  # and write one that looks like another program's log line.
  def self.notice(message = nil, io: $stderr)
    if block_given?
      begin
        message = yield
      rescue StandardError => e
        message = "fathom: (a message could not be built: #{e.class})"
      end
    end
    Notice.print(Notice.one_line(message), io)
  end
end
