# frozen_string_literal: true

require_relative "../labels"
require_relative "../notice"
require_relative "tracing"

module Fathom
  module Context
    # What a request or a job sets while it runs: its labels (the thread's
    # own, with `kind` and `endpoint` merged on) and the active span's id.
    # `enter` applies them to the current thread and returns what `leave`
    # puts back; the pair is how every integration (Rack, Rails, Sidekiq,
    # ActiveJob) labels, so they nest: a job performed inline inside a
    # request is labelled as the job while it runs, then the request again.
    class Scope
      # Where a request's Scope is kept in the Rack env.
      ENV_KEY = "fathom.labels"

      attr_reader :labels, :span_id

      def initialize(labels, span_id)
        @labels = labels
        @span_id = span_id
      end

      # A scope on top of the current thread's labels.
      def self.for(kind, endpoint)
        new(Labels.current.merge("kind" => kind, "endpoint" => endpoint).freeze, Tracing.active_span_id)
      end

      # Runs the block in a new scope (also restored when it raises).
      def self.run(kind, endpoint)
        scope, saved = open(kind, endpoint)
        return yield unless scope

        begin
          yield
        ensure
          scope.leave(saved)
        end
      end

      # A new scope, entered: [scope, saved], or nil when labelling failed
      # (then the request or job runs unlabelled, and the first failure in
      # the process is one line on stderr): labels never fail a request.
      def self.open(kind, endpoint)
        scope = self.for(kind, endpoint)
        [scope, scope.enter]
      rescue StandardError => e
        unless @failed
          @failed = true
          Fathom.notice { "fathom: endpoint labels failed, running unlabelled: #{e.class}: #{e.message}" }
        end
        nil
      end

      # Applies the scope to the current thread; returns the state to leave
      # back to. Without a span of its own the thread's span id is left as
      # it is (a job performed inline stays in the request's span), and no
      # span call is made: the common case, no tracer, costs nothing more.
      def enter
        token = Labels.set(@labels)
        return [token] unless @span_id

        span = Labels.span_id
        Labels.span_id = @span_id
        [token, span, true]
      end

      def leave(saved)
        token, span, spanned = saved
        Labels.restore(token)
        Labels.span_id = span if spanned
      end

      # Switches the running scope's endpoint (Rails names the route's
      # Controller#action once it dispatches) on the thread's current
      # labels, which keep what the app's own middleware added with
      # Labels.with in between; the scope takes them for the body's
      # iteration. The thread's labels are replaced without keeping the
      # token: the `leave` of the enclosing `enter` restores what was there
      # before the request. A span that became active since (a tracer
      # middleware inside ours) is taken when none was.
      def switch(endpoint)
        @labels = Labels.current.merge("endpoint" => endpoint).freeze
        Labels.set(@labels)
        return if @span_id

        @span_id = Tracing.active_span_id
        Labels.span_id = @span_id if @span_id
      end
    end
  end
end
