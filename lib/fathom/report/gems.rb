# frozen_string_literal: true

module Fathom
  module Report
    # Which library a source file belongs to, from its path alone (a report
    # reads a profile anywhere, without the program's load path):
    #
    #   .../gems/activesupport-7.2.2/lib/active_support/...      activesupport   (RubyGems, Bundler's path)
    #   .../bundler/gems/rails-1a2b3c4d5e6f/activesupport/...   rails           (a Bundler git checkout)
    #   /usr/lib/ruby/3.1.0/csv/parser.rb                        csv (stdlib)    (Ruby's lib directory)
    #   /usr/lib/ruby/vendor_ruby/rake/task.rb                   rake            (Debian's packaged gems)
    #   .../lib/fathom/report/top.rb                             fathom          (the profiler itself)
    #   <internal:gem_prelude>                                   ruby (core)
    #   anything else                                            app
    #
    # A stdlib row names its library (the first part of the path under the
    # version directory), so `--by gem` tells `csv (stdlib)` from
    # `json (stdlib)`. Default gems Ruby installs as gems (Ruby 3.4's csv,
    # a bundled gem) have a gems/NAME-VERSION path and so their gem's name,
    # as memory_profiler names them.
    module Gems
      APP = "app"
      FATHOM = "fathom"
      CORE = "ruby (core)"
      # The last gems/NAME-VERSION/ of a path: Bundler's and RubyGems'
      # install directories (also Debian's rubygems-integration). A name
      # ends at the first "-" that a digit follows: net-http-0.4.1 is
      # net-http, sqlite3-1.7.3-x86_64-linux is sqlite3.
      GEM_DIR = %r{.*/gems/([^/]+?)-\d[^/]*/}.freeze
      # Bundler's git checkouts: bundler/gems/NAME-<commit>/.
      GIT_DIR = %r{.*/bundler/gems/([^/]+?)-\h{7,40}/}.freeze
      # Ruby's own library directory: lib/ruby/3.1.0/, with an optional
      # architecture directory (x86_64-linux-gnu/) for its C parts.
      STDLIB_DIR = %r{/lib/ruby/\d+\.\d+\.\d+/(?:[^/]*-linux[^/]*/)?([^/.]+)}.freeze
      VENDOR_DIR = %r{/lib/ruby/(?:vendor_ruby|site_ruby)/(?:\d+\.\d+\.\d+/)?(?:[^/]*-linux[^/]*/)?([^/.]+)}.freeze
      # Fathom run from a checkout (an installed Fathom is a gem like any).
      FATHOM_DIR = %r{/lib/fathom(?:/|\.rb\z)}.freeze

      module_function

      # The library of `path` (a frame's file name). Frames without a file
      # of their own (C methods, Ruby's <internal:...> files) are folded
      # into their Ruby caller before this is asked.
      def of(path)
        path = path.to_s
        # Ruby's own files: "<internal:gem_prelude>", or a wrapped path
        # ("<internal:/usr/lib/ruby/vendor_ruby/rubygems/core_ext/kernel_require.rb>").
        if path.start_with?("<internal:")
          inner = path.delete_prefix("<internal:").delete_suffix(">")
          return inner.include?("/") ? of(inner) : CORE
        end

        if (m = GIT_DIR.match(path)) then m[1]
        elsif (m = GEM_DIR.match(path)) then m[1]
        elsif (m = VENDOR_DIR.match(path)) then m[1]
        elsif (m = STDLIB_DIR.match(path)) then "#{m[1]} (stdlib)"
        elsif FATHOM_DIR.match?(path) then FATHOM
        else APP
        end
      end

      # A path as a report prints it: relative to the current directory
      # when it is under it, from the gem's directory for a gem
      # (activesupport-7.2.2/lib/...), from ruby/X.Y.Z/ for the standard
      # library; otherwise whole.
      def short_path(path, cwd = Dir.pwd)
        path = path.to_s
        prefix = cwd.end_with?("/") ? cwd : "#{cwd}/"
        return path.delete_prefix(prefix) if path.start_with?(prefix) && path.size > prefix.size

        if (m = %r{.*/(?:bundler/)?gems/([^/]+/.*)\z}.match(path)) then m[1]
        elsif (m = %r{/lib/(ruby/(?:vendor_ruby/|site_ruby/)?(?:\d+\.\d+\.\d+/)?.*)\z}.match(path)) then m[1]
        else path
        end
      end
    end
  end
end
