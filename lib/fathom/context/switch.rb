# frozen_string_literal: true

require_relative "../notice"

module Fathom
  # Request and job context for profiles (docs/production.md, "Labels by
  # endpoint"): which endpoint, job or span a sample was taken in, as
  # Fathom::Labels on the running thread.
  module Context
    # FATHOM_ENDPOINT_LABELS=1: Rails gets the request middleware at the top
    # of its stack, Controller#action names, ActiveJob's and (when in the
    # bundle) Sidekiq's job labels. Opt-in: without it nothing is added.
    module Switch
      VAR = "FATHOM_ENDPOINT_LABELS"

      module_function

      # "1" on; unset, empty or "0" off; anything else is one line on
      # stderr and off, as any bad FATHOM_* value: never a failed boot.
      def enabled?(env = ENV)
        value = env[VAR].to_s.b.strip # as bytes: never an encoding error at boot
        return true if value == "1"
        return false if value.empty? || value == "0"

        Fathom.notice { "fathom: #{VAR}=#{value.inspect} ignored: 1 labels requests and jobs by endpoint, 0 does not" }
        false
      end

      # The Railtie's part; `app` is the Rails application.
      def install_rails(app)
        require_relative "../rack/request_labels"
        require_relative "rails_endpoint"
        require_relative "jobs"
        # First: the whole stack (Rails' own middleware included) runs
        # labelled, with the path pattern until the controller names it.
        app.middleware.insert(0, Fathom::Rack::RequestLabels)
        RailsEndpoint.install
        Jobs.install_active_job
        if defined?(::Sidekiq)
          require_relative "../sidekiq/job_labels"
          Fathom::Sidekiq::JobLabels.install
        end
        true
      end
    end
  end
end
