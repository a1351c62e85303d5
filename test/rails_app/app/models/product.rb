# frozen_string_literal: true

class Product < ApplicationRecord
  validates :name, presence: true

  def price
    format("%.2f", price_cents / 100.0)
  end

  def low_stock?
    stock < 10
  end
end
