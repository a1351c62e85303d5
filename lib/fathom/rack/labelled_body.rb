# frozen_string_literal: true

module Fathom
  module Rack
    # A Rack body whose iteration runs under the request's labels
    # (RequestLabels): `each`, `call(stream)` and `to_ary` enter the
    # request's Context::Scope and leave it after. Every other method
    # (to_path, close, a server's own extensions) is forwarded as is, and
    # the wrapper answers respond_to? as the body does, so a server sees
    # the same body protocol (a body without to_ary still has none).
    class LabelledBody
      LABELLED = %i[each call to_ary].freeze

      def initialize(body, scope)
        @body = body
        @scope = scope
      end

      def respond_to_missing?(name, include_all = false)
        @body.respond_to?(name, include_all)
      end

      def method_missing(name, *args, &block)
        return super unless @body.respond_to?(name)
        return @body.__send__(name, *args, &block) unless LABELLED.include?(name)

        saved = @scope.enter
        begin
          @body.__send__(name, *args, &block)
        ensure
          @scope.leave(saved)
        end
      end
      ruby2_keywords(:method_missing) if respond_to?(:ruby2_keywords, true)
    end
  end
end
