# frozen_string_literal: true

# Profiling a running server over HTTP (require "fathom/rack"):
#
#   Fathom::Rack::App         pprof endpoints under /debug/fathom (heap,
#                             allocs, gc, retention, profile)
#   Fathom::Rack::Middleware  ?fathom=heap|gc|cpu on an ordinary request
#   Fathom::Rack::RequestLabels  samples labelled by endpoint (also alone:
#                             require "fathom/rack/request_labels")
#
# Neither needs the rack gem: both speak the Rack protocol themselves, so
# Fathom loads and works without it. Note for code inside `module Fathom`:
# `Rack` there means Fathom::Rack; the gem's is `::Rack`.
require_relative "api"
require_relative "rack/app"
require_relative "rack/middleware"
require_relative "rack/request_labels"
