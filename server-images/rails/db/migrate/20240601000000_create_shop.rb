# frozen_string_literal: true

class CreateShop < ActiveRecord::Migration[6.1]
  def change
    create_table :categories do |t|
      t.string :name, null: false
      t.string :slug, null: false, index: { unique: true }
      t.timestamps
    end
    create_table :products do |t|
      t.references :category, null: false, foreign_key: true
      t.string :name, null: false
      t.text :description
      t.integer :price_cents, null: false
      t.integer :stock, null: false, default: 0
      t.timestamps
    end
    create_table :orders do |t|
      t.integer :total_cents, null: false
      t.string :status, null: false
      t.timestamps
    end
    create_table :order_items do |t|
      t.references :order, null: false, foreign_key: true
      t.references :product, null: false, foreign_key: true
      t.integer :quantity, null: false
      t.integer :unit_price_cents, null: false
      t.timestamps
    end
  end
end
