# frozen_string_literal: true

require "test_helper"
require "fathom/autorun"

class OutputPathsTest < Minitest::Test
  P = Fathom::Files::OutputPaths

  def test_one_mode_uses_the_path_or_its_default
    assert_equal({ heap: File.expand_path("h.pb.gz") }, P.for_modes("h.pb.gz", [:heap]))
    assert_equal({ gc: File.expand_path("fathom-gc.pb.gz") }, P.for_modes(nil, [:gc]))
    assert_equal({ gc: File.expand_path("fathom-gc.json.gz") }, P.for_modes(nil, ["gc"], format: :firefox))
  end

  def test_several_modes_insert_the_mode_before_the_extension
    assert_equal({ heap: "/t/run.heap.pb.gz", gc: "/t/run.gc.pb.gz" }, P.for_modes("/t/run.pb.gz", %i[heap gc]))
    assert_equal({ gc: "/t/run.gc.json.gz", retention: "/t/run.retention.pb.gz" },
                 P.for_modes("/t/run", %i[gc retention], format: :firefox))
    assert_equal({ heap: File.expand_path("fathom-heap.pb.gz"), gc: File.expand_path("fathom-gc.pb.gz") },
                 P.for_modes(nil, %i[heap gc]))
  end

  def test_firefox_with_several_of_cpu_gc_heap_writes_one_file
    assert_equal({ cpu: "/t/app.json.gz", gc: "/t/app.json.gz", heap: "/t/app.json.gz" },
                 P.for_modes("/t/app.json.gz", %i[cpu gc heap], format: :firefox))
    assert_equal({ wall: "/t/run.json.gz", heap: "/t/run.json.gz", retention: "/t/run.retention.pb.gz" },
                 P.for_modes("/t/run", %i[wall heap retention], format: :firefox))
    assert_equal({ gc: File.expand_path("fathom-gc-heap.json.gz"), heap: File.expand_path("fathom-gc-heap.json.gz") },
                 P.for_modes(nil, %i[gc heap], format: :firefox))
    assert_equal %i[cpu gc], P.combined_modes(%i[cpu gc retention], :firefox)
    assert_empty P.combined_modes(%i[cpu gc heap], :pprof)
    assert_empty P.combined_modes(%i[gc retention], :firefox)
  end

  def test_forked_children_keep_the_extension
    assert_equal "/x/gc.42.json.gz", P.with_pid("/x/gc.json.gz", 42)
  end
end
