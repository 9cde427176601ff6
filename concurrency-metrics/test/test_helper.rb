# frozen_string_literal: true

require "minitest/autorun"
# The C extension built for this Ruby and on the load path; the gem loaded; Work.
require_relative "native_build"

# A backend that keeps what it is given (the adapter interface: setup, record).
class Recorder
  attr_reader :samples, :info

  def initialize
    @samples = []
    @mutex = Mutex.new
  end

  def setup(info)
    @info = info
  end

  def record(sample)
    @mutex.synchronize { @samples << sample }
  end

  def sum(field)
    @mutex.synchronize { @samples.sum { |s| s[field] } }
  end
end
