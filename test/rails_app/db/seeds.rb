# frozen_string_literal: true

# 2,000 products, as in the scaffold the issue was found with.
now = Time.now
rows = Array.new(2000) do |i|
  { name: "Product #{i + 1}", description: "A fine product number #{i + 1}. " * 4,
    price_cents: 100 + (i * 37 % 10_000), stock: i % 50, created_at: now, updated_at: now }
end
Product.insert_all(rows)
