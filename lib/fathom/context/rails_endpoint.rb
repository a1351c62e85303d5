# frozen_string_literal: true

require_relative "scope"

module Fathom
  module Context
    # In Rails, names a request's endpoint by its route once the controller
    # starts: a module prepended to ActionController::Base and ::API whose
    # process_action (Rails' documented place to "modify the behavior
    # around processing an action") switches the request's Scope to
    # "ProductsController#show", then calls Rails' own. It runs on the
    # thread that runs the action (the Live thread for
    # ActionController::Live), after routing and before the action's
    # callbacks and Rails' start_processing event. It acts only on a
    # request that Fathom::Rack::RequestLabels labels (its Scope in the
    # env), so a controller run without the middleware is left alone.
    #
    # Why not a listener on start_processing.action_controller, the public
    # event at the same point: an ActiveSupport listener of a kind the
    # event has no other of costs ActiveSupport a group of its own per
    # event, 3.3 us against 0.05 us for one more method in the chain
    # (bench/request_labels.rb, docs/internals/serving.md,
    # "Request and job labels").
    #
    # Values are bounded by the app's code (Rails refuses an action that is
    # not a method before process_action). The names are built once per
    # controller and action, not per request.
    module RailsEndpoint
      MAX_NAMES = 10_000
      @names = {}
      @installed = false

      # Prepended to the controller base classes.
      module Hook
        private

        def process_action(*)
          scope = request.get_header(Scope::ENV_KEY)
          RailsEndpoint.switch(scope, self.class.name, action_name) if scope
          super
        end
        ruby2_keywords(:process_action) if respond_to?(:ruby2_keywords, true)
      end

      class << self
        # Once per process; true when it did.
        def install
          return false if @installed

          @installed = true
          ::ActiveSupport.on_load(:action_controller) { prepend Fathom::Context::RailsEndpoint::Hook }
          true
        end

        def switch(scope, controller, action)
          return unless controller && action

          scope.switch(name(controller, action))
        rescue StandardError
          nil # a profiler's label never fails a request
        end

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
end
