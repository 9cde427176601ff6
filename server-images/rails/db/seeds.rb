# frozen_string_literal: true

# 8 categories and 200 products with ample stock (a long load test's orders do not run out).
# Idempotent, and safe when several replicas start at once: a transaction-level advisory lock
# makes the others wait, then find the rows there.
ActiveRecord::Base.transaction do
  ActiveRecord::Base.connection.execute("SELECT pg_advisory_xact_lock(4242)")
  next if Category.exists?

  now = Time.current
  names = %w[Books Coffee Garden Kitchen Music Outdoor Tools Toys]
  Category.insert_all!(names.map { |n| { name: n, slug: n.downcase, created_at: now, updated_at: now } })
  categories = Category.order(:id).pluck(:id)
  Product.insert_all!(
    (1..200).map do |i|
      { category_id: categories[i % categories.size], name: "Product #{i}",
        description: "The #{i}th product of the shop. " * 4,
        price_cents: 199 + ((i * 7919) % 20_000), stock: 1_000_000, created_at: now, updated_at: now }
    end
  )
end
