# frozen_string_literal: true

module Fathom
  # The base class of every error Fathom raises on purpose. Defined here so that
  # the pure-Ruby parts (the pprof reader, the CLI) can raise it without the
  # native extension; the extension reuses this class when it is already
  # defined (and defines an identical one when it is loaded first).
  Error = Class.new(StandardError) unless const_defined?(:Error, false)
end
