# frozen_string_literal: true

require "tmpdir"
require_relative "response"
require_relative "../profilers/heap_dump"

module Fathom
  module Rack
    # /dump's reply: the heap dump a forked child wrote (Profilers::HeapDump), sent
    # from its file in 64 kB chunks and never held whole in memory (a 5M-
    # object heap gives ~150 MB gzipped). The file is unlinked as soon as it
    # is open, so nothing is left behind whether or not the server reads
    # the body to its end or calls #close; the descriptor is closed by
    # #close (Rack's contract), or by GC if a server never calls it.
    class DumpBody
      CHUNK = 64 << 10

      # The Rack triple for a fresh dump, gzipped, without string values.
      def self.reply(heap_dump)
        path = File.join(Dir.tmpdir, "fathom-dump-#{Process.pid}-#{Random.urandom(6).unpack1("H*")}.json.gz")
        begin
          stats = heap_dump.dump(path, values: false, gzip: true)
          file = File.open(path, "rb")
        ensure
          # Never leave a dump of the heap in /tmp, also after a Thread#kill.
          File.unlink(path) if File.exist?(path)
        end
        size = file.size
        headers = Response.base_headers.merge("content-type" => "application/octet-stream",
                                              "content-disposition" => %(attachment; filename="dump.json.gz"),
                                              "content-length" => size.to_s,
                                              # What it cost and holds, for `fathom dump` to say.
                                              "x-fathom-objects" => stats[:objects].to_s,
                                              "x-fathom-fork-ns" => stats[:fork_ns].to_s)
        [200, headers, new(file)]
      rescue Exception # rubocop:disable Lint/RescueException -- the descriptor too, on Interrupt
        file&.close
        raise
      end

      def initialize(file)
        @file = file
      end

      def each
        buffer = +""
        yield buffer.dup while @file.read(CHUNK, buffer)
      end

      def close
        @file.close unless @file.closed?
      end
    end
  end
end
