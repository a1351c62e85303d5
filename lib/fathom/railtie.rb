# frozen_string_literal: true

# require "fathom/railtie": the Railtie (see always_on/railtie.rb).
require_relative "always_on/railtie"
