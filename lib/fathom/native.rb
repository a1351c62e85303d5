# frozen_string_literal: true

require_relative "error"

module Fathom
  # Loads the C++ extension (Fathom::Native::HeapCollector).
  #
  # Loading is attempted once, at require time, but a missing or broken build
  # is not fatal then: the pure-Ruby parts (the pprof reader, `fathom report`,
  # option validation) work without it. Whatever needs the collector calls
  # NativeLoader.require!, which raises a LoadError that says how to fix it.
  module NativeLoader
    # Set by the ASan build (rake test:asan) to load an instrumented extension.
    PATH_ENV = "FATHOM_EXT_PATH"

    class << self
      def available?
        load_once
        @error.nil?
      end

      # Raises a LoadError explaining how to build the extension unless it loaded.
      def require!
        return true if available?

        hint = precompiled_gem? ? "" : "; build it with `rake compile` (or reinstall the gem)"
        raise LoadError, "fathom: the native extension is not available (#{@error.message})#{hint}"
      end

      private

      def load_once
        return if @attempted

        @attempted = true
        path = ENV[PATH_ENV]
        if path && !path.empty?
          require File.expand_path(path)
        else
          require_for_this_ruby
        end
        @error = nil
      rescue LoadError => e
        @error = e
      end

      # A checkout builds one extension per Ruby version into
      # lib/fathom/<X.Y>/ (rake compile), so that switching Rubies never loads
      # an extension linked against another libruby, and the precompiled gem
      # holds one there per Ruby it was built for; the source gem has its
      # build at lib/fathom/fathom_ext.so.
      def require_for_this_ruby
        versioned = File.join(__dir__, RUBY_VERSION[/\A\d+\.\d+/], "fathom_ext")
        # File.exist?, not Dir.glob: a checkout under a path with glob
        # characters ("[", "{") would not find its own build.
        if %w[so bundle dll].any? { |ext| File.exist?("#{versioned}.#{ext}") }
          require versioned
        elsif precompiled_gem?
          raise LoadError, "this precompiled gem holds the extension for Ruby #{prebuilt_rubies.join(', ')}, " \
                           "not #{RUBY_VERSION}: install the source gem " \
                           "(gem install fathom-profiler --platform ruby; Bundler: force_ruby_platform)"
        else
          require "fathom/fathom_ext"
        end
      end

      # The precompiled gem ships no ext/ (rake gem:native); a checkout and
      # the source gem do.
      def precompiled_gem?
        !File.exist?(File.expand_path("../../ext/fathom/extconf.rb", __dir__)) && !prebuilt_rubies.empty?
      end

      def prebuilt_rubies
        Dir.children(__dir__).select { |d| d.match?(/\A\d+\.\d+\z/) }.sort_by { |v| Gem::Version.new(v) }
      end
    end
  end
end

Fathom::NativeLoader.available?
