# frozen_string_literal: true

module ConcurrencyMetrics
  module Adapters
    # yabeda: counters in the group `ruby` with the names' suffixes, so yabeda-prometheus (and
    # yabeda-prometheus-mmap) export `ruby_running_seconds_total` etc. (its build_name joins
    # group, name and unit; no unit is set). API used (yabeda-rb/yabeda): Yabeda.configure with
    # group / counter(name, comment:) / gauge(name, comment:, tags:) / collect,
    # Yabeda.metrics (name => metric), Counter#increment(tags, by:), Gauge#set(tags, value).
    # Register before Yabeda.configure! (Rails: an initializer) — yabeda's Railtie calls it after
    # the initializers; later, configure applies at once.
    class Yabeda
      def initialize(yabeda)
        @yabeda = yabeda
        @names = Names::COUNTERS.transform_values { |(suffix, _)| Names.full(suffix) }
      end

      def setup(info)
        return if @yabeda.metrics.key?(@names[:running])

        counters = Names::COUNTERS
        info_name, info_help = Names::INFO
        group_name = Names::GROUP
        yabeda = @yabeda
        @yabeda.configure do
          group group_name do
            counters.each_value { |(suffix, help)| counter suffix.to_sym, comment: help }
            gauge info_name.to_sym, comment: info_help, tags: Names::INFO_LABELS
          end
          collect { yabeda.metrics.fetch(Names.full(info_name)).set(info, 1) }
        end
      end

      def setup_totals(fields)
        @totals = fields.to_h { |f| [f, Names.full(Names::TOTALS.fetch(f)[0])] }
        missing = Names::TOTALS.slice(*fields).reject { |_, (suffix, _)| @yabeda.metrics.key?(Names.full(suffix)) }
        return if missing.empty?

        group_name = Names::GROUP
        @yabeda.configure do
          group group_name do
            missing.each_value { |(suffix, help)| counter suffix.to_sym, comment: help }
          end
        end
      end

      def add(field, seconds)
        name = @totals&.[](field)
        @yabeda.metrics[name]&.increment({}, by: seconds) if name
      end

      # Before Yabeda.configure! the metrics do not exist yet: nothing to add to.
      def record(sample)
        metrics = @yabeda.metrics
        @names.each do |field, name|
          metric = metrics[name]
          next unless metric

          metric.increment({}, by: field == :requests ? 1 : sample[field])
        end
      end
    end
  end
end
