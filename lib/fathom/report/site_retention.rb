# frozen_string_literal: true

module Fathom
  module Report
    # Why the heap profile's top allocation sites are still alive
    # (Fathom::Retention.explain_sites):
    #
    #   Why the top live allocation sites are still alive (retention paths of sampled objects):
    #   String#* ← LeakFixture::Session#initialize leak_fixture.rb:13 (2100 live samples)
    #     3× vm → Object → … → LeakFixture::Registry::SESSIONS (Hash) → $hashval (LeakFixture::Session) → @payload (String)
    class SiteRetention
      def initialize(sites)
        @sites = sites
      end

      def to_s
        out = +"Why the top live allocation sites are still alive (retention paths of sampled objects):\n"
        @sites.each do |s|
          out << "#{s[:site]} (#{s[:live_samples]} live samples)\n"
          s[:paths].each { |path, count| out << "  #{count}× #{path.join(" → ")}\n" }
        end
        out
      end
    end
  end
end
