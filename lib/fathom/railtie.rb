# frozen_string_literal: true

require "rails/railtie"
require_relative "always_on/start_in_workers"

module Fathom
  # Rails gets what RUBYOPT=-rfathom/setup gives any Ruby program, from the
  # same FATHOM_* variables, once the gem is in the Gemfile (lib/fathom.rb
  # loads this file when Rails is there; require "fathom/railtie" also does).
  # What it loads (fathom/setup, fathom/rack) requires fathom/api.rb, never
  # lib/fathom.rb, which requires this file:
  #
  #   FATHOM_DIR=/var/tmp/fathom FATHOM_MODE=heap,gc   always-on files (fathom/setup), or
  #   FATHOM_PUSH=pyroscope://host:4040                pushed to a backend (Fathom::Push);
  #                                                    under puma cluster mode, in each
  #                                                    worker, not the master (AlwaysOn::StartInWorkers)
  #   FATHOM_RACK=1                                    the /debug/fathom endpoints and
  #                                                    ?fathom=heap|gc|cpu on any request,
  #                                                    loopback-only unless FATHOM_RACK_TOKEN
  #                                                    (FATHOM_RACK_HOSTS: more local Host names)
  #   FATHOM_ENDPOINT_LABELS=1                         samples labelled by endpoint: requests by
  #                                                    Controller#action, ActiveJob and Sidekiq
  #                                                    jobs by class, and the tracer's span id
  #                                                    (lib/fathom/context/switch.rb)
  #
  # Without those variables it adds nothing: no profiler, no middleware.
  class Railtie < ::Rails::Railtie
    initializer "fathom.always_on" do
      # fathom/setup starts on load; it is a no-op when already started
      # (RUBYOPT=-rfathom/setup and the Railtie together).
      # As bytes: a value that is not UTF-8 must reach fathom/setup, which
      # reports it naming the variable, not raise here and fail the boot.
      if %w[FATHOM_DIR FATHOM_PUSH].any? { |name| ENV[name] && !ENV[name].b.strip.empty? }
        if AlwaysOn::StartInWorkers.puma_preloading_master?
          AlwaysOn::StartInWorkers.after_fork { require_relative "always_on/setup" }
        else
          require_relative "always_on/setup"
        end
      end
    end

    # After the app's config/initializers, so that config.hosts is final.
    initializer "fathom.rack", after: :load_config_initializers do |app|
      Railtie.mount_rack(app) if ENV["FATHOM_RACK"] == "1"
    end

    # After fathom.rack, so that RequestLabels, inserted at 0, stays first.
    initializer "fathom.endpoint_labels", after: "fathom.rack" do |app|
      require_relative "context/switch"
      Fathom::Context::Switch.install_rails(app) if Fathom::Context::Switch.enabled?
    end

    # The endpoints and the per-request middleware, configured from
    # FATHOM_RACK_*. A bad value (a short FATHOM_RACK_TOKEN, a malformed
    # FATHOM_RACK_HOSTS) is one line on stderr, as any bad FATHOM_* value,
    # and the app boots without them: never exposed without the protection
    # that was asked for, and never a failed boot because of a profiler.
    #
    # Where: right after ActionDispatch::HostAuthorization when the app has
    # it (config.hosts not empty), else first. Before it, a request with a
    # foreign Host (DNS rebinding: a page on attacker.example re-pointed at
    # 127.0.0.1) reached the endpoints while every other path got Rails'
    # 403. Still ahead of the app's own middleware (sessions, CSRF, auth
    # redirects), which never runs for a profile request; the per-request
    # profiler next, so that its profile covers the rest of the stack.
    def self.mount_rack(app)
      require_relative "rack"
      begin
        Fathom::Rack::Config.new(enabled: true)
      rescue ArgumentError, TypeError => e
        Fathom.notice { "fathom: FATHOM_RACK=1 ignored, #{e.message.delete_prefix("fathom: ")} (FATHOM_RACK_TOKEN, FATHOM_RACK_HOSTS): the endpoints and ?fathom= are not mounted" }
        return false
      end
      if defined?(ActionDispatch::HostAuthorization) && !Array(app.config.hosts).empty?
        app.middleware.insert_after(ActionDispatch::HostAuthorization, Fathom::Rack::Middleware, enabled: true)
        app.middleware.insert_after(ActionDispatch::HostAuthorization, Fathom::Rack::App, enabled: true)
      else
        app.middleware.insert(0, Fathom::Rack::App, enabled: true)
        app.middleware.insert(1, Fathom::Rack::Middleware, enabled: true)
      end
      true
    end
  end
end
