# frozen_string_literal: true

# Everything the app needs is in config/application.rb.
Rails.application.configure {}
