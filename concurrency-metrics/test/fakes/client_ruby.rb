# frozen_string_literal: true

# A stand-in for the upstream prometheus-client (client_ruby >= 2; only GitLab's mmap fork is
# packaged in Debian), after prometheus/client_ruby: Registry#counter(name, docstring:, labels:,
# preset_labels:, store_settings:) / #gauge(same) / #get(name), refusing a second registration;
# Counter#increment(by:, labels:) refusing a negative increment; Gauge#set(value, labels:); both
# refusing labels other than the declared ones (LabelSetValidator).
module FakeClientRuby
  class Metric
    attr_reader :name, :values

    def initialize(name, docstring:, labels: [], preset_labels: {}, store_settings: {})
      raise ArgumentError, "docstring must be given" if docstring.to_s.empty?

      @name = name
      @labels = labels
      @store_settings = store_settings
      @values = {}
    end

    private

    def validate(labels)
      raise ArgumentError, "labels #{labels.keys} != declared #{@labels}" unless labels.keys.sort == @labels.sort

      labels
    end
  end

  class Counter < Metric
    def increment(by: 1, labels: {})
      raise ArgumentError, "increment must be a non-negative number" if by.negative?

      key = validate(labels)
      @values[key] = @values.fetch(key, 0) + by
    end
  end

  class Gauge < Metric
    def set(value, labels: {})
      @values[validate(labels)] = value
    end
  end

  class Registry
    def initialize
      @metrics = {}
    end

    def counter(name, docstring:, labels: [], preset_labels: {}, store_settings: {})
      register(Counter.new(name, docstring: docstring, labels: labels, preset_labels: preset_labels, store_settings: store_settings))
    end

    def gauge(name, docstring:, labels: [], preset_labels: {}, store_settings: {})
      register(Gauge.new(name, docstring: docstring, labels: labels, preset_labels: preset_labels, store_settings: store_settings))
    end

    def get(name)
      @metrics[name.to_sym]
    end

    private

    def register(metric)
      raise ArgumentError, "#{metric.name} has already been registered" if @metrics.key?(metric.name.to_sym)

      @metrics[metric.name.to_sym] = metric
    end
  end
end
