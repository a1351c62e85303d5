# frozen_string_literal: true

require_relative "frames"
require_relative "units"
require_relative "arguments"
require_relative "../options"
require_relative "../version"

module Fathom
  module Report
    # A flame graph of a profile as one self-contained HTML file
    # (`fathom report FILE --format html -o flame.html`): the data and a
    # small renderer inline, nothing fetched (its Content-Security-Policy
    # allows no network at all), for a browser on a machine without Go.
    #
    # The graph is pprof's and speedscope's: one node per function along
    # each stack, root at the top, width the node's total value; a click
    # zooms to a node, the search box marks the nodes whose name or file
    # matches and says what share they hold, and the select box switches
    # between the profile's value types (in-use and allocated bytes and
    # objects of a heap profile). Hovering shows a node's file and lines,
    # self and total.
    #
    # Why a renderer of our own (IMPLEMENTATION.md, "Reports in the
    # terminal and in the browser"): d3-flame-graph, the maintained library
    # that fits, needs d3 (about 300 kB minified with it) in every file, and
    # speedscope loads profiles by URL or file picker, not inline; this one
    # is about 250 lines and draws what the tests assert on as DOM text.
    #
    # Values are kept for nodes down to MIN_SHARE of the total; smaller
    # ones are summed into their parent's self value, so the file stays
    # small for any profile (at most MAX_NODES nodes).
    class FlameHtml
      MIN_SHARE = 0.0005
      MAX_NODES = 50_000
      # Types not worth a graph of their own (the counts behind estimates).
      SKIPPED_TYPES = %w[alloc_samples inuse_samples].freeze

      # profile: a decoded (and filtered) Pprof::Profile. title: what the
      # page says it shows (the file's name).
      def initialize(profile, title:, sample_index: nil, notes: [])
        Report.check_profile!(profile)
        @profile = profile
        @title = title.to_s
        @notes = Array(notes)
        index = SampleIndex.resolve(profile, sample_index)
        others = profile.sample_types.each_index.reject { |i| i == index || SKIPPED_TYPES.include?(profile.sample_types[i][0]) }
        @types = [index, *others]
      end

      def to_s
        require "json" # here, not at load (lib/fathom/files/stdlib.rb)
        data = JSON.generate(tree).gsub("<", "\\u003c").gsub(">", "\\u003e").gsub("&", "\\u0026")
        HTML.gsub("%TITLE%") { escape(@title) }.sub("%DATA%") { data }.sub("%SCRIPT%") { SCRIPT }.sub("%STYLE%") { STYLE }
      end

      private

      def escape(text)
        text.gsub("&", "&amp;").gsub("<", "&lt;").gsub(">", "&gt;").gsub('"', "&quot;")
      end

      # {title, types: [[name, unit]], names: [...], files: [...], root:
      # node} where a node is [name index, file index, [total per type],
      # [self per type], [children...]].
      def tree
        frames = Frames.new(@profile)
        root = new_node("(all)", "")
        @profile.samples.each do |s|
          values = @types.map { |i| s.values[i] }
          next if values.all?(&:zero?)

          node = root
          add(node, values, false)
          frames.stack(s).reverse_each do |f|
            key = [f.name, f.ruby? ? f.file : ""]
            node = node[:children][key] ||= new_node(f.name, f.ruby? ? f.file : "")
            node[:lines][f.line] = true if f.ruby? && f.line.positive?
            add(node, values, false)
          end
          add(node, values, true)
        end
        totals = root[:total]
        names = {}
        files = {}
        count = 0
        encode = lambda do |n|
          count += 1
          kids = n[:children].values.select { |c| big?(c, totals) && count < MAX_NODES }
          dropped = n[:children].values - kids
          self_values = n[:self].dup
          dropped.each { |c| c[:total].each_with_index { |v, i| self_values[i] += v } }
          [names[n[:name]] ||= names.size, files[n[:file]] ||= files.size, n[:total], self_values,
           n[:lines].keys.sort.first(20), kids.sort_by { |c| [-c[:total][0].abs, c[:name]] }.map(&encode)]
        end
        encoded = encode.call(root)
        { title: @title, fathom: VERSION, notes: @notes,
          types: @types.map { |i| @profile.sample_types[i] }, names: names.keys, files: files.keys, root: encoded }
      end

      def new_node(name, file)
        { name: name, file: file, total: Array.new(@types.size, 0), self: Array.new(@types.size, 0), children: {},
          lines: {} }
      end

      def add(node, values, self_value)
        target = self_value ? node[:self] : node[:total]
        values.each_with_index { |v, i| target[i] += v }
      end

      # Whether a node is kept: at least MIN_SHARE of the total in some type.
      def big?(node, totals)
        node[:total].each_with_index.any? { |v, i| !totals[i].zero? && v.abs >= totals[i].abs * MIN_SHARE }
      end

      STYLE = <<~'CSS'
        body { font: 13px -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0; color: #222; }
        header { padding: 8px 12px; background: #f4f4f4; border-bottom: 1px solid #ddd; display: flex; gap: 12px; align-items: center; flex-wrap: wrap; }
        header h1 { font-size: 15px; margin: 0; font-weight: 600; }
        #summary { color: #555; }
        #notes { padding: 4px 12px; color: #8a4b00; }
        #crumbs { padding: 6px 12px; color: #333; }
        #crumbs button { margin-right: 4px; }
        #graph { position: relative; margin: 0 12px 12px 12px; }
        .node { position: absolute; height: 17px; line-height: 17px; overflow: hidden; white-space: nowrap;
                font-size: 12px; padding: 0 3px; box-sizing: border-box; border-right: 1px solid #fff;
                border-bottom: 1px solid #fff; cursor: pointer; }
        .node.match { background: #e040fb !important; color: #fff; }
        .node:hover { filter: brightness(0.9); }
        #details { position: sticky; bottom: 0; background: #fffbe6; border-top: 1px solid #ddd; padding: 6px 12px;
                   min-height: 18px; white-space: pre-wrap; }
      CSS

      SCRIPT = <<~'JS'
        (function () {
          'use strict';
          var data = JSON.parse(document.getElementById('fathom-data').textContent);
          var names = data.names, files = data.files;
          var type = 0, zoom = [], query = null;
          var graph = document.getElementById('graph');
          var details = document.getElementById('details');
          var ROW = 18;

          function name(n) { return names[n[0]]; }
          function file(n) { return files[n[1]]; }
          function total(n) { return n[2][type]; }
          function self(n) { return n[3][type]; }
          function unit() { return data.types[type][1]; }

          function fmt(v) {
            var u = unit().toLowerCase(), scaled = v, suffix = '';
            var steps = null;
            if (/^(bytes?|b)$/.test(u)) steps = [['B', 1], ['kB', 1024], ['MB', 1048576], ['GB', 1073741824]];
            else if (/^nanoseconds?$/.test(u)) steps = [['ns', 1], ['us', 1e3], ['ms', 1e6], ['s', 1e9]];
            if (steps) {
              var step = steps[0];
              for (var i = 0; i < steps.length; i++) if (Math.abs(v) >= steps[i][1]) step = steps[i];
              scaled = v / step[1]; suffix = step[0];
            }
            var text = (Math.round(scaled * 100) / 100).toString();
            return text + suffix;
          }
          function pct(v, of) { return of === 0 ? '0%' : (100 * v / of).toFixed(2) + '%'; }

          function color(n) {
            var f = file(n), s = name(n), h = 0;
            for (var i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) >>> 0;
            if (!f) return 'hsl(' + (200 + h % 40) + ',35%,' + (72 + h % 10) + '%)';       // C, GC, retention
            if (/\/gems\//.test(f)) return 'hsl(' + (30 + h % 25) + ',80%,' + (62 + h % 12) + '%)';
            if (/\/lib\/ruby\/\d/.test(f)) return 'hsl(' + (50 + h % 15) + ',70%,' + (60 + h % 12) + '%)';
            return 'hsl(' + (h % 20) + ',75%,' + (62 + h % 12) + '%)';                       // the app
          }

          function matches(n) {
            return query !== null && (query.test(name(n)) || query.test(file(n)));
          }

          function describe(n) {
            var root = zoom.length ? zoom[zoom.length - 1] : data.root;
            var lines = n[4].length ? ':' + n[4].join(',') : '';
            var where = file(n) ? '\n' + file(n) + lines : '';
            return name(n) + where + '\ntotal ' + fmt(total(n)) + ' (' + pct(total(n), total(data.root)) + ' of all, ' +
              pct(total(n), total(root)) + ' of the view), self ' + fmt(self(n));
          }

          function draw() {
            while (graph.firstChild) graph.removeChild(graph.firstChild);
            var root = zoom.length ? zoom[zoom.length - 1] : data.root;
            var width = graph.clientWidth || 1000;
            var depth = 0, matched = 0;
            var rootTotal = total(root);
            function place(n, x, w, level) {
              if (w < 0.5 || total(n) === 0) return;
              depth = Math.max(depth, level);
              var div = document.createElement('div');
              div.className = 'node' + (matches(n) ? ' match' : '');
              div.style.left = x + 'px';
              div.style.top = (level * ROW) + 'px';
              div.style.width = w + 'px';
              div.style.background = color(n);
              if (w > 28) div.textContent = name(n);
              div.title = describe(n);
              div.addEventListener('click', function () { zoomTo(n); });
              div.addEventListener('mouseenter', function () { details.textContent = describe(n); });
              graph.appendChild(div);
              var offset = x;
              var sum = Math.abs(total(n)) || 1;
              n[5].forEach(function (c) {
                var cw = w * Math.abs(total(c)) / sum;
                place(c, offset, cw, level + 1);
                offset += cw;
              });
            }
            function countMatches(n, inside) {
              var hit = !inside && matches(n);
              if (hit) matched += total(n);
              n[5].forEach(function (c) { countMatches(c, inside || hit); });
            }
            place(root, 0, width, 0);
            graph.style.height = ((depth + 1) * ROW + 4) + 'px';
            if (query !== null) {
              countMatches(root, false);
              document.getElementById('found').textContent = 'matched: ' + fmt(matched) + ' (' + pct(matched, rootTotal) + ')';
            } else {
              document.getElementById('found').textContent = '';
            }
            crumbs();
          }

          function crumbs() {
            var el = document.getElementById('crumbs');
            while (el.firstChild) el.removeChild(el.firstChild);
            if (!zoom.length) return;
            var reset = document.createElement('button');
            reset.textContent = 'Reset zoom';
            reset.addEventListener('click', function () { zoom = []; draw(); });
            el.appendChild(reset);
            el.appendChild(document.createTextNode(' ' + zoom.map(name).join(' \u2192 ')));
          }

          function zoomTo(n) {
            if (n === data.root) zoom = [];
            else {
              var at = zoom.indexOf(n);
              zoom = at >= 0 ? zoom.slice(0, at + 1) : zoom.concat([n]);
            }
            draw();
          }

          var select = document.getElementById('type');
          data.types.forEach(function (t, i) {
            var o = document.createElement('option');
            o.value = i;
            o.textContent = t[0];
            select.appendChild(o);
          });
          select.addEventListener('change', function () { type = Number(select.value); draw(); summary(); });
          document.getElementById('search').addEventListener('input', function (e) {
            var text = e.target.value;
            try { query = text ? new RegExp(text) : null; } catch (err) { query = null; }
            draw();
          });
          function summary() {
            document.getElementById('summary').textContent =
              data.types[type][0] + ': ' + fmt(total(data.root)) + ' total';
          }
          if (data.notes.length) document.getElementById('notes').textContent = data.notes.join('\n');
          window.addEventListener('resize', draw);
          summary();
          draw();
        })();
      JS

      HTML = <<~'HTML'
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'">
        <title>%TITLE% - Fathom flame graph</title>
        <style>%STYLE%</style>
        </head>
        <body>
        <header>
        <h1>%TITLE%</h1>
        <label>values <select id="type"></select></label>
        <span id="summary"></span>
        <input id="search" type="search" placeholder="search (regexp)" size="28">
        <span id="found"></span>
        </header>
        <div id="notes"></div>
        <div id="crumbs"></div>
        <div id="graph"></div>
        <div id="details">Hover a frame for its file, lines and values; click to zoom.</div>
        <script type="application/json" id="fathom-data">%DATA%</script>
        <script>%SCRIPT%</script>
        </body>
        </html>
      HTML
    end
  end
end
