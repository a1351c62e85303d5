# frozen_string_literal: true

module Fathom
  module Leaks
    # The process's memory beside each heap window, so that `fathom leaks`
    # can tell a Ruby leak from growth outside Ruby objects from the files
    # alone. Every heap profile the always-on flusher writes (and the Rack
    # heap endpoint serves) carries one comment line:
    #
    #   fathom.memory rss=412516352 ruby_heap=78643200 ruby_pages=1200 ruby_live_slots=1502331
    #     ruby_free_slots=458112 malloc_in_use=251657216 malloc_free=31457280 malloc_mmap=16777216
    #     malloc_arena=266338304 gc_major=12
    #
    # (one line; bytes except pages and slots): the resident set
    # (/proc/self/statm), Ruby's heap pages (GC.stat's heap_allocated_pages
    # times the page size) and slots, and glibc's mallinfo2 summed over its
    # arenas: in use (arenas and mmap'd chunks), free inside the arenas,
    # mmap'd chunks, and what the arenas hold from the system; and how many
    # major GCs Ruby has run (GC.stat's major_gc_count: until one runs,
    # objects of the old generation that died are still counted in use).
    # A value the platform does not give is left out (no mallinfo2 off
    # glibc).
    # `go tool pprof -comments` lists it.
    module Memory
      COMMENT = "fathom.memory "
      FIELDS = %i[rss ruby_heap ruby_pages ruby_live_slots ruby_free_slots malloc_in_use malloc_free malloc_mmap
                  malloc_arena gc_major].freeze
      PAIR = /\A([a-z_]+)=(\d+)\z/.freeze

      module_function

      # The line for this moment (native extension loaded). Never raises:
      # a profile is worth more than its memory line.
      def line
        values = measure
        COMMENT + FIELDS.filter_map { |k| "#{k}=#{values[k]}" if values.key?(k) }.join(" ")
      rescue StandardError
        "#{COMMENT}unavailable"
      end

      # {field => Integer} for this moment.
      def measure
        native = defined?(Native) && Native.respond_to?(:process_memory) ? Native.process_memory : {}
        stat = GC.stat
        pages = stat[:heap_allocated_pages].to_i
        {
          rss: native[:rss],
          ruby_heap: pages * page_size,
          ruby_pages: pages,
          ruby_live_slots: stat[:heap_live_slots],
          ruby_free_slots: stat[:heap_free_slots],
          malloc_in_use: native[:malloc_in_use],
          malloc_free: native[:malloc_free],
          malloc_mmap: native[:malloc_mmap],
          malloc_arena: native[:malloc_arena],
          gc_major: stat[:major_gc_count],
        }.compact
      end

      def page_size
        @page_size ||= GC::INTERNAL_CONSTANTS[:HEAP_PAGE_SIZE] || 16_384
      end

      # The values of a profile's memory line ({field => Integer}), nil when
      # it has none (another writer, an older Fathom).
      def parse(comments)
        text = comments.find { |c| c.start_with?(COMMENT) } or return nil
        values = {}
        text.delete_prefix(COMMENT).split.each do |pair|
          m = PAIR.match(pair) or next
          key = m[1].to_sym
          values[key] = m[2].to_i if FIELDS.include?(key)
        end
        values.empty? ? nil : values
      end
    end
  end
end
