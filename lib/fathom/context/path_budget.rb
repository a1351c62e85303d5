# frozen_string_literal: true

require_relative "../notice"

module Fathom
  module Context
    # How many distinct path patterns (PathPattern) one RequestLabels
    # labels requests with: the first `max` seen, then "<METHOD> (other
    # paths)" for any new one.
    #
    # Why: a path pattern keeps lowercase words, so a client that asks for
    # /aaa, /aab, /aac... makes a new label set per request. The process's
    # label table holds 1024 sets (docs/internals/labels.md, "The
    # interning table"), and once it is full every new set, a Rails
    # route's "ProductsController#show" or a job's class included, is
    # recorded as "(other)". Any client could do that in 1,024 requests,
    # before real traffic named a single route. With this budget, paths
    # can take at most `max` sets; routes the app declares (Rails'
    # Controller#action, bounded by its code), jobs and the app's own
    # labels keep the rest. What the user sees once it is used up: one
    # line on stderr, and the new paths' samples under
    # endpoint="GET (other paths)" (`-tagfocus 'endpoint=other paths'`),
    # while the paths admitted before keep their names.
    #
    # First come, first kept: nothing tells a route's word from a client's,
    # so the budget cannot choose better; an app whose paths matter names
    # them itself (RequestLabels' endpoint:, as Rails does).
    class PathBudget
      MAX = 256
      OTHER = "(other paths)"

      attr_reader :max

      def initialize(max = MAX)
        @max = max
        @seen = {}
        @lock = Mutex.new
        @said = false
      end

      # `pattern` ("GET /users/:id") if admitted, else "GET (other paths)".
      # A pattern seen before costs one Hash lookup (no lock: under the
      # GVL a reader sees the Hash before or after an insert, and a miss
      # takes the lock and looks again).
      def admit(pattern)
        return pattern if @seen[pattern]

        full = @lock.synchronize do
          next false if @seen[pattern]
          next true if @seen.size >= @max

          @seen[pattern] = true
          false
        end
        return pattern unless full

        announce(pattern)
        "#{pattern[/\A\S+/]} #{OTHER}".freeze
      end

      def size
        @seen.size
      end

      private

      def announce(pattern)
        first = @lock.synchronize { !@said && (@said = true) }
        return unless first

        Fathom.notice do
          "fathom: request labels: #{@max} distinct paths labelled in this process; requests on new paths " \
            "(#{pattern[0, 60].inspect} first) are labelled #{"#{pattern[/\A\S+/]} #{OTHER}".inspect}, so that clients " \
            "cannot fill the label table (name endpoints by route: RequestLabels endpoint:, as Rails does)"
        end
      end
    end
  end
end
