# frozen_string_literal: true

require "open3"
require "tmpdir"

# Reads a profile through `go tool pprof -raw -symbolize=none`, the reference
# reader, and answers questions about it: totals per sample type and, per
# function name, the flat and cumulative values (cum counted once per sample
# even when a function recurses), plus per-label totals.
class PprofRaw
  Sample = Struct.new(:values, :functions, :labels) # functions: leaf first

  attr_reader :sample_types, :samples, :output, :default_type

  def self.go_available?
    system("go version", out: File::NULL, err: File::NULL)
  end

  def self.read(path)
    env = { "HOME" => Dir.tmpdir, "GOCACHE" => File.join(Dir.tmpdir, "fathom-gocache"), "GOPATH" => File.join(Dir.tmpdir, "fathom-gopath") }
    out, err, status = Open3.capture3(env, "go", "tool", "pprof", "-raw", "-symbolize=none", path)
    raise "go tool pprof -raw failed on #{path}: #{err}" unless status.success?
    new(out)
  end

  def initialize(text)
    @output = text
    parse(text)
  end

  def index_of(type)
    @sample_types.index(type) or raise ArgumentError, "no sample type #{type} in #{@sample_types}"
  end

  def total(type)
    i = index_of(type)
    @samples.sum { |s| s.values[i] }
  end

  # Sum of `type` over samples whose stack contains a function matching
  # `name` (String or Regexp), optionally only samples with these labels.
  def cum(type, name, labels: {})
    i = index_of(type)
    @samples.sum do |s|
      next 0 unless labels.all? { |k, v| v === s.labels[k] }

      s.functions.any? { |f| name === f } ? s.values[i] : 0
    end
  end

  def flat(type, name)
    i = index_of(type)
    @samples.sum { |s| name === s.functions.first ? s.values[i] : 0 }
  end

  # Sum of `type` over the samples with these labels ("thread name" => ...).
  def sum(type, labels = {})
    i = index_of(type)
    @samples.sum { |s| labels.all? { |k, v| v === s.labels[k] } ? s.values[i] : 0 }
  end

  def by_label(type, key)
    i = index_of(type)
    @samples.each_with_object(Hash.new(0)) { |s, h| h[s.labels[key]] += s.values[i] }
  end

  def function_names
    @samples.flat_map(&:functions).uniq
  end

  # The functions whose cumulative share of `type` is above `fraction`:
  # what pprof's views show at least, since by default they drop nodes at
  # or below 0.5% (-nodefraction=0.005).
  def functions_above(fraction, type = default_type)
    floor = fraction * total(type)
    function_names.select { |f| cum(type, f) > floor }
  end

  private

  def parse(text)
    lines = text.lines.map(&:chomp)
    start = lines.index("Samples:") or raise "no Samples: section in pprof -raw output"
    header = lines[start + 1].split
    @sample_types = header.map { |t| t.split("/").first }
    # The type pprof shows unless told otherwise: the one -raw marks "[dflt]"
    # (Profile.default_sample_type), else the last.
    @default_type = (header.find { |t| t.end_with?("[dflt]") } || header.last).split("/").first
    locations = {}
    loc_start = lines.index("Locations")
    (loc_start + 1...lines.size).each do |k|
      line = lines[k]
      break if line.start_with?("Mappings")
      # "     2: 0x0 M=1 Foo#bar /path/foo.rb:12 s=10" (M= names the mapping)
      if (m = line.match(/^\s*(\d+): 0x\h+ (?:M=\d+ )?(.*?) \S*:\d+ s=\d+/))
        @current_loc = (locations[m[1].to_i] = [m[2]])
      elsif (m = line.match(/^\s+(.*?) \S*:\d+ s=\d+/)) && @current_loc
        @current_loc << m[1] # inlined lines (not produced by Fathom, but legal)
      end
    end
    @samples = []
    k = start + 2
    while k < loc_start
      line = lines[k]
      if (m = line.match(/^\s*([-\d\s]+): ([\d\s]*)$/))
        values = m[1].split.map(&:to_i)
        funcs = m[2].split.map { |id| locations.fetch(id.to_i).first }
        @samples << Sample.new(values, funcs, {})
      elsif line =~ /^\s+\S.*:\[/ && @samples.last
        # "                class:[String] thread:[main]"
        line.scan(/(\w[\w ]*):\[([^\]]*)\]/) { |k, v| @samples.last.labels[k] = v }
      end
      k += 1
    end
  end
end
