# frozen_string_literal: true

class OrdersController < ApplicationController
  # A JSON API endpoint: no cookie session, nothing to forge.
  skip_forgery_protection

  # POST /orders (product_id, quantity 1..10; form or JSON) — placed in one transaction.
  def create
    product_id = int_param(:product_id, nil, 1..(2**31 - 1)) or raise BadParam, "product_id is required"
    order = Order.place!(product_id: product_id, quantity: int_param(:quantity, 1, 1..10))
    render json: { id: order.id, total_cents: order.total_cents, status: order.status }, status: :created
  rescue Order::OutOfStock => e
    render json: { error: e.message }, status: :conflict
  end

  # GET /orders/:id — the order with its lines and their products.
  def show
    order = Order.find(params[:id])
    lines = order.order_items.joins(:product).pluck("products.name", :quantity, :unit_price_cents)
    render json: { id: order.id, total_cents: order.total_cents, status: order.status,
                   lines: lines.map { |name, q, price| { product: name, quantity: q, unit_price_cents: price } } }
  end
end
