# frozen_string_literal: true

require_relative "scope"

module Fathom
  module Context
    # Background jobs get the same two labels as requests, so that one
    # label slices a whole service: kind=job and endpoint=<job class>
    # ("RestockJob"; for an ActiveJob run by Sidekiq, the ActiveJob class,
    # not Sidekiq's wrapper). Values are bounded by the app's code.
    module Jobs
      KIND = "job"
      ANONYMOUS = "(anonymous job)"

      module_function

      # Runs the block labelled as a job of class name `name`.
      def run(name, &block)
        name = ANONYMOUS unless name.is_a?(String) && !name.empty?
        Scope.run(KIND, name, &block)
      end

      # ActiveJob: an around_perform callback on ActiveJob::Base, added when
      # ActiveJob loads (ActiveSupport.on_load), so every job class has it.
      # Once per process.
      def install_active_job
        return false if @active_job

        ::ActiveSupport.on_load(:active_job) do
          around_perform { |job, block| Fathom::Context::Jobs.run(job.class.name) { block.call } }
        end
        @active_job = true
      end
    end
  end
end
