# frozen_string_literal: true

require_relative "report/gems"

module Fathom
  # Which library defines each namespace of the program, for a retention
  # profile's "--by gem": `fathom report retained.pb.gz --by gem` charges
  # each object to the library whose constant holds it (the deepest
  # constant on its reference chain: `ActiveSupport::Inflector::
  # Inflections` -> activesupport), as derailed's `bundle:mem` answers
  # "which gem holds my boot memory". A profile names constants, not
  # files, and is read anywhere: so the snapshot writes, as comments, the
  # library of every named module where it differs from its namespace's
  #
  #   fathom.constants activesupport: ActiveSupport Object::Foo
  #   fathom.constants app: Shop LeakFixture
  #
  # (`Report::Gems` names the library from the file of the module's first
  # definition, `Module#const_source_location`; one Ruby's prelude set up at
  # boot has no source line and counts as defined in C). A module defined in C
  # (String, Zlib; a C extension's classes under its Ruby namespace) has
  # no file: under a namespace it takes the namespace's library, at the top
  # level it is "ruby (core)". Module and class names are code, not data:
  # nothing of the program's strings goes into the comments.
  module ConstantSources
    COMMENT = "fathom.constants"
    CORE = Report::Gems::CORE
    # Namespaces no object's holder is charged to: everything is under them.
    ROOTS = %w[Object BasicObject Kernel].freeze

    module_function

    # The comment lines, one per library.
    def comments
      by_gem = Hash.new { |h, k| h[k] = [] }
      table.each { |name, gem| by_gem[gem] << name }
      by_gem.sort_by(&:first).map { |gem, names| "#{COMMENT} #{gem}: #{names.sort.join(" ")}" }
    end

    # A retention snapshot's stamp (see ProcessComments.stamp: [lines,
    # default sample type], or nil) with the comments added before its
    # lines: who wrote the profile (pid, hostname, Ruby) stays last, next
    # to the window the encoder appends, as in every other stamped profile.
    def stamp(stamp)
      lines, default = stamp
      [[*comments, *Array(lines)], default]
    rescue StandardError
      stamp # never fail a snapshot over its library names
    end

    # {module name => library} for each named module whose library differs
    # from its namespace's (the top level's is nil).
    def table
      name_of = Module.instance_method(:name)
      names = []
      ObjectSpace.each_object(Module) do |mod|
        name = name_of.bind_call(mod)
        names << name if String === name && !name.start_with?("#<") && !ROOTS.include?(name)
      end
      gems = {}
      out = {}
      # String keys, never Arrays: Array#<=> is a method call, at whose
      # interrupt check another thread may run GC.compact while qsort holds
      # copies of the keys (Ruby 3.1 then crashed in rb_ary_cmp on a moved
      # key: test/crash/gc_and_retention_test.rb). Strings compare in C.
      # "%04d" keeps the depth's numeric order; names then compare bytewise.
      names.uniq.sort_by { |n| format("%04d %s", n.count(":"), n) }.each do |name|
        parent = name.rpartition("::").first
        parent_gem = lookup(gems, parent)
        gem = library(name) || parent_gem || CORE
        gems[name] = gem
        out[name] = gem if gem != parent_gem
      end
      out
    end

    # The library of the file that first defined `name`, or nil (defined
    # in C, or not resolvable).
    def library(name)
      file, line = Object.const_source_location(name)
      # Line 0 is no source line: what Ruby's prelude registered at boot
      # (["ruby", 0], ["<main>", 0], the executable's path: Gem, Process,
      # DidYouMean, Complex).
      String === file && !file.empty? && line.to_i.positive? ? Report::Gems.of(file) : nil
    rescue StandardError, ScriptError
      nil
    end

    # {module name => library} read back from a profile's comments.
    def parse(comments)
      table = {}
      Array(comments).each do |c|
        next unless c.start_with?("#{COMMENT} ")

        gem, names = c.delete_prefix("#{COMMENT} ").split(": ", 2)
        names.to_s.split(" ").each { |n| table[n] = gem }
      end
      table
    end

    # The library of a constant path in a parsed table: the nearest
    # namespace that has one, else nil.
    def lookup(table, path)
      until path.empty?
        return table[path] if table.key?(path)

        path = path.rpartition("::").first
      end
      nil
    end
  end
end
