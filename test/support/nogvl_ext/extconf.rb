# frozen_string_literal: true

# Test-only: see nogvl_burn.c and test/support/nogvl_burn.rb.
require "mkmf"
create_makefile("nogvl_burn")
