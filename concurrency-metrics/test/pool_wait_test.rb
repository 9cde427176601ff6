# frozen_string_literal: true

require_relative "test_helper"
require "open3"

# Debian's ActiveRecord (6.1): with ActiveRecord loaded the gem times the pool's checkout wait
# (ConnectionPool::Queue#wait_poll) — a wait that ends when a connection comes back, and one
# that times out — and nothing while a connection is free. In a child process: ActiveRecord
# stays out of the other tests (its presence switches the counter on).
class PoolWaitTest < Minitest::Test
  SCRIPT = <<~'RUBY'
    require "active_record"
    require "concurrency_metrics"
    class Totals
      attr_reader :waits
      def initialize = (@waits = [])
      def setup(_info) = nil
      def record(_sample) = nil
      def setup_totals(fields) = (@fields = fields)
      def add(field, seconds) = (@waits << [field, seconds])
      def fields = @fields
    end
    T = Totals.new
    ConcurrencyMetrics.configure { |c| c.backend = T }
    q = ActiveRecord::ConnectionAdapters::ConnectionPool::Queue.new
    q.add(:free)
    q.poll(1)                                   # free: no wait
    Thread.new { sleep 0.3; q.add(:back) }
    got = q.poll(5)                             # waits ~0.3 s for it
    begin
      q.poll(0.1)                               # times out after 0.1 s
    rescue ActiveRecord::ConnectionTimeoutError
      timed_out = true
    end
    puts [T.fields.inspect, got, timed_out, T.waits.map { |f, s| "#{f}:#{s.round(1)}" }.join(",")].join(" ")
  RUBY

  def test_active_record_checkout_waits_are_counted_and_free_checkouts_are_not
    out, err, st = Open3.capture3({ "RUBYLIB" => [LIB, NativeBuild.dir].join(":") }, RbConfig.ruby, "-e", SCRIPT)
    skip "ActiveRecord not installed" if err.include?("cannot load such file -- active_record")
    assert st.success?, err
    fields, got, timed_out, waits = out.split
    assert_equal "[:db_pool_wait]", fields
    assert_equal "back", got
    assert_equal "true", timed_out
    first, second = waits.split(",")
    assert_equal "db_pool_wait", first.split(":")[0]
    # A busy CI machine may run the waits late, never early.
    assert_operator Float(first.split(":")[1]), :>=, 0.2
    assert_operator Float(second.split(":")[1]), :>=, 0.1
    assert_equal 2, waits.split(",").size
  end
end
