# frozen_string_literal: true

require_relative "gems"

module Fathom
  module Report
    # The frames of a decoded pprof profile with what the reports that
    # group by more than a function's name need: the file and line of each
    # frame, and whether it is Ruby code.
    #
    # A frame is Ruby code when it has a file of its own. C methods
    # (`String#*`, file "<cfunc>"), Ruby's own <internal:...> files (3.3's
    # Integer#times, 3.4's Array#each), a C extension's init frame (its .so
    # as file) and native frames (a CPU profile's C frames) are not; neither
    # are frames without a file (GC, "[not sampled]" rows, retention chains).
    # The *site* of a stack is its innermost Ruby frame: the C methods it
    # called are folded into the line that called them, as memory_profiler
    # reports a `JSON.generate(rows) * 20` line rather than `String#*`.
    # A stack with no Ruby frame at all is its own leaf's site.
    class Frames
      Frame = Struct.new(:name, :file, :line, :ruby) do
        def ruby?
          ruby
        end

        # "Foo#bar path/to/foo.rb:12" (pprof's -lines form, the path shortened).
        def site_label
          ruby ? "#{name} #{Gems.short_path(file)}:#{line}" : name
        end

        def line_label
          ruby ? "#{Gems.short_path(file)}:#{line}" : name
        end

        def file_label
          ruby ? Gems.short_path(file) : name
        end

        def gem
          ruby ? Gems.of(file) : name
        end
      end

      NATIVE_FILE = /\.so(?:\.\d+)*\z/.freeze

      def initialize(profile)
        @profile = profile
        @by_location = {}
      end

      attr_reader :profile

      # The frames of a location, innermost (inlined) first.
      def location(id)
        @by_location[id] ||= begin
          lines = @profile.locations.fetch(id)
          if lines.empty?
            [Frame.new("<location #{id}>", "", 0, false)]
          else
            lines.map { |function_id, line| frame(function_id, line) }
          end
        end
      end

      # A sample's frames, innermost first.
      def stack(sample)
        sample.location_ids.flat_map { |id| location(id) }
      end

      # The site of a list of frames (innermost first): its innermost Ruby
      # frame, else its leaf. nil for an empty stack.
      def self.site(frames)
        frames.find(&:ruby?) || frames.first
      end

      def self.ruby_file?(file, line)
        !file.empty? && !file.start_with?("<") && !NATIVE_FILE.match?(file) && line.to_i >= 0
      end

      private

      def frame(function_id, line)
        fn = @profile.functions[function_id]
        return Frame.new("<unknown function #{function_id}>", "", 0, false) unless fn

        file = fn.filename.to_s
        Frame.new(fn.name, file, line, self.class.ruby_file?(file, line))
      end
    end
  end
end
