# frozen_string_literal: true

# require "fathom": the library (fathom/api.rb, which says what it offers)
# and, when Rails is loaded first (Bundler.require), the Railtie, which
# starts always-on profiling and mounts the endpoints from FATHOM_*
# (lib/fathom/railtie.rb).
require_relative "fathom/api"
require_relative "fathom/railtie" if defined?(::Rails::Railtie)
