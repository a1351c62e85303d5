# frozen_string_literal: true

module Fathom
  module Files
    # Fathom loads before the application's Bundler when it is preloaded
    # (`fathom run` and RUBYOPT=-rfathom/setup put it in RUBYOPT, ahead of
    # bin/rails' `require "bundler/setup"`). Any default gem it requires then
    # (json, zlib, stringio, fileutils, securerandom, ...) is activated in
    # Ruby's own version, and Bundler refuses the app's Gemfile.lock when that
    # pins another one: "You have already activated securerandom 0.1.1, but
    # your Gemfile requires securerandom 0.4.1" (a Rails 7.2 app on Ruby 3.1
    # did not boot under `fathom run`). So nothing that loads with `require
    # "fathom"` or starts a profiler requires a default gem: the readers and
    # writers that need zlib, json or stringio require them when they run
    # (after the app's Bundler, which then picks its own version), and what the
    # start path needs is here, on core Ruby only.
    # test/unit/preload_gems_test.rb checks that none is activated.
    module Stdlib
      module_function

      # FileUtils.mkdir_p without fileutils: creates `dir` and its missing
      # parents, 0700 (before the umask): they hold profiles, which hold
      # memory contents. An existing directory is fine (its mode is left as
      # it is), anything else raises SystemCallError as mkdir_p would.
      def mkdir_p(dir)
        dir = File.expand_path(dir)
        return if File.directory?(dir)

        parent = File.dirname(dir)
        mkdir_p(parent) unless parent == dir
        begin
          Dir.mkdir(dir, 0o700)
        rescue Errno::EEXIST
          raise unless File.directory?(dir)
        end
      end
    end
  end
end
