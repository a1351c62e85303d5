# frozen_string_literal: true

# A hand-built heap profile of a small importer whose files are known, for
# the report tests (rows, filters, --method): the leak is String#* (a C
# method) called from Importer#run at app.rb:12; CSV parsing in the
# standard library, a gem's frame, a C method under <internal:numeric>,
# and two threads.
module ImporterProfile
  GEMS = "/srv/app/vendor/bundle/ruby/3.1.0/gems"
  STDLIB = "/usr/lib/ruby/3.1.0"
  LEAK_LINE = 12
  SOURCE = (1..30).map do |i|
    case i
    when 11 then "def run(rows)\n"
    when 12 then "  CACHE[key] = JSON.generate(rows) * 20\n"
    when 13 then "  parse(rows)\n"
    when 14 then "end\n"
    else "  line #{i}\n"
    end
  end.join

  module_function

  # Writes the app's source into dir; returns its path.
  def write_source(dir)
    path = File.join(dir, "app.rb")
    File.write(path, SOURCE)
    path
  end

  # Values: [alloc_objects, alloc_space, inuse_objects, inuse_space].
  def text_profile(app)
    t = TextProfile.new
    t.files.merge!("String#*" => ["<cfunc>", 0], "Importer#run" => [app, LEAK_LINE], "<main>" => [app, 30],
                   "CSV::Parser#parse" => ["#{STDLIB}/csv/parser.rb", 876], "String#split" => ["<cfunc>", 0],
                   "Integer#times" => ["<internal:numeric>", 237],
                   "ActiveSupport::Inflector#camelize" => ["#{GEMS}/activesupport-7.2.2/lib/active_support/inflector/methods.rb", 70],
                   "Order.new" => ["<cfunc>", 0], "Importer#parse" => [app, 20])
    t.sample(["String#*", "Importer#run", "<main>"], [30, 3_000_000, 30, 3_000_000], { "class" => "String", "thread" => "main" })
    t.sample(["String#split", "CSV::Parser#parse", "Importer#parse", "Importer#run", "<main>"], [400, 16_000, 300, 12_000],
             { "class" => "String", "thread" => "main" })
    t.sample(["Order.new", "Integer#times", "Importer#parse", "Importer#run", "<main>"], [100, 8_000, 100, 8_000],
             { "class" => "Order", "thread" => "worker" })
    t.sample(["ActiveSupport::Inflector#camelize", "Importer#parse", "Importer#run", "<main>"], [5, 500, 0, 0],
             { "class" => "String", "thread" => "main" })
    t.default_sample_type = "inuse_space"
    t
  end
end
