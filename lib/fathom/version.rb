# frozen_string_literal: true

module Fathom
  VERSION = "0.1.0"
end
