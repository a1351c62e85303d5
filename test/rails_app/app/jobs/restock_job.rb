# frozen_string_literal: true

# Tops a product's stock back up (runs inline in this app).
class RestockJob < ApplicationJob
  queue_as :default

  def perform(product_id)
    product = Product.find(product_id)
    product.update!(stock: product.stock + 100)
  end
end
