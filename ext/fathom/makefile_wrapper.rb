# frozen_string_literal: true

require "etc"
require "rbconfig"

module Fathom
  # What extconf.rb adds to mkmf's Makefile, so that `gem install` builds
  # the extension the way Fathom wants (docs/internals/versions.md,
  # "Building the extension"):
  #
  # - In parallel. RubyGems runs a plain `make` (no -j, in every version up
  #   to 3.6), which compiled our ~80 objects one after another. mkmf's
  #   Makefile becomes fathom.mk, and the Makefile that RubyGems runs calls
  #   it again with -j<CPUs>, unless a -j came from outside already
  #   (`rake compile` runs `make -jN`, or MAKEFLAGS=-j4): a sub-make given
  #   its own -j beside a jobserver would warn and ignore the jobserver.
  # - Installed once, and nothing else left. RubyGems copies what
  #   `make install` installed twice: into the gem's extension directory and
  #   into its lib/ (Gem.install_extension_in_lib). Our `install` puts the
  #   .so into the gem's lib/fathom/ only (lib/fathom/native.rb loads it
  #   from there), then removes the objects, which RubyGems before 3.4
  #   (Ruby 3.1's) leaves in ext/.
  # - Every object depends on every header: mkmf tracks no header
  #   dependencies, and a changed header would otherwise leave stale objects
  #   with another class layout linked together. A unity object
  #   (unity_sources.rb) also depends on the files it includes.
  # - The vendored simdjson compiles without warnings: it is not our code to
  #   fix, and the build log of our own code stays free of them.
  class MakefileWrapper
    INNER = "fathom.mk"

    # first: objects to start before the others (mkmf sorts $(OBJS) by
    # name, and the longest object started last runs alone at the end).
    # members: {unity object => the source files it includes}
    # (unity_sources.rb): mkmf only knows the unit's own .cc.
    def initialize(src:, headers:, first: [], members: {}, jobs: Etc.nprocessors)
      @src = src
      @headers = headers
      @first = first
      @members = members
      @jobs = jobs
    end

    def write
      File.open("Makefile", "a") do |mk|
        mk.puts
        mk.puts "FATHOM_HEADERS = #{@headers.join(' ')}"
        mk.puts "$(OBJS): $(FATHOM_HEADERS) Makefile #{INNER}"
        @members.each { |object, files| mk.puts "#{object}: #{files.join(' ')}" }
        mk.puts "simdjson.o: CXXFLAGS += -w"
      end
      File.rename("Makefile", INNER)
      File.write("Makefile", wrapper)
    end

    private

    # The gem's lib/fathom/, from ext/fathom/ of the unpacked gem (the source
    # directory RubyGems builds in).
    def gem_lib
      File.expand_path("../../lib/fathom", @src)
    end

    def wrapper
      <<~MAKE
        # Written by ext/fathom/extconf.rb (ext/fathom/makefile_wrapper.rb says
        # why): runs mkmf's Makefile, #{INNER}, in parallel, and installs the
        # extension once, into the gem's lib/fathom/.
        FATHOM_JOBS = $(if $(filter -j%,$(MAKEFLAGS)),,-j#{@jobs})
        FATHOM_LIB = #{gem_lib}
        FATHOM_SO = fathom_ext.#{RbConfig::CONFIG["DLEXT"]}

        all:
        \t+$(MAKE) -f #{INNER} $(FATHOM_JOBS) #{(@first + ["all"]).join(" ")}

        install: all
        \tmkdir -p $(FATHOM_LIB)
        \tcp fathom_ext.so $(FATHOM_LIB)/fathom_ext.so.tmp
        \tmv -f $(FATHOM_LIB)/fathom_ext.so.tmp $(FATHOM_LIB)/fathom_ext.so
        \t+$(MAKE) -f #{INNER} clean

        clean distclean realclean static:
        \t+$(MAKE) -f #{INNER} $@

        Makefile #{INNER}: ;

        .PHONY: all install clean distclean realclean static
      MAKE
    end
  end
end
