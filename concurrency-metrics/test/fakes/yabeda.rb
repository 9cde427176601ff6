# frozen_string_literal: true

# A stand-in for yabeda (not installable here: no rubygems), implementing exactly the calls the
# adapter makes, after yabeda-rb/yabeda's lib/yabeda.rb, dsl/class_methods.rb, counter.rb,
# gauge.rb: `configure` keeps blocks until `configure!` and class_execs them at once after it;
# `group` sets the group for the metrics declared in its block; metrics are registered as
# "<group>_<name>" in `metrics`; Counter#increment(tags, by:) and Gauge#set(tags, value);
# `collect` blocks run at `collect!` (the exporter calls it before each scrape). `exposition`
# names the series as yabeda-prometheus' adapter does (build_name: group, name, unit joined by
# "_") and refuses a metric without a comment, as it does.
module FakeYabeda
  Metric = Struct.new(:group, :name, :comment, :tags, :unit, :values, keyword_init: true)

  class Counter < Metric
    def increment(tags, by: 1)
      raise ArgumentError, "tags must be a Hash" unless tags.is_a?(Hash)
      raise ArgumentError, "counter increment must be >= 0, got #{by}" if by.negative?

      values[tags] = values.fetch(tags, 0) + by
    end
  end

  class Gauge < Metric
    def set(tags, value)
      raise ArgumentError, "tags #{tags.keys} not declared (#{tags})" unless tags.keys.sort == Array(self.tags).sort

      values[tags] = value
    end
  end

  class << self
    def reset!
      @metrics = {}
      @configurators = []
      @collectors = []
      @configured = false
      @group = nil
    end

    attr_reader :metrics

    def configured?
      @configured
    end

    def configure(&block)
      @configurators << block
      class_exec(&block) if configured?
      @group = nil
    end

    def configure!
      raise "already configured" if @configured

      @configurators.each { |b| class_exec(&b) }
      @configured = true
    end

    def group(name)
      @group = name
      return unless block_given?

      yield
      @group = nil
    end

    def counter(name, comment: nil, tags: [], unit: nil)
      register(Counter.new(group: @group, name: name, comment: comment, tags: tags, unit: unit, values: {}))
    end

    def gauge(name, comment: nil, tags: [], unit: nil)
      register(Gauge.new(group: @group, name: name, comment: comment, tags: tags, unit: unit, values: {}))
    end

    def collect(&block)
      @collectors << block
    end

    def collect!
      @collectors.each(&:call)
    end

    # name => { tags => value }, named as yabeda-prometheus exports them.
    def exposition
      collect!
      @metrics.values.to_h do |m|
        raise ArgumentError, "Prometheus require metrics to have comments" unless m.comment

        [[m.group, m.name, m.unit].compact.join("_"), m.values]
      end
    end

    private

    def register(metric)
      @metrics[[metric.group, metric.name].compact.join("_")] = metric
    end
  end
  reset!
end
