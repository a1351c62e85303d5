# frozen_string_literal: true

module Fathom
  module Leaks
    # What holds a growing site's objects: the heap profiler knows which of
    # the site's sampled objects are still alive (their liveness tokens:
    # HeapProfiler#live_objects), a retention snapshot knows every object's
    # dominator path; this asks the snapshot for the paths of those objects
    # and groups them. A forked snapshot by default: the app pauses for
    # fork() only (docs/internals/retention.md, "Forked snapshots").
    #
    # A holder record (what the endpoint serves, and what every later heap
    # window carries as a "fathom.leaks.holders" comment):
    #
    #   {"site" => "Cart#add app/models/cart.rb:42", "label" => "app/models/cart.rb:42",
    #    "time" => 1764000000, "objects" => 80, "unreachable" => 0,
    #    "paths" => [{"path" => ["Cart::CACHE (Hash)", "$hashval (Cart)"], "objects" => 76}, ...]}
    #
    # "path" is the dominator path without its root category and without
    # the object itself (its own slot name: "[3]" or "[10+]" differ from
    # object to object), so the objects of one holder share one path.
    module Holders
      # Objects followed per site: the share of the biggest holder is then
      # known within a few percent, and the snapshot's focus list stays small.
      PER_SITE = 100
      LIVE_LIMIT = 1_000_000
      ROOT_FRAME = /\A\(root: [^)]*\)\z/.freeze

      # One holder of a summary: its chain for people, its share of the
      # site's followed objects that are reachable.
      Holder = Struct.new(:path, :chain, :objects, :share, keyword_init: true)
      Summary = Struct.new(:holders, :objects, :unreachable, :time, keyword_init: true) do
        def top
          holders.first
        end
      end

      module_function

      # Takes a snapshot that follows up to `per_site` live sampled objects
      # of each site and returns a holder record per site. sites: [[key,
      # file, line], ...] (a site is its innermost Ruby line: file as the
      # profile names it, in full). heap_profiler: the running HeapProfiler.
      # gc: a full GC first (default in exact mode, whose records of dead
      # objects wait for the sweep). Other options go to the snapshot.
      def explain(heap_profiler, sites, per_site: PER_SITE, gc: nil, fork: true, **snapshot)
        require_relative "../retention"
        gc = heap_profiler.exact if gc.nil?
        GC.start if gc
        picked = pick(heap_profiler, sites, per_site)
        focus = picked.flat_map(&:last)
        # Only the focus list may hold the objects during the snapshot (it
        # is no retainer): the per-site lists would show up as one.
        counts = picked.map { |site, objects| [site, objects.size].tap { objects.clear } }
        return counts.map { |s, _| record(s, []) } if focus.empty?

        profile = Retention.snapshot(focus: focus, fork: fork, progress: nil, **snapshot)
        paths = profile.stats[:focus_paths] || []
        focus.clear
        offset = 0
        counts.map do |site, n|
          mine = paths[offset, n] || []
          offset += n
          record(site, mine)
        end
      end

      # [[site, [objects]], ...]: the live sampled objects of each site,
      # spread over all of them when there are more than per_site.
      # HeapProfiler#live_objects names a site "Foo#bar /app/foo.rb:12"
      # ("String#* ← " before it when a C method allocated): it ends with
      # the site's " file:line".
      def pick(heap_profiler, sites, per_site)
        wanted = sites.map { |s| [" #{s[1]}:#{s[2]}", s] }
        found = Hash.new { |h, k| h[k] = [] }
        live = heap_profiler.live_objects(limit: LIVE_LIMIT)
        live.each do |site_text, object|
          _, site = wanted.find { |tail, _| site_text.end_with?(tail) }
          found[site] << object if site
        end
        # The intermediate arrays must not stay in
        # a C stack slot and show up as a second holder.
        live.each(&:clear).clear
        sites.map do |s|
          all = found[s]
          step = [all.size.fdiv(per_site), 1.0].max
          chosen = (0...[all.size, per_site].min).map { |i| all[(i * step).floor] }
          all.clear
          [s, chosen]
        end
      end

      # The objects' holder paths grouped by their outermost holder (the
      # first frame: a constant, a global, a thread), each group named by
      # the frames all its objects share: the strings of a struct and the
      # struct itself, both under $registry, are one holder, "$registry
      # (Array)", not two.
      def record(site, paths)
        key, = site
        reachable = paths.compact.map { |p| holder_path(p) }
        groups = reachable.group_by(&:first).map { |_, list| [common_prefix(list), list.size] }
        groups.sort_by! { |path, n| [-n, path] }
        { "site" => key, "time" => Time.now.to_i, "objects" => paths.size,
          "unreachable" => paths.size - reachable.size,
          "paths" => groups.first(5).map { |path, n| { "path" => path, "objects" => n } } }
      end

      def common_prefix(paths)
        first = paths.first
        n = first.size
        paths.each { |p| n = [n, p.size].min.downto(0).find { |i| p.first(i) == first.first(i) } }
        first.first(n)
      end

      # The frames that hold an object: its dominator path without the root
      # category and without the object's own frame.
      def holder_path(frames)
        frames = frames.dup
        frames.shift while frames.first&.match?(ROOT_FRAME)
        frames.pop
        frames
      end

      # A record for people: each path as a chain with its share of the
      # reachable objects followed; nil for no record.
      def summary(record)
        return nil unless Hash === record && Array === record["paths"]

        reachable = record["objects"].to_i - record["unreachable"].to_i
        holders = record["paths"].filter_map do |p|
          next unless Hash === p && Array === p["path"]

          n = p["objects"].to_i
          Holder.new(path: p["path"].map(&:to_s), chain: chain(p["path"].map(&:to_s)), objects: n,
                     share: reachable.positive? ? n.fdiv(reachable) : 0.0)
        end
        Summary.new(holders: holders, objects: record["objects"].to_i, unreachable: record["unreachable"].to_i,
                    time: record["time"])
      end

      # "Cart::CACHE (Hash) → $hashval (Cart)": a frame that lists the hops
      # from its dominator (vm → Object → Cart → Cart::CACHE (Hash)) keeps
      # its last hop, which names it.
      def chain(path)
        return "(a root itself)" if path.empty?

        path.map { |frame| frame.split(" \u2192 ").last }.join(" \u2192 ")
      end
    end
  end
end
