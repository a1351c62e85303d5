# frozen_string_literal: true

require "rails/railtie"
require_relative "start_in_workers"

module Fathom
  # Rails gets what RUBYOPT=-rfathom/setup gives any Ruby program, from the
  # same FATHOM_* variables, once the gem is in the Gemfile (lib/fathom.rb
  # loads this file when Rails is there):
  #
  #   FATHOM_DIR=/var/tmp/fathom FATHOM_MODE=heap,gc   always-on files (fathom/setup);
  #                                                    under puma cluster mode, in each
  #                                                    worker, not the master (StartInWorkers)
  #   FATHOM_RACK=1                                    the /debug/fathom endpoints and
  #                                                    ?fathom=heap|gc|cpu on any request,
  #                                                    loopback-only unless FATHOM_RACK_TOKEN
  #
  # Without those variables it adds nothing: no profiler, no middleware.
  class Railtie < ::Rails::Railtie
    initializer "fathom.always_on" do
      # fathom/setup starts on load; it is a no-op when already started
      # (RUBYOPT=-rfathom/setup and the Railtie together).
      if ENV["FATHOM_DIR"] && !ENV["FATHOM_DIR"].strip.empty?
        if StartInWorkers.puma_preloading_master?
          StartInWorkers.after_fork { require_relative "setup" }
        else
          require_relative "setup"
        end
      end
    end

    initializer "fathom.rack" do |app|
      if ENV["FATHOM_RACK"] == "1"
        require_relative "rack"
        # First, so that the app's own middleware (sessions, CSRF, auth
        # redirects) never runs for a profile request; the per-request
        # profiler next, so that its profile covers the whole stack.
        app.middleware.insert(0, Fathom::Rack::App, enabled: true)
        app.middleware.insert(1, Fathom::Rack::Middleware, enabled: true)
      end
    end
  end
end
