# frozen_string_literal: true

require_relative "../context/jobs"

module Fathom
  module Sidekiq
    # Sidekiq server middleware: each job runs labelled kind=job,
    # endpoint=<job class> (Fathom::Context::Jobs). In Rails,
    # FATHOM_ENDPOINT_LABELS=1 adds it when Sidekiq is in the bundle;
    # elsewhere:
    #
    #   require "fathom/sidekiq/job_labels"
    #   Sidekiq.configure_server do |config|
    #     config.server_middleware { |chain| chain.add Fathom::Sidekiq::JobLabels }
    #   end
    #
    # An ActiveJob sent through Sidekiq is named by its own class (the
    # payload's "wrapped"), not by Sidekiq's JobWrapper. Note for code
    # inside `module Fathom`: `Sidekiq` there means this module; the gem's
    # is `::Sidekiq`.
    class JobLabels
      # Adds this middleware to Sidekiq's server chain, when Sidekiq is
      # loaded (only the server process runs configure_server's block);
      # FATHOM_ENDPOINT_LABELS=1 in Rails (Context::Switch). Once per
      # process. Here, not in Context::Jobs: this file needs Jobs, and
      # Jobs needing it back was a require circle.
      def self.install
        return false if @installed || !defined?(::Sidekiq) || !::Sidekiq.respond_to?(:configure_server)

        @installed = true
        ::Sidekiq.configure_server do |config|
          config.server_middleware { |chain| chain.add(Fathom::Sidekiq::JobLabels) }
        end
        true
      end

      # Sidekiq's server middleware signature (Sidekiq 6 and 7): the job
      # instance, its payload Hash and the queue name.
      def call(job, payload, _queue, &block)
        name = payload["wrapped"] if payload.is_a?(Hash)
        name = job.class.name unless name.is_a?(String)
        Context::Jobs.run(name, &block)
      end
    end
  end
end
