# frozen_string_literal: true

module Fathom
  # What this Ruby is, read in one place. The guards that refuse what a
  # Ruby would get wrong (RubyGuards) ask here and never read RUBY_VERSION
  # or GC themselves, so that their tests can fake a Ruby the project
  # cannot run (Ruby 4.0 cannot be built on its machines): a test stubs
  # these methods and the guard's own logic runs (unit/ruby_guards_test.rb).
  module RubyVersion
    module_function

    def current
      Gem::Version.new(RUBY_VERSION)
    end

    def at_least?(version)
      current >= Gem::Version.new(version)
    end

    # Whether ObjectSpace._id2ref exists (Ruby 4.1 removes it, Feature
    # #22135). True on 4.0, where it is deprecated: ask at_least?("4.0").
    def id2ref_defined?
      ObjectSpace.respond_to?(:_id2ref, true)
    end

    # The GC this Ruby runs: "default", or the name of the library
    # RUBY_GC_LIBRARY loaded (Ruby 3.4+ built with --with-modular-gc;
    # GC.config[:implementation]). Before 3.4 there is only the default.
    def gc_implementation
      return "default" unless GC.respond_to?(:config)

      name = GC.config[:implementation]
      name.nil? ? "default" : name.to_s
    end

    # The keys GC.stat and GC.latest_gc_info have on this Ruby (each call
    # allocates one Hash).
    def gc_stat_keys
      GC.stat.keys
    end

    def latest_gc_info_keys
      GC.latest_gc_info.keys
    end
  end
end
