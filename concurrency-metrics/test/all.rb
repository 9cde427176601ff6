# frozen_string_literal: true

# Every concurrency_metrics test: ruby concurrency-metrics/test/all.rb (loopback only).
Dir[File.join(__dir__, "*_test.rb")].sort.each { |f| require f }
