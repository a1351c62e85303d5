# frozen_string_literal: true

# Test-only: see native_leak.c and test/support/native_leak.rb.
require "mkmf"
create_makefile("native_leak")
