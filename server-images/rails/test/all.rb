# frozen_string_literal: true

# Every Rails app test: ruby server-images/rails/test/all.rb (about 30 s, loopback only; starts
# its own PostgreSQL through the image's rootfs/postgres-start).
Dir[File.join(__dir__, "*_test.rb")].sort.each { |f| require f }
