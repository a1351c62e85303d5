# frozen_string_literal: true

require "rails/railtie"

module Fathom
  # Rails gets what RUBYOPT=-rfathom/setup gives any Ruby program, from the
  # same FATHOM_* variables, once the gem is in the Gemfile (lib/fathom.rb
  # loads this file when Rails is there):
  #
  #   FATHOM_DIR=/var/tmp/fathom FATHOM_MODE=heap,gc   always-on files (fathom/setup)
  #   FATHOM_RACK=1                                    the /debug/fathom endpoints,
  #                                                    loopback-only unless FATHOM_RACK_TOKEN
  #
  # Without those variables it adds nothing: no profiler, no middleware.
  class Railtie < ::Rails::Railtie
    initializer "fathom.always_on" do
      # fathom/setup starts on load; it is a no-op when already started
      # (RUBYOPT=-rfathom/setup and the Railtie together).
      require_relative "setup" if ENV["FATHOM_DIR"] && !ENV["FATHOM_DIR"].strip.empty?
    end

    initializer "fathom.rack" do |app|
      if ENV["FATHOM_RACK"] == "1"
        require_relative "rack"
        # First, so that the app's own middleware (sessions, CSRF, auth
        # redirects) never runs for a profile request.
        app.middleware.insert(0, Fathom::Rack::App, enabled: true)
      end
    end
  end
end
