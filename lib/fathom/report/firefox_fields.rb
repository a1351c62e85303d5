# frozen_string_literal: true

require_relative "../error"

module Fathom
  module Report
    # Reading fields of a Firefox Profiler file that may be anything (files
    # are input): a wrong type is a Fathom::Error naming the field, never a
    # NoMethodError from deep inside a report.
    module FirefoxFields
      # A JSON object (nil: empty).
      def object(value, what)
        return {} if value.nil?
        return value if Hash === value

        raise Fathom::Error, "fathom: not a Firefox Profiler profile (#{what} is not an object)"
      end

      # A JSON array (nil: empty).
      def array(value, what)
        return [] if value.nil?
        return value if Array === value

        raise Fathom::Error, "fathom: not a Firefox Profiler profile (#{what} is not an array)"
      end

      # A finite number (nil: 0).
      def number(value, what)
        return 0 if value.nil?
        return value if (Integer === value) || (Float === value && value.finite?)

        raise Fathom::Error, "fathom: not a usable Firefox Profiler profile (#{what} is not a number)"
      end
    end
  end
end
