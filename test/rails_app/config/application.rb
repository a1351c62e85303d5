# frozen_string_literal: true

require_relative "boot"
require "fileutils"
FileUtils.mkdir_p(File.expand_path("../tmp", __dir__))

# The frameworks this app uses (no mailer, storage, cable, text): enough to
# be a real Rails app (models over SQLite, views with partials, JSON, jobs)
# without the parts it would not exercise.
require "rails"
require "active_model/railtie"
require "active_record/railtie"
require "active_job/railtie"
require "action_controller/railtie"
require "action_view/railtie"

# As in any app: Fathom comes from the Gemfile, required after Rails, so its
# Railtie is loaded.
Bundler.require(*Rails.groups)

module Shop
  class Application < Rails::Application
    config.load_defaults 7.2
    config.eager_load = Rails.env.production?
    config.cache_classes = true
    config.enable_reloading = false
    config.consider_all_requests_local = !Rails.env.production?
    config.secret_key_base = "fathom-test-app-not-a-secret" * 3
    config.active_job.queue_adapter = :inline
    # The log goes to stdout in production (as a container would), to
    # log/ otherwise: requests write to it, so the logger's Monitor is
    # taken on every request (a retention snapshot sees its owner).
    config.logger = ActiveSupport::Logger.new(Rails.env.production? ? $stdout : File.join(root, "tmp", "#{Rails.env}.log"))
    config.log_level = ENV.fetch("RAILS_LOG_LEVEL", "info").to_sym
    # Only loopback and the test's own names; a DNS-rebinding Host header
    # gets a 403 from Rails.
    config.hosts = ["localhost", "127.0.0.1", "www.example.com"]
    config.host_authorization = { exclude: ->(request) { request.path == "/up" } }
  end
end
