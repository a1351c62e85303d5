# frozen_string_literal: true

ActiveRecord::Schema[7.2].define(version: 2026_11_27_000000) do
  create_table "products", force: :cascade do |t|
    t.string "name", null: false
    t.text "description"
    t.integer "price_cents", null: false, default: 0
    t.integer "stock", null: false, default: 0
    t.timestamps
  end
end
