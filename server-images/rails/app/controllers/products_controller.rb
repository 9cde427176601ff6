# frozen_string_literal: true

require "net/http"

class ProductsController < ApplicationController
  # GET /products(.json)?category=SLUG&limit=N — a page of products joined with their
  # categories, rendered by an ERB view (or as JSON).
  def index
    scope = Product.joins(:category)
                   .select("products.id, products.name, products.price_cents, products.stock, " \
                           "categories.name AS category_name, categories.slug AS category_slug")
                   .order("products.id")
                   .limit(int_param(:limit, 30, 1..100))
    scope = scope.where(categories: { slug: params[:category] }) if params[:category].present?
    @products = scope.to_a
    respond_to do |format|
      format.html
      format.json { render json: @products.map { |p| product_json(p) } }
    end
  end

  # GET /products/:id(.json) — the product, its category and how many were sold (an aggregate
  # over the order lines).
  def show
    @product = Product.includes(:category).find(params[:id])
    @sold = @product.order_items.sum(:quantity)
    respond_to do |format|
      format.html
      format.json { render json: product_json(@product).merge(sold: @sold) }
    end
  end

  # GET /products/:id/shipping?ms=N — a shipping quote from the carrier's API: the product is
  # read, then an HTTP call goes out (the delay server, SHIPPING_MS or ms per call). The
  # request keeps its DB connection while it waits, as any Rails action that queried first.
  def shipping
    product = Product.find(params[:id])
    ms = int_param(:ms, nil, 0..60_000) || Integer(Shop::Settings.shipping_ms(ENV).round)
    uri = URI("#{ENV.fetch('DELAY_URL')}?ms=#{ms}")
    response = Net::HTTP.start(uri.host, uri.port, open_timeout: 2, read_timeout: 2 + (ms / 1000.0)) do |http|
      http.get(uri.request_uri)
    end
    unless response.is_a?(Net::HTTPSuccess)
      return render(json: { error: "carrier answered #{response.code}" }, status: :bad_gateway)
    end

    render json: { product_id: product.id, carrier_ms: ms, quote_cents: 499 + (product.price_cents / 20) }
  rescue SystemCallError, Net::OpenTimeout, Net::ReadTimeout, IOError => e
    render json: { error: "carrier unreachable: #{e.class}" }, status: :bad_gateway
  end

  private

  def product_json(p)
    { id: p.id, name: p.name, price: p.price, stock: p.stock,
      category: p.respond_to?(:category_name) ? p.category_name : p.category.name }
  end
end
