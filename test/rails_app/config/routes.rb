# frozen_string_literal: true

Rails.application.routes.draw do
  resources :products, only: %i[index show]
  get "/slow" => "products#slow"
  get "/up" => proc { [200, { "content-type" => "text/plain" }, ["ok"]] }
  root "products#index"
end
