# frozen_string_literal: true

# RUBYOPT=-rfathom/setup: always-on profiling from FATHOM_* (see always_on/setup.rb).
require_relative "always_on/setup"
