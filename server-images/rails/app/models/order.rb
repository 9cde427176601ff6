# frozen_string_literal: true

class Order < ApplicationRecord
  has_many :order_items, dependent: :destroy
  validates :total_cents, numericality: { only_integer: true, greater_than: 0 }

  class OutOfStock < StandardError; end

  # One order line, in one transaction: the product's row is locked (two orders of the last
  # unit cannot both pass the stock check), its stock decremented, the order written.
  def self.place!(product_id:, quantity:)
    transaction do
      product = Product.lock.find(product_id)
      raise OutOfStock, "only #{product.stock} of product #{product.id} left" if product.stock < quantity

      product.update!(stock: product.stock - quantity)
      order = create!(total_cents: product.price_cents * quantity, status: "placed")
      order.order_items.create!(product: product, quantity: quantity, unit_price_cents: product.price_cents)
      order
    end
  end
end
