# frozen_string_literal: true

# Cluster mode, as in production: SHOP_WORKERS workers (default 2) of
# SHOP_THREADS threads, the app preloaded in the master (copy-on-write).
workers Integer(ENV.fetch("SHOP_WORKERS", "2"))
threads_count = Integer(ENV.fetch("SHOP_THREADS", "3"))
threads threads_count, threads_count
preload_app!
bind "tcp://127.0.0.1:#{ENV.fetch("PORT", "3000")}"
environment ENV.fetch("RAILS_ENV", "production")
pidfile ENV["SHOP_PIDFILE"] if ENV["SHOP_PIDFILE"]
