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

# SHOP_EXIT_NOTE=1: each process says when it runs its at_exit handlers.
# Registered here, before the app and Fathom register theirs, so it runs
# after them. A worker that puma ends with SIGKILL after
# worker_shutdown_timeout (a shutdown hang of puma's own, seen on 3.3:
# test/rails/push_cluster_test.rb) prints nothing.
at_exit { $stderr.puts "shop: pid #{Process.pid} ran its at_exit handlers" } if ENV["SHOP_EXIT_NOTE"]
