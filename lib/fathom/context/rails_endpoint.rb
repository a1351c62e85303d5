# frozen_string_literal: true

module Fathom
  module Context
    # In Rails, names a request's endpoint by its route once the controller
    # starts: an ActiveSupport::Notifications subscriber to
    # start_processing.action_controller, which Rails instruments in every
    # controller's process_action, on the thread that runs the action,
    # after routing and before the action's callbacks. Rails' own log
    # subscriber listens to it already, so the event is published anyway;
    # this listener is an "evented" one (start/finish methods): Rails calls
    # it with the payload and reads no clock for it. It acts only on a
    # request that Fathom::Rack::RequestLabels labels (its Scope in the env),
    # so a controller run outside the middleware is left alone.
    #
    # Values: "ProductsController#show", bounded by the app's code (an
    # action that is not a method is refused by Rails before this event).
    # The names are built once per controller and action, not per request.
    class RailsEndpoint
      EVENT = "start_processing.action_controller"
      MAX_NAMES = 10_000

      @subscribed = false

      class << self
        # Subscribes once per process; true when it did.
        def subscribe!
          return false if @subscribed

          @subscribed = true
          ::ActiveSupport::Notifications.subscribe(EVENT, new)
          true
        end
      end

      def initialize
        @names = {}
      end

      def start(_name, _id, payload)
        request = payload[:request] or return
        scope = request.get_header(Scope::ENV_KEY) or return
        scope.switch(name(payload[:controller], payload[:action]))
      rescue StandardError
        nil # a profiler's label never fails a request
      end

      def finish(_name, _id, _payload); end

      private

      # Unsynchronized: under the GVL a race builds the same String twice
      # at worst.
      def name(controller, action)
        actions = @names[controller] ||= {}
        actions[action] || begin
          name = "#{controller}##{action}".freeze
          actions[action] = name if actions.size < MAX_NAMES && @names.size < MAX_NAMES
          name
        end
      end
    end
  end
end
