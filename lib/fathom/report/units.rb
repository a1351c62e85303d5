# frozen_string_literal: true

module Fathom
  module Report
    # Value and percentage formatting the way pprof's text reports do it
    # (internal/measurement in github.com/google/pprof): each value is scaled
    # to the largest unit it is at least 1 of, printed with two decimals, and
    # ".00" is dropped ("1.50MB", "512B", "100ms", "0").
    module Units
      # [canonical name, aliases, factor]; memory units are powers of 1024 like pprof's.
      MEMORY = [
        ["B", %w[b byte], 1],
        ["kB", %w[kb kbyte kilobyte], 1 << 10],
        ["MB", %w[mb mbyte megabyte], 1 << 20],
        ["GB", %w[gb gbyte gigabyte], 1 << 30],
        ["TB", %w[tb tbyte terabyte], 1 << 40],
        ["PB", %w[pb pbyte petabyte], 1 << 50],
      ].freeze
      TIME = [
        ["ns", %w[ns nanosecond], 1],
        ["us", %w[μs us microsecond], 1_000],
        ["ms", %w[ms millisecond], 1_000_000],
        ["s", %w[s sec second], 1_000_000_000],
        ["hrs", %w[hour hr], 3_600_000_000_000],
      ].freeze
      # Units shown as bare numbers.
      PLAIN = %w[count sample unit].freeze

      module_function

      # "1.50MB" for (1572864, "bytes"), "3" for (3, "count"). `to` is the
      # canonical unit to print in ("kB", "ms"...) or nil to pick the largest
      # unit the value is at least 1 of.
      def format_value(value, unit, to = nil)
        return "-#{format_value(-value, unit, to)}" if value.negative?

        scaled, name = scale(value, unit, to)
        text = format("%.2f", scaled).delete_suffix(".00")
        text == "0" ? "0" : "#{text}#{name}"
      end

      # The unit format_value would pick for `value` on its own.
      def auto_unit(value, unit)
        scale(value.abs, unit, nil)[1]
      end

      # pprof's Percentage: "  100%", "50.00%", " 0.5%".
      def percentage(value, total)
        ratio = total.zero? ? 0.0 : (value.to_f / total).abs * 100
        if ratio >= 99.95 && ratio <= 100.05
          "  100%"
        elsif ratio >= 1.0
          format("%5.2f%%", ratio)
        else
          format("%5.2g%%", ratio)
        end
      end

      def scale(value, unit, to = nil)
        [MEMORY, TIME].each do |table|
          from = sniff(table, unit) or next
          base = value * from
          row = to && table.find { |name, _, _| name == to }
          # The largest unit the value is at least 1 of (the smallest one for 0).
          row ||= table.reverse_each.find { |_, _, f| base >= f } || table.first
          return [base.to_f / row[2], row[0]]
        end
        [value, PLAIN.include?(unit.to_s.downcase) ? "" : unit.to_s]
      end

      # The factor of `unit` in `table`, accepting pprof's aliases and plurals.
      def sniff(table, unit)
        u = unit.to_s.downcase
        u = u.delete_suffix("s") if u.size > 2
        row = table.find { |_, aliases, _| aliases.include?(u) }
        row && row[2]
      end
    end
  end
end
