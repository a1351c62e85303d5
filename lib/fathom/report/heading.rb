# frozen_string_literal: true

require_relative "units"

module Fathom
  module Report
    # The first line of a heap or CPU report: what the profile is, in
    # words, from the comments its writer left ("fathom heap profile,
    # sampled mode (interval 10000000ns)", "fathom.cpu.mode=cpu
    # interval_ns=10000000 dropped=0 states=gvl-flag"), which the report
    # printed as they were before. Those comments, and the notes on how
    # the numbers are estimated, are printed in full with `notes: true`
    # (`fathom report --notes`). Comments it does not know (another
    # writer's, a newer Fathom's) are left to the notes too.
    module Heading
      HEAP_SAMPLED = /\Afathom heap profile, sampled mode \(interval (\d+)ns\)/.freeze
      HEAP_EXACT = /\Afathom heap profile, exact mode/.freeze
      HEAP_SAMPLES = /\ASamples: (\d+) behind alloc_\*, (\d+) behind inuse_\*/.freeze
      CPU = /\Afathom\.cpu\.mode=(\w+) interval_ns=(\d+) dropped=(\d+)/.freeze
      WHO = /\A(pid|hostname|ruby|window)=(.*)\z/.freeze

      module_function

      # One line, or nil when the comments say nothing it knows.
      def summary(comments)
        comments = Array(comments)
        text = heap(comments) || cpu(comments)
        who = process(comments)
        [text, who].compact.join("\n").then { |s| s.empty? ? nil : s }
      end

      def heap(comments)
        counts = comments.lazy.map { |c| HEAP_SAMPLES.match(c) }.find(&:itself)
        if comments.any? { |c| HEAP_EXACT.match?(c) }
          text = +"Heap profile, exact mode: every allocation recorded"
          text << " (#{counts[1]} allocations, #{counts[2]} of them live at the end)" if counts
          text
        elsif (m = comments.lazy.map { |c| HEAP_SAMPLED.match(c) }.find(&:itself))
          text = +"Heap profile, sampled mode: a burst of samples every #{duration(m[1].to_i)} of CPU time"
          text << " (#{counts[1]} samples, #{counts[2]} of them live at the end); values are estimates" if counts
          text
        end
      end

      def cpu(comments)
        m = comments.lazy.map { |c| CPU.match(c) }.find(&:itself) or return nil
        clock = m[1] == "wall" ? "elapsed (wall) time" : "CPU time"
        dropped = m[3].to_i
        "#{m[1] == "wall" ? "Wall" : "CPU"} profile: each thread sampled every #{duration(m[2].to_i)} of its #{clock}" \
          "#{", #{dropped} samples dropped (the sample buffer was full)" if dropped.positive?}"
      end

      # "Process: pid 4242 on web-1, Ruby 3.1.2": the stamp of a profile
      # that left its process (always-on files, endpoints).
      def process(comments)
        who = comments.filter_map { |c| WHO.match(c) }.to_h { |m| [m[1], m[2]] }
        return nil unless who["pid"]

        "Process: pid #{who["pid"]}#{" on #{who["hostname"]}" if who["hostname"]}" \
          "#{", Ruby #{who["ruby"].split.first}" if who["ruby"]}"
      end

      def duration(ns)
        Units.format_value(ns, "nanoseconds")
      end

      # Whether a comment is said by summary (the notes print every comment).
      def known?(comment)
        [HEAP_SAMPLED, HEAP_EXACT, HEAP_SAMPLES, CPU, WHO].any? { |re| re.match?(comment) }
      end
    end
  end
end
