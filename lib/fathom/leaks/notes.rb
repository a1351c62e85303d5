# frozen_string_literal: true

require_relative "memory"

module Fathom
  module Leaks
    # What a heap window carries beside its profile, as comment lines: the
    # process's memory (Memory) and, with FATHOM_LEAKS=1, the holders the
    # monitor found (Monitor#notes). AlwaysOn's heap flushes and the Rack
    # heap endpoint stamp their profiles with these lines, so that `fathom
    # leaks` reads everything from the files or the endpoint alone.
    module Notes
      @monitor = nil

      class << self
        attr_accessor :monitor

        # Never raises: a profile is worth more than its notes.
        def lines
          [Memory.line, *monitor_lines]
        end

        private

        def monitor_lines
          @monitor ? @monitor.notes : []
        rescue StandardError
          []
        end
      end
    end
  end
end
