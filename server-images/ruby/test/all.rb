# frozen_string_literal: true

# Every Ruby reference-app test: ruby server-images/ruby/test/all.rb (about 10 s, loopback only).
Dir[File.join(__dir__, "*_test.rb")].sort.each { |f| require f }
