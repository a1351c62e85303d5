# frozen_string_literal: true

require "fathom" # the gem is fathom-profiler; Bundler auto-requires this file
