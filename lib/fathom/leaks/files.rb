# frozen_string_literal: true

require_relative "../files/profile_bytes"
require_relative "../report"
require_relative "window"
require_relative "history"

module Fathom
  module Leaks
    # Windows from files: a directory of always-on files (heap-<pid>-<token>-
    # <time>-<n>.pb.gz: the other modes' files and anything else are left
    # alone) or a list of heap profiles. Each process (pid, and the token
    # of its always-on file names) gets its own History, in time order: two
    # puma workers are two heaps, never one series.
    module Files
      NAME = /\Aheap-(\d+)-(?:(\h{8})-)?\d{8}T\d{6}Z-\d+\.pb\.gz\z/.freeze

      Loaded = Struct.new(:histories, :skipped, keyword_init: true)

      module_function

      # paths: directories and files. Files named on the command line must
      # all be heap profiles (Fathom::Error naming the first that is not);
      # in a directory, a damaged or unreadable file is skipped and counted.
      def load(paths, max_sites: 200, max_windows: 120)
        windows = []
        skipped = []
        paths.each do |path|
          if File.directory?(path)
            names = Dir.children(path).select { |n| NAME.match?(n) }.sort
            names.each do |name|
              full = File.join(path, name)
              windows << read(full, NAME.match(name)[2])
            rescue Fathom::Error, SystemCallError => e
              skipped << [full, e.message]
            end
          else
            m = NAME.match(File.basename(path))
            windows << read(path, m && m[2])
          end
        end
        groups = windows.group_by(&:process_key)
        histories = groups.map do |_, list|
          history = History.new(max_sites: max_sites, max_windows: max_windows)
          list.sort_by(&:end_s).each { |w| history.add(w) }
          history
        end
        Loaded.new(histories: histories.sort_by { |h| [-h.size, h.pid.to_s] }, skipped: skipped)
      end

      def read(path, token)
        bytes = Fathom::Files::ProfileBytes.read_file(path)
        raise Fathom::Error, "fathom: #{path}: the file is empty (0 bytes), not a profile" if bytes.empty?

        profile = begin
          Report.decode(bytes)
        rescue Fathom::Error => e
          raise Fathom::Error, "fathom: #{path}: #{e.message.delete_prefix("fathom: ")}"
        end
        Window.from_profile(profile, source: path, token: token)
      end
    end
  end
end
