# frozen_string_literal: true

require_relative "units"
require_relative "arguments"
require_relative "frames"
require_relative "source"
require_relative "../options"

module Fathom
  module Report
    # One method up close, like `stackprof --method` and `pprof -list`:
    # its self and total values, who called it, what it called, and its
    # source with a value per line.
    #
    #   CsvImport.report (test/fixtures/csv_import.rb:61)
    #     inuse_space: 9.20MB self (83.47%), 9.72MB total (88.16%)
    #     callers:
    #         9.72MB  100.0%  CsvImport.run test/fixtures/csv_import.rb:72
    #     callees (9.72MB):
    #         9.20MB   94.6%  String#*
    #     code:
    #              self       total  |   61  def report(orders)
    #            9.20MB      9.20MB  |   64    summary = SummaryCache.fetch(...) { JSON.generate(rows) * 20 }
    #
    # self counts the samples whose *site* is the method (the innermost
    # Ruby frame: the C methods it called are its own, as in `--by site`);
    # for a C method, those whose leaf it is. total counts each sample
    # whose stack holds the method once. Callers and callees are the
    # frames around its innermost call in each stack. A line's self and
    # total are the same, for the samples at that line. Recursion counts
    # once per sample.
    #
    # `name` matches a function's name exactly, else as a substring; the
    # report prints up to MAX_SHOWN matches (largest total first) and
    # names the others. No match is an ArgumentError listing near names.
    class MethodView
      MAX_SHOWN = 3
      CONTEXT = 2
      # A method longer than this is shown around its lines with values.
      MAX_LISTING = 80

      def initialize(profile, name, sample_index: nil, option: "method")
        Report.check_profile!(profile)
        unless String === name && !name.empty?
          raise(String === name ? ArgumentError : TypeError,
                "fathom: #{option} must be a method's name (a non-empty String), got #{Options.describe(name)}")
        end

        @profile = profile
        @name = name
        @option = option
        @index = SampleIndex.resolve(profile, sample_index)
        @sample_type, @unit = profile.sample_types.fetch(@index)
        @frames = Frames.new(profile)
        @source = Source.new
        @matches = find_matches
      end

      def to_s
        out = +""
        stats = @matches.map { |fn| method_stats(fn) }.sort_by { |st| [-st[:total].abs, st[:function].name] }
        shown = stats.first(MAX_SHOWN)
        shown.each_with_index do |st, i|
          out << "\n" if i.positive?
          out << method_text(st)
        end
        rest = stats.drop(MAX_SHOWN)
        unless rest.empty?
          out << "\nAlso matching #{Options.shown(@name)} (give its whole name): " \
                 "#{rest.first(10).map { |st| st[:function].name }.join(", ")}#{" …" if rest.size > 10}\n"
        end
        out
      end

      private

      # The functions (Pprof::Function) named `name`, else those whose name
      # contains it; one per name and file (a method and its blocks are
      # one function each in a profile: Ruby reports a block as its method),
      # with the lowest start line.
      def find_matches
        functions = @profile.functions.values
        found = functions.select { |f| f.name == @name }
        found = functions.select { |f| f.name.include?(@name) } if found.empty?
        unless found.empty?
          return found.group_by { |f| [f.name, f.filename] }.map { |_, fs| fs.min_by { |f| f.start_line.to_i } }
        end

        word = @name.split(/[#.:]+/).last.to_s.downcase
        near = word.size < 3 ? [] : functions.map(&:name).uniq.select { |n| n.downcase.include?(word) }
        hint = near.empty? ? "" : " (similar: #{near.first(5).map { |n| Options.clean(n, 60) }.join(", ")})"
        raise ArgumentError, "fathom: #{@option} #{Options.shown(@name)}: no function of that name in this profile#{hint}"
      end

      def value_of(sample)
        sample.values[@index]
      end

      def method_stats(fn)
        total_all = 0
        self_value = 0
        total = 0
        callers = Hash.new(0)
        callees = Hash.new(0)
        lines_self = Hash.new(0)
        lines_total = Hash.new(0)
        ruby = Frames.ruby_file?(fn.filename.to_s, 1)
        seen_lines = {}
        @profile.samples.each do |s|
          value = value_of(s)
          next if value.zero?

          total_all += value
          stack = @frames.stack(s)
          at = stack.index { |f| same?(f, fn) } or next
          total += value
          # self: the site (Ruby) or the leaf (C method) is this function.
          site = ruby ? Frames.site(stack) : stack.first
          if site && same?(site, fn)
            self_value += value
            lines_self[site.line] += value if ruby
          end
          callers[stack[at + 1]&.site_label || "(root)"] += value
          callees[at.zero? ? "(self)" : stack[at - 1].site_label] += value
          next unless ruby

          seen_lines.clear
          stack.each do |f|
            next unless same?(f, fn) && !seen_lines.key?(f.line)

            seen_lines[f.line] = true
            lines_total[f.line] += value
          end
        end
        { function: fn, ruby: ruby, all: total_all, self: self_value, total: total, callers: callers, callees: callees,
          lines_self: lines_self, lines_total: lines_total }
      end

      def same?(frame, fn)
        frame.name == fn.name && frame.file == fn.filename.to_s
      end

      def method_text(st)
        fn = st[:function]
        out = +"#{fn.name}#{" (#{Gems.short_path(fn.filename)}:#{fn.start_line})" if st[:ruby]}\n"
        out << "  #{@sample_type}: #{fmt(st[:self])} self (#{pct(st[:self], st[:all])}), " \
               "#{fmt(st[:total])} total (#{pct(st[:total], st[:all])})\n"
        if st[:total].zero?
          out << "  (no #{@sample_type} in this method's stacks)\n"
          return out
        end
        out << "  callers:\n"
        ranked(st[:callers]).each { |name, v| out << format("    %10s %7s  %s\n", fmt(v), pct(v, st[:total]), name) }
        out << "  callees (#{fmt(st[:total])}):\n"
        ranked(st[:callees]).each { |name, v| out << format("    %10s %7s  %s\n", fmt(v), pct(v, st[:total]), name) }
        out << listing(st) if st[:ruby]
        out
      end

      def ranked(hash)
        hash.sort_by { |name, v| [-v.abs, name] }.first(10)
      end

      # The method's source, a value per line: from its first line to the
      # last line with a value, with CONTEXT lines around those when it is
      # long.
      def listing(st)
        fn = st[:function]
        lines = @source.lines(fn.filename)
        valued = (st[:lines_total].keys + st[:lines_self].keys).select(&:positive?)
        unless lines
          out = +"  code: #{Gems.short_path(fn.filename)} is not readable here; values by line:\n"
          valued.uniq.sort.each do |n|
            out << format("    %10s %10s  | %5d\n", fmt(st[:lines_self][n]), fmt(st[:lines_total][n]), n)
          end
          return out
        end
        first = [fn.start_line.to_i, valued.min || fn.start_line.to_i].select(&:positive?).min || 1
        last = [(valued.max || first) + CONTEXT, lines.size].min
        numbers = (first..last).to_a
        if numbers.size > MAX_LISTING
          keep = valued.flat_map { |n| ((n - CONTEXT)..(n + CONTEXT)).to_a } + [first]
          numbers = numbers.select { |n| keep.include?(n) }
        end
        out = +"  code:\n"
        out << format("    %10s %10s  |\n", "self", "total")
        previous = nil
        numbers.each do |n|
          out << format("    %10s %10s  |\n", "", "…") if previous && n > previous + 1
          text = lines[n - 1].to_s.rstrip.gsub(/[[:cntrl:]]/) { |c| c == "\t" ? "  " : format("\\x%02x", c.ord) }
          text = "#{text[0, 99]}…" if text.size > 100
          self_text = st[:lines_self][n].zero? ? "" : fmt(st[:lines_self][n])
          total_text = st[:lines_total][n].zero? ? "" : fmt(st[:lines_total][n])
          out << format("    %10s %10s  | %5d  %s\n", self_text, total_text, n, text)
          previous = n
        end
        out
      end

      def fmt(value)
        Units.format_value(value, @unit)
      end

      def pct(value, total)
        Units.percentage(value, total).strip
      end
    end
  end
end
